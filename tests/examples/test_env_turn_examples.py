"""The env-driven examples (guess_number, retry_feedback): each move answered, each turn scored.

The engine runs them against scripted players on a loopback OpenAI-compatible server;
the CLI runs one end to end into a real run store, and everything downstream reads the
turn rewards: the summary, the store's figures, the export, rescore (which keeps them
and says so) and diff.
"""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from benchmax.envs import RolloutRequest
from benchmax.store import Run
from benchmax.testing import ScriptedServer


async def run_split(env, directory, split, server, make_engine, *, group=1):
    dataset = await env.create_dataset(split, directory)
    engine = make_engine(env)
    outcomes = []
    for index, example in enumerate(dataset):
        requests = [RolloutRequest(f"{split}-{index}-{k}", example, "scripted", server.base_url) for k in range(group)]
        outcomes.extend((await engine.run_group(requests)).outcomes)
    return dataset, outcomes


def cli(*args, cwd=None):
    env = {"COLUMNS": "1000", "NO_COLOR": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"}
    import os

    env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-m", "benchmax.cli", *map(str, args)],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )


# guess_number


async def test_binary_search_finds_every_number_with_an_informative_move_each_turn(
    load_example, load_policy, example_dir, make_engine
):
    env = load_example("guess_number")()
    with ScriptedServer(load_policy("guess_number")()) as server:
        dataset, outcomes = await run_split(env, example_dir("guess_number"), "eval", server, make_engine)
    assert len(outcomes) == len(dataset) == 8
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert outcome.rewards["solved"] == 1.0
        assert 1 <= len(outcome.turns) <= 7  # log2(100) moves at most
        assert [turn.rewards["informative"] for turn in outcome.turns] == [1.0] * len(outcome.turns)
        assert [turn.rewards["hit"] for turn in outcome.turns] == [0.0] * (len(outcome.turns) - 1) + [1.0]
        assert outcome.turns[-1].env_info == "solved"
        hints = [m["content"] for m in outcome.messages[2:] if m["role"] == "user"]
        assert all(("higher" in hint or "lower" in hint) for hint in hints[:-1])
        assert outcome.rewards["speed"] == pytest.approx(1.0 - (len(outcome.turns) - 1) / env.max_turns)


async def test_a_player_who_repeats_a_wrong_guess_runs_out_of_turns(load_example, example_dir, make_engine):
    env = load_example("guess_number")()
    with ScriptedServer(lambda body: {"content": "I guess 0"}) as server:
        _dataset, outcomes = await run_split(env, example_dir("guess_number"), "eval", server, make_engine)
    for outcome in outcomes:
        assert outcome.termination_reason == "max_turns_exceeded"
        assert len(outcome.turns) == env.max_turns
        assert outcome.rewards == {"solved": 0.0, "speed": 0.0}
        assert [turn.rewards["informative"] for turn in outcome.turns] == [0.0] * env.max_turns


async def test_a_reply_without_a_number_is_told_the_range_that_is_left(load_example, example_dir, make_engine):
    env = load_example("guess_number")()
    dataset = await env.create_dataset("eval", example_dir("guess_number"))
    example = next(item for item in dataset if item.payload["target"] != item.payload["low"])
    low, high = example.payload["low"], example.payload["high"]
    replies = iter(["hmm", str(low)])

    with ScriptedServer(lambda body: {"content": next(replies, str(low))}) as server:
        engine = make_engine(env)
        (outcome,) = (await engine.run_group([RolloutRequest("r0", example, "scripted", server.base_url)])).outcomes
    assert outcome.messages[3] == {"role": "user", "content": f"Reply with one whole number between {low} and {high}."}
    assert outcome.turns[0].rewards == {"informative": 0.0, "hit": 0.0}
    assert outcome.turns[1].rewards == {"informative": 1.0, "hit": 0.0}
    assert outcome.turns[1].env_info == f"{low}: higher"


# retry_feedback


async def test_the_error_is_told_back_and_the_second_attempt_is_right(
    load_example, load_policy, example_dir, make_engine
):
    env = load_example("retry_feedback")()
    dataset = await env.create_dataset("eval", example_dir("retry_feedback"))
    with ScriptedServer(load_policy("retry_feedback")(dataset)) as server:
        _dataset, outcomes = await run_split(env, example_dir("retry_feedback"), "eval", server, make_engine)
    assert len(outcomes) == 8
    for outcome in outcomes:
        assert outcome.termination_reason == "finished", outcome.error
        assert [turn.rewards for turn in outcome.turns] == [{"correct": 0.0}, {"correct": 1.0}]
        assert "has the wrong sign" in outcome.messages[3]["content"]
        assert "(2 attempts left)" in outcome.messages[3]["content"]
        assert outcome.rewards == {"correct": 1.0, "first_try": 0.0, "attempts_left": 0.5}


async def test_attempts_run_out_after_max_attempts(load_example, example_dir, make_engine):
    env = load_example("retry_feedback")()
    with ScriptedServer(lambda body: {"content": "no idea"}) as server:
        _dataset, outcomes = await run_split(env, example_dir("retry_feedback"), "eval", server, make_engine)
    for outcome in outcomes:
        assert outcome.termination_reason == "finished"  # the grader ended the episode
        assert len(outcome.turns) == env.max_attempts
        assert outcome.messages[-1]["content"] == "I could not find a number in your answer. No attempts left."
        assert outcome.turns[-1].env_info == "out of attempts"
        assert outcome.rewards == {"correct": 0.0, "first_try": 0.0, "attempts_left": 0.0}


# End to end: eval, summary, store, export, rescore, diff.


@pytest.fixture
def guess_run(tmp_path, load_policy, example_dir):
    with ScriptedServer(load_policy("guess_number")()) as server:
        result = cli(
            "eval", example_dir("guess_number"), "--base-url", server.base_url, "--model", "scripted",
            "--max-examples", "4", "--group-size", "2", "--no-progress", "--run-dir", tmp_path / "run",
        )  # fmt: skip
    assert result.returncode == 0, result.stdout
    return tmp_path / "run", result.stdout


def test_the_eval_summary_shows_turn_rewards_and_the_store_keeps_them(guess_run):
    run_dir, output = guess_run
    assert "turn rewards (from env_response; not part of the outcome)" in output
    with Run(run_dir) as run:
        stats = run.stats()
        rollouts = list(run.rollouts())
        meta = run.run_meta
    assert stats.turn_rewards["informative"].mean == 1.0
    turns = sum(len(rollout.turns) for rollout in rollouts)
    assert stats.turn_rewards["informative"].turns == turns
    assert stats.turn_rewards["hit"].per_rollout == 1.0  # one hit per rollout
    assert stats.turn_rewards["hit"].rollouts == len(rollouts) == 8
    assert all(rollout.turns[-1].rewards == {"informative": 1.0, "hit": 1.0} for rollout in rollouts)
    assert meta.replay_only == {"GuessNumberEnv": ["turn rewards"]}


def test_the_export_carries_each_turn_s_rewards(guess_run, tmp_path):
    run_dir, _ = guess_run
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"rollouts.{fmt}"
        result = cli("export", run_dir, "--format", fmt, "-o", out)
        assert result.returncode == 0, result.stdout
    rows = [orjson.loads(line) for line in (tmp_path / "rollouts.jsonl").read_bytes().splitlines()]
    assert len(rows) == 8
    for row in rows:
        assert row["turns"][-1]["rewards"] == {"informative": 1.0, "hit": 1.0}
        assert row["turns"][-1]["env_info"] == "solved"
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "rollouts.parquet").to_pylist()
    assert all(orjson.loads(row["turns"])[-1]["rewards"]["hit"] == 1.0 for row in table)


def test_rescore_keeps_turn_rewards_says_so_and_diff_lines_up(guess_run, tmp_path):
    run_dir, _ = guess_run
    result = cli("rescore", run_dir, "--run-dir", tmp_path / "rescored")
    assert result.returncode == 0, result.stdout
    assert "GuessNumberEnv's turn rewards come from its episodes (env_response): kept as stored" in result.stdout
    with Run(run_dir) as old, Run(tmp_path / "rescored") as new:
        assert [r.turns for r in old.rollouts()] == [r.turns for r in new.rollouts()]
        assert new.stats().turn_rewards == old.stats().turn_rewards
        assert new.run_meta.replay_only == {"GuessNumberEnv": ["turn rewards"]}
    diff = cli("diff", run_dir, tmp_path / "rescored")
    assert diff.returncode == 0, diff.stdout
    assert "solved" in diff.stdout
    assert "turn rewards, mean per turn (B - A)" in diff.stdout
    with Run(run_dir) as old_run:
        turns = old_run.stats().turn_rewards["informative"].turns
    rows = [line for line in diff.stdout.split("turn rewards, mean per turn")[1].splitlines() if "informative" in line]
    assert len(rows) == 1 and rows[0].count(f"{turns:,}") == 2  # the same turns on both sides


def test_rescore_refuses_an_env_whose_outcome_may_read_episode_state(guess_run, tmp_path, example_dir):
    run_dir, _ = guess_run
    code = (example_dir("guess_number") / "env.py").read_text()
    assert "    outcome_from_transcript = True\n" in code
    stateful = tmp_path / "stateful" / "env.py"
    stateful.parent.mkdir()
    stateful.write_text(code.replace("    outcome_from_transcript = True\n", ""))
    result = cli("rescore", run_dir, stateful, "--run-dir", tmp_path / "refused")
    assert result.returncode == 2, result.stdout
    assert "only a replay rebuilds" in result.stdout and "outcome_from_transcript = True" in result.stdout
    assert not (tmp_path / "refused").exists()


def test_a_mixture_of_both_examples_records_which_rewards_only_a_replay_recomputes(
    tmp_path, load_policy, load_example, example_dir
):
    import asyncio

    retry_rows = asyncio.run(load_example("retry_feedback")().create_dataset("eval", example_dir("retry_feedback")))
    guess, retry = load_policy("guess_number")(), load_policy("retry_feedback")(retry_rows)

    def policy(body):
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return guess(body) if "thinking of a whole number" in first else retry(body)

    with ScriptedServer(policy) as server:
        result = cli(
            "eval", example_dir("guess_number"), example_dir("retry_feedback"), "--base-url", server.base_url,
            "--model", "scripted", "--max-examples", "4", "--no-progress", "--run-dir", tmp_path / "mix",
        )  # fmt: skip
    assert result.returncode == 0, result.stdout
    with Run(tmp_path / "mix") as run:
        meta = run.run_meta
        stats = run.stats()
        rollouts = list(run.rollouts())
    assert sorted(meta.replay_only) == ["guess_number", "retry_feedback"]
    assert all(parts == ["turn rewards"] for parts in meta.replay_only.values())
    assert set(stats.turn_rewards) == {"informative", "hit", "correct"}
    assert all(rollout.termination_reason == "finished" for rollout in rollouts)
    assert {len(rollout.turns) > 1 for rollout in rollouts} == {True}
