"""SFT validation and bundle metadata give what benchmax 0.2.5 gives, file for file and byte for byte.

The expected results were recorded from 0.2.5 (``reference_0.2.5.json``): for
163 generated SFT files, either the canonical JSONL or every issue (message,
location, line, row, in order); for the bundle cases, the normalised
dependencies, the metadata bytes and the digest.
"""

from __future__ import annotations

import json
import sys

from compat_data import BUNDLE_CASES, sft_files
from compat_support import RECORDED, run_harness

REFERENCE = json.loads(RECORDED.read_text())


def test_sft_files_validate_exactly_as_in_0_2_5(tmp_path):
    paths = sft_files(tmp_path / "sft")
    ours = run_harness(sys.executable, {"kind": "sft", "paths": paths}, tmp_path / "run", ours=True)["results"]
    assert len(ours) == len(REFERENCE["sft"]) == 163
    for path, mine, theirs in zip(paths, ours, REFERENCE["sft"], strict=True):
        assert mine == theirs, path
    assert sum("canonical" in result for result in ours) == 44  # some valid, most broken


def test_bundle_metadata_and_digests_are_0_2_5s(tmp_path):
    ours = run_harness(sys.executable, {"kind": "bundle_metadata", "cases": BUNDLE_CASES}, tmp_path, ours=True)
    assert ours["results"] == REFERENCE["bundle_metadata"]
