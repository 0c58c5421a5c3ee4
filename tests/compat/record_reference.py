"""Record what benchmax 0.2.5 does in every compat scenario into ``reference_0.2.5.json``.

    python tests/compat/record_reference.py "$(bash bench/reference/setup.sh)"

Run with this project's test interpreter (it starts the scripted servers);
the argument is the 0.2.5 interpreter. Re-record only when a scenario changes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compat_data import BUNDLE_CASES, sft_files  # noqa: E402
from compat_scenarios import SCENARIOS  # noqa: E402
from compat_support import RECORDED, play, run_harness  # noqa: E402


def main() -> None:
    python = sys.argv[1]
    recorded: dict = {"scenarios": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for scenario in SCENARIOS:
            run = play(scenario, python, root / scenario.name, ours=False)
            recorded["scenarios"][scenario.name] = {key: run[key] for key in run if key != "raw"}
            print(scenario.name, json.dumps(run["outcome"])[:200], file=sys.stderr)
        paths = sft_files(root / "sft")
        sft = run_harness(python, {"kind": "sft", "paths": paths}, root / "sft-run", ours=False)
        recorded["sft"] = sft["results"]
        bundle = run_harness(python, {"kind": "bundle_metadata", "cases": BUNDLE_CASES}, root / "bundle", ours=False)
        recorded["bundle_metadata"] = bundle["results"]
        recorded["benchmax"] = sft["benchmax"]
    RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
