"""An env package made by ``benchmax init NAME --package``, pip-installed into a fresh venv, run by name.

The venv is real (``python -m venv``) and the install is pip's own editable
install; no network is used: the venv sees this interpreter's site-packages
through a ``.pth`` file that adds it as a site directory (benchmax's
dependencies, setuptools), pip runs with
``--no-index --no-build-isolation --no-deps``, and this checkout's ``src`` comes
first on ``PYTHONPATH``. Every command runs in a subprocess of the venv's python,
from the scaffold's parent directory, where a directory of the env's name exists
(the package's checkout) and must not hide the installed env.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

import pytest
from runkit import cli_env

import benchmax
from benchmax import open_run
from benchmax.testing import ScriptedServer

NAME = "capital-quiz"
MODULE = "capital_quiz"
SRC = Path(benchmax.__file__).resolve().parents[1]


class Venv:
    """A venv holding the scaffolded package, and the way to run commands in it."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work
        self.python = root / "bin" / "python"

    def run(self, *args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return self.call([self.python, *args], timeout=timeout)

    def benchmax(self, *args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return self.run("-m", "benchmax.cli", *args, timeout=timeout)

    def call(self, command: Sequence[str | Path], timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(part) for part in command],
            cwd=self.work,
            env=cli_env(PYTHONPATH=str(SRC), PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    work = tmp_path_factory.mktemp("packages")
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(work / "venv")], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    env = Venv(work / "venv", work)
    site = env.run("-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    # every site dir of this interpreter (a venv made with --system-site-packages has two),
    # added as site dirs so their own .pth files (an editable benchmax) apply too
    outer = [sysconfig.get_paths()["purelib"], *(path for path in sys.path if Path(path).name == "site-packages")]
    lines = "".join(f"import site; site.addsitedir({path!r})\n" for path in dict.fromkeys(outer))
    Path(site, "outer-site.pth").write_text(lines)

    seen = env.run("-c", "import benchmax; print(benchmax.__file__)").stdout.strip()
    assert Path(seen).resolve().is_relative_to(SRC), f"the venv imports benchmax from {seen}, not this checkout"

    scaffolded = env.benchmax("init", NAME, "--package")
    assert scaffolded.returncode == 0, scaffolded.stdout
    assert f"pip install -e {NAME}" in scaffolded.stdout
    installed = env.call(
        [sys.executable, "-m", "pip", "--python", env.python, "install", "--no-index", "--no-deps",
         "--no-build-isolation", "-e", work / NAME],
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout
    return env


def test_the_scaffold_is_a_package_with_its_entry_point_module_data_and_tests(venv):
    root = venv.work / NAME
    pyproject = (root / "pyproject.toml").read_text()

    assert '[project.entry-points."benchmax.envs"]' in pyproject
    assert f'{NAME} = "{MODULE}.env:CapitalQuizEnv"' in pyproject
    for part in ("env.py", "train.jsonl", "eval.jsonl", "__init__.py"):
        assert (root / "src" / MODULE / part).is_file(), part
    assert (root / "tests" / f"test_{MODULE}.py").is_file()
    assert venv.benchmax("init", NAME, "--package").returncode == 1, "an existing scaffold is never overwritten"


def test_list_shows_the_installed_env_with_its_version_and_description(venv):
    listed = venv.benchmax("list", "--json")

    assert listed.returncode == 0, listed.stdout
    records = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    [mine] = [record for record in records if record["name"] == NAME]
    assert mine["version"] == "0.1.0" and mine["distribution"] == NAME
    assert mine["entry_point"] == f"{MODULE}.env:CapitalQuizEnv"
    assert mine["description"] == f"{NAME}: a one-turn quiz scored by exact match."
    table = venv.benchmax("list")
    assert table.returncode == 0 and NAME in table.stdout and "0.1.0" in table.stdout


def test_validate_finds_the_installed_env_by_name(venv):
    checked = venv.benchmax("validate", NAME)

    assert checked.returncode == 0, checked.stdout
    assert f"ok loaded {venv.work / NAME / 'src' / MODULE / 'env.py'}:CapitalQuizEnv" in checked.stdout
    assert "ok eval: 2 examples checked" in checked.stdout
    assert checked.stdout.rstrip().endswith("valid")


def test_eval_by_name_runs_against_a_model_server_and_records_the_package(venv):
    with ScriptedServer(policy=lambda body: {"content": "paris"}) as server:
        done = venv.benchmax(
            "eval", NAME, "--base-url", server.base_url, "--model", "scripted", "--run-dir", venv.work / "run",
            "--no-progress",
        )  # fmt: skip

    assert done.returncode == 0, done.stdout
    assert f"{NAME} 0.1.0 (package {NAME}, {MODULE}.env:CapitalQuizEnv)" in done.stdout
    with open_run(venv.work / "run") as run:
        rewards = sorted(record.rewards["correct"] for record in run.rollouts())
        provenance = run.meta["provenance"]
    assert rewards == [0.0, 1.0]  # paris is right for France, wrong for Japan
    assert provenance["env"] == {
        "spec": NAME, "class": f"{MODULE}.env.CapitalQuizEnv", "kind": "package", "name": NAME,
        "distribution": NAME, "version": "0.1.0", "entry_point": f"{MODULE}.env:CapitalQuizEnv",
        "path": str(venv.work / NAME / "src" / MODULE / "env.py"),
    }  # fmt: skip
    assert [Path(entry["path"]).name for entry in provenance["data"]["files"]] == ["eval.jsonl"]


def test_an_unknown_name_is_a_usage_error_naming_the_installed_envs(venv):
    failed = venv.benchmax("validate", "capital-quizz")

    assert failed.returncode == 2, failed.stdout
    assert "'capital-quizz' is no installed env" in failed.stdout
    assert NAME in failed.stdout


def test_the_scaffolds_own_test_passes_in_the_venv(venv):
    tested = venv.run("-m", "pytest", "-q", "-p", "no:cacheprovider", venv.work / NAME / "tests", timeout=300)

    assert tested.returncode == 0, tested.stdout
    assert "1 passed" in tested.stdout


def test_train_by_name_trains_the_installed_env(venv):
    pytest.importorskip("transformers", reason="training needs the train extra")
    from benchmax.train.tiny import build_tiny_model

    model = build_tiny_model(venv.work / "tiny-model", bias=0)
    trained = venv.benchmax(
        "train", NAME, "--model", model, "--run-dir", venv.work / "train-run", "--max-steps", "1",
        "--group-size", "2", "--prompts-per-step", "2", "--max-tokens", "4", timeout=600,
    )  # fmt: skip

    assert trained.returncode == 0, trained.stdout
    assert "trained 1 steps" in trained.stdout
    with open_run(venv.work / "train-run") as run:
        assert run.meta["provenance"]["env"]["kind"] == "package"
        assert run.meta["provenance"]["env"]["version"] == "0.1.0"
