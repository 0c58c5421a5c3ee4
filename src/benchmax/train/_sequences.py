"""A rollout's token stream as the trainer sees it, rebuilt from its turns and checked on the way."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchmax.envs import RolloutOutcome, TurnRecord


class TokenMismatch(ValueError):
    """A turn's prompt does not extend the previous turn's tokens."""


@dataclass(frozen=True, slots=True)
class TokenSequence:
    """One token sequence of a rollout as the trainer sees it (a rollout has one, an agent's may have more)."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    """1 for tokens the policy generated, 0 for tool results and template glue."""
    logprobs: tuple[float, ...]
    turn_spans: tuple[tuple[int, int, int], ...] = ()
    """Per model turn: ``(turn index, start, end)`` of its generated tokens in ``completion_ids``,
    so per-turn credit lands on exactly the tokens that turn sampled."""


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """What the token check of one rollout found: ``ok``, ``mismatch`` (a turn's
    prompt does not extend what was sampled before it) or ``no_tokens``."""

    rollout_id: str
    status: str
    detail: str = ""


def _masked(sequence: TokenSequence) -> TokenSequence:
    """The same tokens, none of them trained on."""
    return TokenSequence(
        sequence.prompt_ids, sequence.completion_ids, (0,) * len(sequence.env_mask), sequence.logprobs,
        sequence.turn_spans,
    )  # fmt: skip


def assemble(outcome: RolloutOutcome) -> TokenSequence:
    """Rebuild a rollout's token stream from its turns, never from its messages.

    Turn ``k+1``'s prompt must start with turn ``k``'s prompt plus completion; the
    ids between are tool results and template glue (``env_mask`` 0). This is
    the token check: a prompt that does not extend what was sampled before it
    raises :class:`TokenMismatch`, and that rollout is not trained on.
    """
    return _stream(outcome.turns)


def assemble_sequences(outcome: RolloutOutcome) -> tuple[TokenSequence, ...]:
    """One token stream per sequence of the rollout (``TurnRecord.sequence``), in sequence order.

    An engine rollout is one sequence. An agent's calls that do not extend one
    another (a sub-agent, a summarised history) are sequences of their own:
    each is checked and trained as it was sampled, never joined to another or
    re-rendered. Sequences without token ids are left out; a rollout with none raises
    ``ValueError``, and any sequence that fails the check raises :class:`TokenMismatch`.
    """
    numbers = sorted({turn.sequence for turn in outcome.turns if turn.prompt_token_ids is not None})
    if not numbers:
        raise ValueError("rollout has no token ids")
    return tuple(_stream([turn for turn in outcome.turns if turn.sequence == number]) for number in numbers)


def _stream(all_turns: Sequence[TurnRecord]) -> TokenSequence:
    turns = [turn for turn in all_turns if turn.prompt_token_ids is not None]
    if not turns or any(turn.completion_token_ids is None for turn in turns):
        raise ValueError("rollout has no token ids")
    prompt = list(turns[0].prompt_token_ids or ())
    stream = list(prompt)
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    spans: list[tuple[int, int, int]] = []
    for turn in turns:
        turn_prompt = list(turn.prompt_token_ids or ())
        if turn_prompt[: len(stream)] != stream:
            at = next(
                (index for index, (a, b) in enumerate(zip(turn_prompt, stream, strict=False)) if a != b),
                min(len(turn_prompt), len(stream)),
            )
            raise TokenMismatch(
                f"turn {turn.index}'s prompt does not extend the tokens sampled before it (first difference at "
                f"token {at} of {len(stream)})"
            )
        glue = turn_prompt[len(stream) :]
        generated = list(turn.completion_token_ids or ())
        turn_logprobs = list(turn.completion_logprobs or ())
        if len(turn_logprobs) != len(generated):
            turn_logprobs = [math.nan] * len(generated)  # unknown: no importance correction
        completion += glue + generated
        spans.append((turn.index, len(completion) - len(generated), len(completion)))
        mask += [0] * len(glue) + [1] * len(generated)
        logprobs += [0.0] * len(glue) + turn_logprobs
        stream = turn_prompt + generated
    if not completion:
        raise ValueError("rollout generated no tokens")
    return TokenSequence(tuple(prompt), tuple(completion), tuple(mask), tuple(logprobs), tuple(spans))
