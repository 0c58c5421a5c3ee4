"""Try again with feedback: each answer is checked, the error is told back, up to ``max_attempts`` tries.

A grader that lets the model correct itself: after each reply ``env_response``
checks the answer and either ends the episode (right) or says what was wrong
(no number found, or the wrong number, with the kind of mistake) and asks for
another try. The env keeps no state: the attempt number is the turn count.

Turn reward (``TurnRecord.rewards``): ``correct``, 1.0 for the attempt that is
right, 0.0 for each wrong one. Outcome (``compute_reward``): ``correct`` (the
last attempt is right), ``first_try`` (right at once) and ``attempts_left``
(the share of attempts not needed: 0.0 unsolved).

``benchmax eval examples/retry_feedback --model embedded`` runs it on the embedded model.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmax.envs import BaseEnv, BaseRollout, EnvResponse, JsonlDataset, content_text

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def answer_of(text: str) -> float | None:
    """The last number of a reply (the answer usually comes last), or ``None``."""
    found = _NUMBER.findall(text.replace(",", ""))
    return float(found[-1]) if found else None


def attempts(rollout: BaseRollout) -> list[float | None]:
    return [answer_of(content_text(m.get("content"))) for m in rollout.messages if m.get("role") == "assistant"]


class RetryFeedbackEnv(BaseEnv):
    max_attempts = 3
    max_turns = max_attempts
    outcome_from_transcript = True

    async def create_dataset(self, split, base_dir: Path, *, max_examples=None) -> JsonlDataset:
        return JsonlDataset(Path(base_dir) / f"{split}.jsonl", max_examples=max_examples)

    async def env_response(self, rollout: BaseRollout) -> EnvResponse:
        expected = float(rollout.example_args["answer"])
        made = attempts(rollout)
        answer, left = made[-1], self.max_attempts - len(made)
        if answer == expected:
            return EnvResponse(rewards={"correct": 1.0}, done=True, info=f"right on attempt {len(made)}")
        if answer is None:
            error = "I could not find a number in your answer."
        elif answer == -expected:
            error = f"{answer:g} has the wrong sign."
        elif expected and answer / expected in (10.0, 0.1):
            error = f"{answer:g} is off by a factor of ten."
        else:
            error = f"{answer:g} is not correct."
        if left == 0:
            return EnvResponse(
                [f"{error} No attempts left."], rewards={"correct": 0.0}, done=True, info="out of attempts"
            )
        return EnvResponse(
            [f"{error} Check your working and answer again ({left} {'attempt' if left == 1 else 'attempts'} left)."],
            rewards={"correct": 0.0},
            info=error,
        )

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        made = attempts(rollout)
        correct = bool(made) and made[-1] == float(rollout.example_args["answer"])
        return {
            "correct": float(correct),
            "first_try": float(correct and len(made) == 1),
            "attempts_left": (self.max_attempts - len(made)) / (self.max_attempts - 1) if correct else 0.0,
        }
