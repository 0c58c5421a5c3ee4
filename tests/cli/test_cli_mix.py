"""``benchmax eval A B C`` and ``--env [NAME=]SPEC[=WEIGHT]`` in a real subprocess against the scripted server."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from runkit import cli_env, run_cli, start_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "mix"))

from mixenvs import write_env

from benchmax import open_run
from benchmax.runner import RunConfig


def _envs(tmp_path: Path, rows=(3, 2, 1), sleep: float | None = None) -> list[Path]:
    return [
        write_env(tmp_path / "envs", name, rows=count, sleep=sleep) for name, count in zip("abc", rows, strict=True)
    ]


def _per_env(run_dir: Path) -> Counter[str]:
    with open_run(run_dir) as run:
        return Counter(rollout.example_id.split("/")[0] for rollout in run.rollouts())


def _eval(tmp_path: Path, server, *args: str | Path):
    return run_cli(
        "eval", *args, "--base-url", server.base_url, "--model", "scripted", "--run-dir", tmp_path / "run",
        "--no-progress",
    )  # fmt: skip


def test_eval_of_several_envs_runs_them_as_one_mixture(tmp_path, server):
    a, b, c = _envs(tmp_path)
    trace = tmp_path / "trace.jsonl"

    result = _eval(tmp_path, server, a, b, c, "--group-size", "2", "--env-arg", f"b:trace={json.dumps(str(trace))}")

    assert result.returncode == 0, result.stdout
    assert "benchmax eval a+b+c" in result.stdout
    assert _per_env(tmp_path / "run") == {"a": 6, "b": 4, "c": 2}
    with open_run(tmp_path / "run") as run:
        mix = RunConfig.from_meta(run.run_meta.config).mix
    assert mix is not None
    assert [(m.name, m.spec, m.weight, dict(m.env_kwargs), m.max_examples) for m in mix.members] == [
        ("a", str(a), 1.0, {}, None),
        ("b", str(b), 1.0, {"trace": str(trace)}, None),
        ("c", str(c), 1.0, {}, None),
    ]
    assert {json.loads(line)[0] for line in trace.read_text().splitlines()} == {"b"}, "b's kwargs reached b only"


def test_env_options_name_weigh_and_cap_each_env(tmp_path, server):
    a, b, c = _envs(tmp_path, rows=(4, 4, 4))

    result = _eval(
        tmp_path, server, "--env", f"first={a}=0.5", "--env", f"{b}=0.3", "--env", f"third={c}",
        "--max-examples", "3", "--env-max-examples", "first=1", "--seed", "5",
    )  # fmt: skip

    assert result.returncode == 0, result.stdout
    assert _per_env(tmp_path / "run") == {"first": 1, "b": 3, "third": 3}
    with open_run(tmp_path / "run") as run:
        mix = RunConfig.from_meta(run.run_meta.config).mix
    assert mix is not None and mix.seed == 5
    assert [(m.name, m.weight, m.max_examples) for m in mix.members] == [
        ("first", 0.5, 1),
        ("b", 0.3, 3),
        ("third", 1.0, 3),
    ]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--env", "{a}=abc", "--env", "{b}"], 2, "env '{a}': weight 'abc' does not parse as a number"),
        (["--env", "x={a}=-1", "--env", "{b}"], 2, "env 'x': weight '-1' must be a finite number >= 0"),
        (["--env", "{a}=0", "--env", "{b}=0"], 2, "the weights of a, b sum to 0"),
        (["{a}", "{a}"], 2, "two envs are named 'a'"),
        (["{a}", "{b}", "--env-arg", "k=1"], 2, "in a mixture say which env it is for, as NAME:KEY=VALUE"),
        (["{a}", "{b}", "--env-arg", "z:k=1"], 2, "no env of the mixture is named 'z'"),
        (["{a}", "{b}", "--env-max-examples", "a=0"], 2, "write NAME=N with N >= 1"),
        (["{a}", "{b}", "--data-dir", "."], 2, "each read their own data"),
        (["{a}", "{broken}"], 2, "env 'broken' ({broken}) failed to load: "),
        (["{a}", "{b}", "--env-arg", "a:nope=1"], 2, "env 'a' ({a}) failed to load: cannot construct AEnv"),
    ],
    ids=[
        "weight-unparsed",
        "weight-negative",
        "weights-zero",
        "same-name",
        "plain-env-arg",
        "unknown-env-arg",
        "bad-cap",
        "data-dir",
        "fails-to-load",
        "bad-kwarg",
    ],
)
def test_bad_mixtures_are_refused_before_any_rollout_naming_the_env(tmp_path, server, args, code, message):
    a, b, _ = _envs(tmp_path)
    broken = tmp_path / "envs" / "broken"
    broken.mkdir()
    (broken / "env.py").write_text("raise RuntimeError('cannot start')\n")
    places = {"a": a, "b": b, "broken": broken}

    result = _eval(tmp_path, server, *(arg.format(**places) for arg in args))

    assert result.returncode == code, result.stdout
    flat = " ".join(result.stdout.split()).replace("│", "").replace("  ", " ")
    assert " ".join(message.format(**places).split()) in " ".join(flat.split()), result.stdout
    assert not (tmp_path / "run").exists(), "nothing is created before the mixture is known to be good"
    assert not server.requests, "no rollout ran"


def _groups(run_dir: Path) -> int:
    try:
        with sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM groups").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_a_stopped_mixture_resumes_running_only_each_envs_missing_groups(tmp_path, server):
    envs = _envs(tmp_path, rows=(6, 4, 2), sleep=0.3)  # a window of seconds to stop it in, on a loaded machine too
    run_dir = tmp_path / "run"
    proc = start_cli(
        "eval", *envs, "--base-url", server.base_url, "--model", "scripted", "--run-dir", run_dir,
        "--concurrency", "1", "--no-progress",
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while _groups(run_dir) < 3:
        assert proc.poll() is None, proc.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, output
    before = _per_env(run_dir)
    assert 3 <= sum(before.values()) < 12
    requests = len(server.requests)

    resumed = run_cli("eval", "--resume", run_dir, "--no-progress", env=cli_env())

    assert resumed.returncode == 0, resumed.stdout
    assert _per_env(run_dir) == {"a": 6, "b": 4, "c": 2}
    new = Counter(body["messages"][0]["content"].split()[0] for body in server.requests[requests:])
    assert new == {
        name: {"a": 6, "b": 4, "c": 2}[name] - before[name]
        for name in "abc"
        if {"a": 6, "b": 4, "c": 2}[name] - before[name]
    }


def test_a_repeated_mixture_is_answered_by_the_cache_and_diff_compares_the_two_runs(tmp_path, server):
    envs = _envs(tmp_path)
    common = ("--base-url", server.base_url, "--model", "scripted", "--no-progress", "--seed", "1",
              "--cache", tmp_path / "cache")  # fmt: skip

    first = run_cli("eval", *envs, *common, "--run-dir", tmp_path / "one")
    assert first.returncode == 0, first.stdout
    asked = len(server.requests)
    assert asked == 6
    second = run_cli("eval", *envs, *common, "--run-dir", tmp_path / "two")
    assert second.returncode == 0, second.stdout
    assert len(server.requests) == asked, "every request of the repeated mixture came from the cache"
    assert _per_env(tmp_path / "two") == _per_env(tmp_path / "one") == {"a": 3, "b": 2, "c": 1}
    with open_run(tmp_path / "two") as run:
        cost = run.run_meta.cost
    assert cost is not None and cost["calls"], cost

    diff = run_cli("diff", tmp_path / "one", tmp_path / "two")
    assert diff.returncode == 0, diff.stdout
    assert "warning" not in diff.stdout, "two runs of one mixture are runs of the same env"
    assert "correct" in diff.stdout


def test_rescore_takes_one_envs_new_code_and_leaves_the_others_as_stored(tmp_path, server):
    a, b = _envs(tmp_path)[:2]
    first = _eval(tmp_path, server, a, b)
    assert first.returncode == 0, first.stdout
    new_b = write_env(tmp_path / "v2", "b", rows=2, component="rescored")

    result = run_cli("rescore", tmp_path / "run", "--env", f"b={new_b}", "--run-dir", tmp_path / "rescored")

    assert result.returncode == 0, result.stdout
    with open_run(tmp_path / "run") as run:
        before = {r.rollout_id: dict(r.rewards) for r in run.rollouts()}
    with open_run(tmp_path / "rescored") as run:
        after = {r.rollout_id: (r.example_id, dict(r.rewards)) for r in run.rollouts()}
        mix = RunConfig.from_meta(run.run_meta.config).mix
        provenance = run.run_meta.provenance
    assert set(after) == set(before)
    # (which components are zero-filled into the other env's rollouts is the store's rule: left out here)
    for rollout_id, (example_id, rewards) in after.items():
        if example_id.startswith("a/"):
            assert rewards["correct"] == before[rollout_id]["correct"] == 1.0, "env a scored by its stored code"
            assert not rewards.get("rescored")
        else:
            assert rewards["rescored"] == 1.0 and not rewards.get("correct"), "env b scored by its new code"
    assert mix is not None and [(m.name, m.spec) for m in mix.members] == [("a", str(a)), ("b", str(new_b))]
    assert provenance is not None and dict(provenance.members)["b"].env.spec == str(new_b)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{other}"], "is a mixture of a, b: give an env's new code as --env NAME=SPEC, not ENV"),
        (["--env", "z={other}"], "has no env named 'z' (a, b)"),
        (["--env", "b"], "'b': write NAME=SPEC, once per env"),
    ],
    ids=["positional", "unknown-env", "no-spec"],
)
def test_rescore_of_a_mixture_refuses_what_names_no_env_of_it(tmp_path, server, args, message):
    a, b = _envs(tmp_path)[:2]
    assert _eval(tmp_path, server, a, b).returncode == 0
    other = write_env(tmp_path / "v2", "b")

    result = run_cli("rescore", tmp_path / "run", *(arg.format(other=other) for arg in args))

    assert result.returncode == 2, result.stdout
    assert message in " ".join(result.stdout.replace("│", " ").split()), result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "{a}=1", "--env", "{b}=x"], "env '{b}': weight 'x' does not parse as a number"),
        (["--env", "{a}=0", "--env", "{b}=0.0"], "the weights of a, b sum to 0"),
        (["--env", "{a}", "--env", "{b}", "--env-arg", "k=1"], "say which env it is for, as NAME:KEY=VALUE"),
        (["--env", "{a}", "--env", "{broken}"], "env 'broken' ({broken}) failed to load"),
    ],
    ids=["weight-unparsed", "weights-zero", "plain-env-arg", "fails-to-load"],
)
def test_train_refuses_a_bad_mixture_before_training_naming_the_env(tmp_path, args, message):
    a, b, _ = _envs(tmp_path)
    broken = tmp_path / "envs" / "broken"
    broken.mkdir()
    (broken / "env.py").write_text("raise RuntimeError('cannot start')\n")
    places = {"a": a, "b": b, "broken": broken}

    result = run_cli("train", *(arg.format(**places) for arg in args), "--run-dir", tmp_path / "run", timeout=180)

    assert result.returncode == 2, result.stdout
    assert " ".join(message.format(**places).split()) in " ".join(result.stdout.replace("│", " ").split())
    assert not (tmp_path / "run").exists()
