"""Training on a mixture: each env's figures apart, no component filled across envs."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import torch
from mixed_env import MixedEnv
from typer.testing import CliRunner

from benchmax.envs import RolloutOutcome
from benchmax.store import Run
from benchmax.train import EvalSummary, build, eval_table, run
from benchmax.train._envs import EnvEval, EnvStep, envs_from_logs, step_envs
from benchmax.train._report import step_report
from benchmax.train._rewards import component_reward, zero_fill

ENV_FILE = str(Path(__file__).with_name("mixed_env.py"))


def _outcome(rollout_id: str, rewards: dict[str, float], *, scored: bool = True) -> RolloutOutcome:
    return RolloutOutcome(
        rollout_id=rollout_id,
        example_id=rollout_id.split("#")[0],
        rewards=rewards,
        termination_reason="completed" if scored else "harness_error",
        error=None if scored else "broke",
    )


def test_the_zero_fill_stays_inside_an_env():
    rewards = [{"exact": 1.0}, {}, {"tests_passed": 0.5}, {}]
    fill = zero_fill(rewards, ["math", "math", "code", "code"])
    assert fill.rewards == ({"exact": 1.0}, {"exact": 0.0}, {"tests_passed": 0.5}, {"tests_passed": 0.0})
    assert fill.filled == ((), ("exact",), (), ("tests_passed",))
    # TRL's reward function for a component: missing (None, left out of its mean) for the env that never emits it
    exact = component_reward("exact")
    assert exact(benchmax_rewards=list(fill.rewards), benchmax_scorable=[True] * 4) == [1.0, 0.0, None, None]
    # a run of one env fills across the whole batch, as it always did
    assert zero_fill(rewards).rewards == (
        {"exact": 1.0, "tests_passed": 0.0},
        {"exact": 0.0, "tests_passed": 0.0},
        {"exact": 0.0, "tests_passed": 0.5},
        {"exact": 0.0, "tests_passed": 0.0},
    )


def test_step_figures_are_counted_per_env_and_read_back_from_the_flat_log():
    math_group = [_outcome("m#0", {"exact": 0.0}), _outcome("m#1", {"exact": 1.0})]
    flat_group = [_outcome("f#0", {"tests_passed": 1.0}), _outcome("f#1", {"tests_passed": 1.0})]
    broken = [_outcome("b#0", {"tests_passed": 0.5}), _outcome("b#1", {}, scored=False)]
    weights = {"exact": 1.0, "tests_passed": 2.0}
    figures = step_envs([("math", math_group, False), ("code", flat_group, True), ("code", broken, False)], weights)
    assert figures == (
        EnvStep("code", (2.0 + 2.0 + 1.0 + 0.0) / 4, {"tests_passed": 2.5 / 4}, 4, 3, 2, 1),
        EnvStep("math", 0.5, {"exact": 0.5}, 2, 2, 1, 0),
    )
    logs = {key: value for env in figures for key, value in env.logs().items()}
    assert "env/math/rewards/tests_passed" not in logs
    assert envs_from_logs(logs) == figures
    assert [EnvStep.from_json(env.env, orjson.loads(orjson.dumps(env.to_json()))) for env in figures] == list(figures)
    assert step_envs([(None, math_group, False)], weights) == ()  # one env: no per-env figures
    # an env name may hold a slash (a path spec)
    (named,) = step_envs([("examples/math", math_group, False)], weights)
    assert envs_from_logs(named.logs()) == (named,)


def test_the_step_row_keeps_a_column_per_env_even_when_a_step_drew_none_of_it():
    figures = EnvStep("math", 0.5, {"exact": 0.5}, 2, 2, 3, 1)
    report = step_report(1, 2, {"reward": 0.5, **figures.logs()}, ["exact"], envs=("code", "math"))
    cells = report.cells()
    assert cells["math reward/dead"] == "0.500 1/3"
    assert cells["code reward/dead"] == "-"
    assert list(step_report(2, 2, {"reward": 0.1}, ["exact"], envs=("code", "math")).cells()) == list(cells)
    assert "math reward/dead" not in step_report(1, 2, {"reward": 0.5}, ["exact"]).cells()


def test_the_eval_table_gives_each_env_its_pass_rate_and_components_before_and_after(tmp_path):
    before = EvalSummary(tmp_path, 4, {}, {}, (EnvEval("code", 2, 2, 0, {"tests_passed": 0.25}),))
    after = EvalSummary(
        tmp_path,
        4,
        {},
        {},
        (EnvEval("code", 2, 2, 1, {"tests_passed": 0.75}), EnvEval("math", 2, 2, 2, {"exact": 1.0})),
    )
    lines = eval_table(before, after, steps=3)
    assert lines[0] == "  env code (2 rollouts), step 0 -> step 3:"
    assert "pass rate     0.000 -> 0.500 (+0.500)" in lines[1]
    assert "tests_passed  0.250 -> 0.750 (+0.500)" in lines[2]
    assert lines[3] == "  env math (2 rollouts), step 0 -> step 3:"
    assert "pass rate  - -> 1.000" in lines[4]
    assert eval_table(EvalSummary(tmp_path, 1, {}, {}), EvalSummary(tmp_path, 1, {}, {}), steps=1) == []


def test_a_mixture_trains_with_each_envs_figures_apart(tiny_model_dir, tmp_path):
    torch.manual_seed(0)
    session = build(
        MixedEnv(),
        model=str(tiny_model_dir),
        run_dir=tmp_path / "run",
        group_size=2,
        prompts_per_step=3,
        max_tokens=4,
        max_steps=2,
        async_steps=0,
        dead_groups="keep",
        eval_group_size=2,
        seed=0,
    )
    assert session.envs == ("code", "math")
    assert set(session.components) == {"exact", "tests_passed"}  # each env's first example probed
    batches = []
    original = session.trainer._generate_and_score_completions

    def spy(inputs):
        output = original(inputs)
        batches.append((session.bridge.last, output))
        return output

    session.trainer._generate_and_score_completions = spy
    try:
        result = run(session)
    finally:
        session.close()

    assert result.steps == 2 and len(batches) == 2
    for batch, output in batches:
        kinds = [outcome.example_id.split("/")[0] for outcome in batch.outcomes]
        for kind, reward in zip(kinds, batch.rewards, strict=True):
            assert set(reward) == ({"exact"} if kind == "math" else {"tests_passed"})  # nothing filled across
        # groups never mix envs: each run of siblings is one example
        ids = [outcome.example_id for outcome in batch.outcomes]
        assert all(len(set(ids[start : start + 2])) == 1 for start in range(0, len(ids), 2))
        advantages = output["advantages"].tolist()
        for row, outcome in enumerate(batch.outcomes):
            if outcome.example_id == "code/flat":
                assert advantages[row] == 0.0  # a dead group teaches nothing
    logged = [entry for entry in result.log_history if "reward" in entry]
    for entry in logged:
        # each step draws all three examples: math exact [0, 1]; code tests_passed [0, .5] and [1, 1]
        assert entry["rewards/exact/mean"] == pytest.approx(0.5)  # 1/6 if code's rollouts counted 0.0
        assert entry["rewards/tests_passed/mean"] == pytest.approx(0.625)
        assert entry["generated/exact"] == pytest.approx(0.5)
        assert entry["reward"] == pytest.approx(3.5 / 6)
        assert envs_from_logs(entry) == (
            EnvStep("code", 0.625, {"tests_passed": 0.625}, 4, 4, 2, 1),
            EnvStep("math", 0.5, {"exact": 0.5}, 2, 2, 1, 0),
        )
    # the run store's step rows hold each env's figures as records, not the flat keys
    with Run(result.run_dir) as stored:
        steps = stored.steps()
        evals = stored.meta["evals"]
    assert [step for step, _, _ in steps] == [0, 1]
    for _, _, metrics in steps:
        assert not any(key.startswith("env/") for key in metrics)
        assert metrics["envs"]["code"] == {
            "reward": 0.625,
            "components": {"tests_passed": 0.625},
            "rollouts": 4,
            "scored": 4,
            "groups_drawn": 2,
            "groups_dead": 1,
        }
        assert metrics["envs"]["math"]["groups_dead"] == 0
    # held-out eval per env, before and after, and kept in the run's meta
    for summary in (result.eval_before, result.eval_after):
        assert summary is not None
        assert summary.envs == (
            EnvEval("code", 2, 2, 0, {"tests_passed": 0.25}),
            EnvEval("math", 2, 2, 1, {"exact": 0.5}),
        )
    assert evals["eval-step2"]["envs"]["math"] == {
        "rollouts": 2,
        "scored": 2,
        "passed": 1,
        "pass_rate": 0.5,
        "means": {"exact": 0.5},
    }
    assert (result.run_dir / "curves" / "envs.png").stat().st_size > 1000
    assert result.run_dir / "curves" / "envs.png" in result.curves


def test_the_cli_prints_each_envs_step_figures_and_its_eval_table(tiny_model_dir, tmp_path):
    from benchmax.cli import app

    run_dir = tmp_path / "cli-run"
    result = CliRunner().invoke(
        app,
        [
            "train", f"{ENV_FILE}:MixedEnv", "--model", str(tiny_model_dir), "--run-dir", str(run_dir),
            "--max-steps", "1", "--group-size", "2", "--prompts-per-step", "3", "--max-tokens", "4",
            "--dead-groups", "keep", "--eval-group-size", "2",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "code reward/dead" in result.output and "math reward/dead" in result.output
    assert "0.625 1/2" in result.output  # code: tests_passed [0, .5] and a dead [1, 1]
    assert "env code (2 rollouts), step 0 -> step 1:" in result.output
    assert "env math (2 rollouts), step 0 -> step 1:" in result.output
    assert "pass rate  0.500 -> 0.500 (+0.000)" in result.output  # math: exact [0, 1], threshold 1
