"""The reference interpreter: benchmax 0.2.5 on Python 3.12, named by ``BENCHMAX_REFERENCE_PYTHON``.

``.ci/run`` builds it with ``bench/reference/setup.sh`` and exports the
variable; under CI a missing interpreter fails instead of skipping, so the
side-by-side checks cannot silently stop running.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def reference_python() -> str:
    python = os.environ.get("BENCHMAX_REFERENCE_PYTHON")
    problem = None
    if not python or not Path(python).exists():
        problem = (
            "BENCHMAX_REFERENCE_PYTHON names no Python with benchmax 0.2.5 (bash bench/reference/setup.sh builds one)"
        )
    else:
        found = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('benchmax'))"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if found.stdout.strip() != "0.2.5":
            problem = f"{python} has benchmax {found.stdout.strip() or '(none)'}, not 0.2.5: {found.stderr[-500:]}"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    return python
