"""Env-driven turns in the inspector, in real headless Chromium: each turn's reward and verdict beside
the reply, the env's observation marked, hostile verdict text inert, per-turn reward curves in training."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

import playwright.sync_api as playwright_api
from browser_kit import InspectorServer, open_view

from benchmax.envs import RolloutOutcome, TurnRecord, Usage
from benchmax.runner import RunSession
from benchmax.store import GroupWrite

expect = playwright_api.expect
HOSTILE = '<img src=x onerror="window.__xss = 1">'


def _game(rollout_id: str, now: float) -> RolloutOutcome:
    return RolloutOutcome(
        rewards={"solved": 1.0},
        termination_reason="finished",
        rollout_id=rollout_id,
        example_id="ex0",
        messages=[
            {"role": "user", "content": "guess a number between 1 and 100"},
            {"role": "assistant", "content": "50"},
            {"role": "user", "content": "50 is wrong: the number is lower."},
            {"role": "assistant", "content": "25"},
            {"role": "user", "content": "25 is right!"},
        ],
        turns=(
            TurnRecord(
                0,
                now,
                0.01,
                0.0,
                "stop",
                Usage(5, 1),
                rewards={"informative": 1.0, "hit": 0.0},
                env_seconds=0.002,
                env_messages=1,
                env_info=HOSTILE,
            ),
            TurnRecord(
                1,
                now,
                0.01,
                0.0,
                "stop",
                Usage(9, 1),
                rewards={"informative": 1.0, "hit": 1.0},
                env_seconds=0.001,
                env_messages=1,
                env_info="solved",
            ),
        ),
        started_at=now,
        ended_at=now + 0.05,
    )


def _write(run_dir: Path, *, kind: str) -> None:
    session = RunSession.create(run_dir, kind=kind, meta={"model": "m", "env_class": "GuessNumberEnv"})
    now = time.time()
    for step in range(2 if kind == "train" else 1):
        group_id = f"step{step}/train/ex0" if kind == "train" else "eval/ex0"
        session.writer.write_group(
            GroupWrite(
                group_id=group_id,
                example_id="ex0",
                example_idx=0,
                batch=step,
                step=step if kind == "train" else None,
                outcomes=(_game(f"{group_id}#0", now),),
                sample_indices=(0,),
                started_at=now,
                ended_at=now,
            )
        )
        if kind == "train":
            session.record_step(
                step,
                {"reward": 1.0, "generated/solved": 1.0, "turn_rewards/hit": 0.25 * (step + 1),
                 "turn_rewards/informative": 1.0, "turns/mean": 2.0, "groups/dead_share": 0.0},
            )  # fmt: skip
    session.close_batches()
    session.close()


def test_a_rollout_shows_each_turns_reward_and_verdict_and_marks_the_envs_observation(
    page: object, tmp_path: Path
) -> None:
    _write(tmp_path / "game", kind="eval")
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/game/rollouts/{quote('eval/ex0#0', safe='')}", "rollout")
        lines = page.locator(".env-turn")
        expect(lines).to_have_count(2)
        assert "turn reward: informative 1 · hit 0" in lines.nth(0).inner_text()
        assert lines.nth(0).locator(".env-info").inner_text() == HOSTILE  # shown as text, never run
        assert "turn reward: informative 1 · hit 1" in lines.nth(1).inner_text()
        observations = page.locator(".msg.env-observation")
        expect(observations).to_have_count(2)
        assert "the number is lower" in observations.nth(0).inner_text()
        assert "env" in observations.nth(0).locator(".msg-head").inner_text()
        table = page.locator("table.grid", has_text="env verdict")
        assert "solved" in table.inner_text()
        assert page.evaluate("window.__xss") is None
        assert not page.errors
    finally:
        served.stop()


def test_a_training_run_charts_each_turn_reward_component(page: object, tmp_path: Path) -> None:
    _write(tmp_path / "train", kind="train")
    served = InspectorServer(tmp_path)
    try:
        open_view(page, f"{served.base}/runs/train", "run")
        expect(page.locator("figure.chart", has_text="turn reward · hit")).to_have_count(1)
        expect(page.locator("figure.chart", has_text="turn reward · informative")).to_have_count(1)
        expect(page.locator("figure.chart", has_text="turns per rollout")).to_have_count(1)
        assert not page.errors
    finally:
        served.stop()
