"""``benchmax validate A B`` and ``validate --env ...``: every env of the mixture checked, each report under
its env's name (the per-rollout ``tools_for`` sets among what is checked), exit 1 when any env has a problem;
and ``--data-dir NAME:DIR`` giving one env of a mixture its data directory (validate, eval, resume)."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import tools_for_env
from runkit import run_cli, write_split

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run
from benchmax.runner import RunConfig

ROW_TOOLS = f"{tools_for_env.__file__}:RowToolsEnv"


def _row(kind: str, answer: str) -> dict:
    return {"prompt_messages": [{"role": "user", "content": f"{kind} row"}], "kind": kind, "answer": answer}


def _tools_data(tmp_path: Path) -> Path:
    data = tmp_path / "tools-data"
    write_split(data, [_row("text", "hi")], "train")
    write_split(data, [_row("text", "hi"), _row("calculator", "5")], "eval")
    return data


def _flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def _sections(text: str) -> dict[str, str]:
    """The output under each ``env NAME (SPEC)`` rule, by name."""
    found: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        head = re.match(r"^env (\S+) \(.*\)$", line)
        if head:
            name = head.group(1)
            found[name] = ""
        elif re.match(r"^env \S+: ", line):
            name = None
        elif name is not None:
            found[name] += line + "\n"
    return found


@pytest.mark.parametrize("form", ["positional", "env-option"])
def test_validate_of_a_mixture_checks_every_env_and_its_tool_sets(tmp_path, form):
    a = write_env(tmp_path / "envs", "a")
    data = _tools_data(tmp_path)
    envs = [a, "--env", f"b={ROW_TOOLS}"] if form == "positional" else ["--env", a, "--env", f"b={ROW_TOOLS}"]

    result = run_cli("validate", *envs, "--data-dir", f"b:{data}")

    assert result.returncode == 0, result.stdout
    sections = _sections(result.stdout)
    assert sorted(sections) == ["a", "b"], result.stdout
    assert f"loaded {a / 'env.py'}:AEnv" in _flat(sections["a"])
    assert "tools_for" not in sections["a"]
    assert "tools_for: 2 distinct valid tool sets over 3 examples" in _flat(sections["b"]), "b read its --data-dir"
    assert "env a: valid" in result.stdout and "env b: valid" in result.stdout


def test_a_mixture_with_one_bad_env_exits_1_with_the_problem_under_that_env(tmp_path):
    a = write_env(tmp_path / "envs", "a")
    data = _tools_data(tmp_path)

    result = run_cli(
        "validate", a, "--env", f"b={ROW_TOOLS}", "--data-dir", f"b:{data}",
        "--env-arg", f"b:broken={json.dumps('raises')}",
    )  # fmt: skip

    assert result.returncode == 1, result.stdout
    sections = _sections(result.stdout)
    assert "error" not in sections["a"].lower(), sections["a"]
    assert "RowToolsEnv.tools_for raised KeyError: 'no tool table for this row'" in _flat(sections["b"])
    assert f"({data / 'eval.jsonl'}:2)" in _flat(sections["b"])
    assert "env a: valid" in result.stdout and "env b: 1 problem" in result.stdout
    assert "1 problem found in 1 of 2 envs" in _flat(result.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data-dir", "{data}"], "a mixture's envs each read their own data; say which env a directory is for, "
                                   "as NAME:DIR (envs: a, b)"),
        (["--data-dir", "z:{data}"], "as NAME:DIR (envs: a, b)"),
        (["--data-dir", "b:{data}", "--data-dir", "b:{data}"], "env 'b' is given a data directory twice"),
    ],
    ids=["plain-dir", "unknown-env", "twice"],
)
def test_a_data_dir_that_names_no_env_of_the_mixture_is_refused(tmp_path, args, message):
    a, b = write_env(tmp_path / "envs", "a"), write_env(tmp_path / "envs", "b")
    data = _tools_data(tmp_path)

    result = run_cli("validate", a, b, *(arg.format(data=data) for arg in args))

    assert result.returncode == 2, result.stdout
    assert message in _flat(result.stdout), result.stdout


def test_one_env_given_two_data_dirs_is_refused(tmp_path):
    a = write_env(tmp_path / "envs", "a")

    result = run_cli("validate", a, "--data-dir", tmp_path, "--data-dir", tmp_path)

    assert result.returncode == 2, result.stdout
    assert "a run of one env reads one data directory" in _flat(result.stdout)


def test_eval_of_a_mixture_reads_one_envs_data_from_its_data_dir_and_resume_keeps_it(tmp_path, server):
    a = write_env(tmp_path / "envs", "a", rows=2)
    b = write_env(tmp_path / "envs", "b", rows=1)
    elsewhere = write_env(tmp_path / "elsewhere", "b", rows=3)
    for split in ("eval", "train"):
        (b / f"{split}.jsonl").unlink()  # b's own directory holds no data: it must come from --data-dir
    common = ("--base-url", server.base_url, "--model", "scripted", "--no-progress")

    result = run_cli("eval", a, b, "--data-dir", f"b:{elsewhere}", *common, "--run-dir", tmp_path / "run")

    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        per_env = Counter(rollout.env for rollout in run.rollouts())
        mix = RunConfig.from_meta(run.run_meta.config).mix
        provenance = run.run_meta.provenance
    assert per_env == {"a": 2, "b": 3}
    assert mix is not None and {m.name: m.data_dir for m in mix.members} == {"a": None, "b": elsewhere}
    assert provenance is not None
    assert [Path(item.path).parent for item in dict(provenance.members)["b"].data.files] == [elsewhere]
    resumed = run_cli("eval", "--resume", tmp_path / "run", "--no-progress")
    assert resumed.returncode == 0, resumed.stdout
