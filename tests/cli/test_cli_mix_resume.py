"""``benchmax eval --resume`` of a mixture after one env's code or data changed: the warning, the stored
``provenance_resumes`` and the refusal of changed data name that env; the summary's provenance shows
each env's code and data."""

from __future__ import annotations

import sys
from pathlib import Path

from runkit import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_a_resumed_mixture_names_the_env_whose_code_or_data_changed(tmp_path, server):
    envs = [write_env(tmp_path / "envs", name, rows=2) for name in "abc"]
    run_dir = tmp_path / "run"
    first = run_cli(
        "eval", *envs, "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_dir, "--no-progress"
    )
    assert first.returncode == 0, first.stdout
    shown = _flat(first.stdout)
    assert "provenance" in shown and "env mixture of a, b, c" in shown
    for name in "abc":
        assert f"{name}: env {envs['abc'.index(name)] / 'env.py'}" in shown, shown
        assert f"{name}: data" in shown and "eval.jsonl" in shown

    code = envs[1] / "env.py"
    code.write_text(code.read_text() + "\n# changed since the run started\n")
    data = envs[2] / "eval.jsonl"
    data.write_text(data.read_text().replace("c question 0", "c question zero"))
    resumed = run_cli("eval", "--resume", run_dir, "--no-progress")

    assert resumed.returncode == 2, resumed.stdout
    said = _flat(resumed.stdout)
    assert "env 'b': env code differs" in said and "env 'c': data differs" in said, resumed.stdout
    assert "env 'a'" not in said
    assert "the dataset changed since this run started" in said and "first difference at index 2, of env 'c'" in said
    with open_run(run_dir) as run:
        changes = run.run_meta.provenance_resumes[-1].changes
    assert [change.split(":")[0] for change in changes] == ["env 'b'", "env 'c'"], changes
