"""benchmax 0.2.5's Harbor and Python 3.12 tests pass against this tree (#30 item 7), but for the exclusions.

``tests/compat/test_upstream_suite.py`` runs the rest of 0.2.5's unit tests on
CI's Python 3.11; these need Python 3.12+ (the harbor package, the ``type``
statement in 0.2.5's fake model server), so they run here, in CI's Harbor root.
The machinery is the same (``tests/compat/upstream_suite.py``); the exclusions
are the ``suite = "harbor"`` entries of ``upstream_exclusions.toml``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("harbor", reason="the harbor package needs Python >= 3.12; CI runs these in its 3.13 environment")

_SPEC = importlib.util.spec_from_file_location(
    "upstream_suite", Path(__file__).resolve().parents[1] / "compat" / "upstream_suite.py"
)
assert _SPEC is not None and _SPEC.loader is not None
upstream_suite = sys.modules.get("upstream_suite") or importlib.util.module_from_spec(_SPEC)
if "upstream_suite" not in sys.modules:
    sys.modules["upstream_suite"] = upstream_suite
    _SPEC.loader.exec_module(upstream_suite)

TARGETS = ["tests/unit/harbor", "tests/unit/envs/test_base_env_group.py"]


def test_0_2_5s_harbor_and_python_3_12_tests_pass_here(tmp_path: Path) -> None:
    root = upstream_suite.upstream_tests(tmp_path)
    result = upstream_suite.run_suite(root, TARGETS, upstream_suite.load_exclusions("harbor"))
    upstream_suite.check_suite(result)
