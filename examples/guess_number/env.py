"""Guess the number: the env answers every move ("higher", "lower"), and scores each one.

The model is told a secret integer lies in a range and replies with one guess a
turn; ``env_response`` answers each guess, so the episode is a conversation the
env drives, not a single reply. Everything the env needs is in the transcript
(the guesses so far and the example's ``target``), so it keeps no state and
``benchmax rescore`` can recompute the outcome from a stored run.

Turn rewards (``TurnRecord.rewards``, one dict per guess):

- ``informative``: 1.0 when the guess lies inside what the hints so far still
  allow (a guess that could be right), else 0.0: the per-turn credit a
  binary search earns on every move;
- ``hit``: 1.0 for the guess that finds the number.

Outcome (``compute_reward``): ``solved`` (1.0 when the last guess is the
number) and ``speed`` (1.0 for a first-guess hit, falling linearly to 0.0 at
``max_turns``; 0.0 unsolved).

``benchmax eval examples/guess_number --model embedded`` runs it on the embedded model.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, EnvResponse, JsonlDataset, content_text

_INTEGER = re.compile(r"-?\d+")


def guess_of(text: str) -> int | None:
    """The first integer of a reply, or ``None``."""
    match = _INTEGER.search(text)
    return int(match.group()) if match else None


def guesses(rollout: BaseRollout) -> list[int | None]:
    """Every guess of the episode so far, in order (``None`` for a reply with no number)."""
    return [guess_of(content_text(m.get("content"))) for m in rollout.messages if m.get("role") == "assistant"]


class GuessNumberEnv(BaseEnv):
    max_turns = 8
    outcome_from_transcript = True

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None) -> JsonlDataset:
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def env_response(self, rollout: BaseRollout) -> EnvResponse:
        args = rollout.example_args
        target, low, high = int(args["target"]), int(args["low"]), int(args["high"])
        *earlier, guess = guesses(rollout)
        for previous in earlier:  # what the hints so far still allow
            if previous is not None and previous < target:
                low = max(low, previous + 1)
            elif previous is not None and previous > target:
                high = min(high, previous - 1)
        if guess is None:
            return EnvResponse(
                [f"Reply with one whole number between {low} and {high}."],
                rewards={"informative": 0.0, "hit": 0.0},
                info="no number",
            )
        informative = float(low <= guess <= high)
        if guess == target:
            return EnvResponse(
                [f"{guess} is right!"], rewards={"informative": informative, "hit": 1.0}, done=True, info="solved"
            )
        hint = "higher" if guess < target else "lower"
        return EnvResponse(
            [f"{guess} is wrong: the number is {hint}. Guess again."],
            rewards={"informative": informative, "hit": 0.0},
            info=f"{guess}: {hint}",
        )

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        made = guesses(rollout)
        solved = bool(made) and made[-1] == int(rollout.example_args["target"])
        speed = 1.0 - (len(made) - 1) / self.max_turns if solved else 0.0
        return {"solved": float(solved), "speed": speed}
