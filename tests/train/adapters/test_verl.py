"""The verl reward adapter scores verl's responses with the env's own reward."""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmax.loading import EnvSpec
from benchmax.train.adapters import VerlRewardAdapter, to_verl_row

FORMAT_ENV = Path(__file__).parents[3] / "examples" / "format"


def test_verl_compute_score_matches_the_envs_reward_components():
    env = EnvSpec(str(FORMAT_ENV)).load()
    dataset = asyncio.run(env.create_dataset("train", FORMAT_ENV, max_examples=1))
    row = to_verl_row(dataset[0])
    assert row["prompt"] == dataset[0].payload["prompt_messages"]
    score = VerlRewardAdapter(env, weights={"correct": 2.0})
    try:
        good = score(row["data_source"], "Paris", None, row["extra_info"])
        wordy = score(row["data_source"], "The capital of France is Paris.", None, row["extra_info"])
    finally:
        score.close()
    assert good == {"score": 4.0, "correct": 1.0, "brevity": 1.0, "exact": 1.0}
    assert wordy["score"] == 2.0 + 1 / 6
    assert "exact" not in wordy
