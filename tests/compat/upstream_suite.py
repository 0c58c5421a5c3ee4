"""Running benchmax 0.2.5's own unit tests (from its PyPI sdist) against this tree.

The sdist is fetched at install time (``.ci/run`` downloads it before the tests
run without a network) and named by ``BENCHMAX_UPSTREAM_TESTS``: the
``benchmax-0.2.5.tar.gz`` file or the directory it unpacks to. Only its
``tests/`` and ``pytest.ini`` are used, copied beside each other into a scratch
directory, so 0.2.5's own package is never importable; ``benchmax`` comes from
this tree's ``src``. ``BENCHMAX_UPSTREAM_TESTS=off`` turns the check off on
purpose. Tests that may not pass here are listed in ``upstream_exclusions.toml``,
each with its reason; they are deselected, every other test must pass.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

SUMMARY = re.compile(r"^\d+ (passed|failed|errors?|deselected|skipped)\b.* in [\d.]+s")
REPO = Path(__file__).resolve().parents[2]
EXCLUSIONS = Path(__file__).with_name("upstream_exclusions.toml")
FETCH = (
    "pip download --no-binary :all: --no-deps --ignore-requires-python benchmax==0.2.5 -d DIR, "
    "then BENCHMAX_UPSTREAM_TESTS=DIR/benchmax-0.2.5.tar.gz (BENCHMAX_UPSTREAM_TESTS=off turns this check off)"
)


@dataclass(frozen=True, slots=True)
class Exclusion:
    """A node id prefix of 0.2.5's suite that is not run here, and why."""

    test: str
    reason: str
    suite: str


@dataclass(frozen=True, slots=True)
class SuiteResult:
    """The outcome of each upstream test that ran, by node id, and pytest's own summary line."""

    outcomes: dict[str, str]
    summary: str
    output: str

    def count(self, outcome: str) -> int:
        return sum(1 for value in self.outcomes.values() if value == outcome)


def load_exclusions(suite: str) -> list[Exclusion]:
    """The exclusions of one suite ("main" runs on this Python, "harbor" in the Harbor root)."""
    data = tomllib.loads(EXCLUSIONS.read_text(encoding="utf-8"))
    entries = []
    for index, entry in enumerate(data.get("exclude", []), start=1):
        test, reason, where = entry.get("test"), entry.get("reason"), entry.get("suite", "main")
        if not isinstance(test, str) or not test.startswith("tests/unit/"):
            raise ValueError(f"{EXCLUSIONS.name}: entry {index} needs test = 'tests/unit/...' (a node id prefix)")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"{EXCLUSIONS.name}: entry {index} ({test}) needs a reason")
        if where not in ("main", "harbor"):
            raise ValueError(f"{EXCLUSIONS.name}: entry {index} ({test}) has suite {where!r}, not 'main' or 'harbor'")
        if where == suite:
            entries.append(Exclusion(test, reason, where))
    return entries


def upstream_tests(tmp_path: Path) -> Path:
    """A scratch copy of the sdist's ``tests/`` and ``pytest.ini``; fails (or skips, when off) without it."""
    source = os.environ.get("BENCHMAX_UPSTREAM_TESTS", "")
    if source == "off":
        pytest.skip("BENCHMAX_UPSTREAM_TESTS=off: 0.2.5's own test suite is turned off on purpose")
    if not source or not Path(source).exists():
        pytest.fail(f"BENCHMAX_UPSTREAM_TESTS names no benchmax 0.2.5 sdist ({source or 'unset'}); fetch it: {FETCH}")
    path = Path(source)
    if path.is_file():
        with tarfile.open(path) as archive:
            archive.extractall(tmp_path / "sdist", filter="data")
        roots = [entry for entry in (tmp_path / "sdist").iterdir() if entry.is_dir()]
        assert len(roots) == 1, f"{path} should unpack to one directory, got {roots}"
        path = roots[0]
    if not (path / "tests" / "unit").is_dir() or not (path / "pytest.ini").is_file():
        pytest.fail(f"{path} holds no tests/unit and pytest.ini: is it the benchmax 0.2.5 sdist? {FETCH}")
    root = tmp_path / "upstream"
    root.mkdir()
    shutil.copytree(path / "tests", root / "tests")
    shutil.copy(path / "pytest.ini", root / "pytest.ini")
    return root


def run_suite(root: Path, targets: list[str], exclusions: list[Exclusion], python: str = sys.executable) -> SuiteResult:
    """Run ``targets`` of the suite at ``root`` in a subprocess, ``benchmax`` imported from this tree."""
    for exclusion in exclusions:
        file = exclusion.test.split("::", 1)[0]
        assert (root / file).exists(), f"{EXCLUSIONS.name}: {exclusion.test} names no file of 0.2.5's suite (stale?)"
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    environment["PYTHONPATH"] = str(REPO / "src")
    where = subprocess.run(
        [python, "-c", "import benchmax; print(benchmax.__file__)"],
        capture_output=True, text=True, cwd=root, env=environment, timeout=120,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr[-2000:]
    assert Path(where.stdout.strip()).is_relative_to(REPO / "src"), f"benchmax imported from {where.stdout.strip()}"
    command = [
        python, "-m", "pytest", *targets, "-p", "no:cacheprovider", "-o", "addopts=",
        "-m", "not slow and not remote and not integration", "--import-mode=importlib",
        "--continue-on-collection-errors", "-q", "-rA", "--tb=line", "--timeout=120",
    ]  # fmt: skip
    for exclusion in exclusions:  # a whole file or folder is not even imported (it may not import here)
        command.append(f"--deselect={exclusion.test}" if "::" in exclusion.test else f"--ignore={exclusion.test}")
    done = subprocess.run(command, capture_output=True, text=True, cwd=root, env=environment, timeout=1800)
    outcomes: dict[str, str] = {}
    summary = ""
    for line in done.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS") and rest.startswith("tests/"):
            outcomes[rest.split(" - ", 1)[0].strip()] = word
        elif SUMMARY.match(line.strip("= ")):
            summary = line.strip("= ")
    return SuiteResult(outcomes, summary, done.stdout[-20000:] + done.stderr[-5000:])


def check_suite(result: SuiteResult) -> None:
    """Every test that ran passed (a skip is a failure to run); the pass count is printed for the log."""
    print(f"benchmax 0.2.5's suite on this tree: {result.summary}")
    bad = {test: outcome for test, outcome in result.outcomes.items() if outcome not in ("PASSED", "XFAIL")}
    assert result.count("PASSED") > 0, f"no upstream test passed:\n{result.output}"
    assert not bad, (
        f"{len(bad)} upstream tests did not pass ({result.summary}); fix benchmax or list them, each with its "
        f"reason, in {EXCLUSIONS.name}: {bad}\n{result.output}"
    )
