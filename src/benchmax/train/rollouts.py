"""TRL's ``rollout_func``: benchmax's engine produces every training rollout.

TRL hands over a generation batch of prompts, each repeated once per sibling.
Here each run of siblings becomes one ``Engine.run_group`` call, so multi-turn
tools, ``rollout_context``, termination reasons, group rewards and log
attribution behave exactly as in ``eval``. Each rollout goes back to TRL as the
turn-0 prompt ids plus one completion stream (every completion as generated,
tool-result tokens between them masked out by ``env_mask``), and every group is
written to the run store with the trainer's step.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from benchmax.engine.engine import Engine, GroupResult
from benchmax.envs.rollout import RolloutOutcome, RolloutRequest, SamplingParams
from benchmax.envs.termination import TerminationReason, is_scorable
from benchmax.envs.types import Example
from benchmax.train.rewards import FILLED_KEY, REWARDS_KEY, SCORABLE_KEY, zero_fill
from benchmax.train.tokens import render_prompt

logger = logging.getLogger("benchmax.train")

T = TypeVar("T")


class TokenMismatch(ValueError):
    """A turn's prompt does not extend the previous turn's tokens."""


class EventLoopThread:
    """One event loop on a daemon thread, so a synchronous trainer can drive the engine.

    The loop lives across steps: model clients, the policy's batcher and env
    resources keep their loop for the whole run.
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="benchmax-train-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()  # type: ignore[arg-type]

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


@dataclass(frozen=True, slots=True)
class TokenSequence:
    """One rollout as the trainer sees it."""

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    env_mask: tuple[int, ...]
    """1 for tokens the policy generated, 0 for tool results and template glue."""
    logprobs: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class RolloutBatch:
    """What one ``rollout_func`` call produced (kept as ``bridge.last`` for callers)."""

    step: int
    batch: int
    outcomes: tuple[RolloutOutcome, ...]
    sequences: tuple[TokenSequence, ...]
    rewards: tuple[dict[str, float], ...]
    filled: tuple[tuple[str, ...], ...]


@dataclass
class RolloutBridge:
    """Callable as TRL's ``rollout_func(prompts, trainer)``.

    ``prompts`` are example ids (the training dataset's ``prompt`` column), so the
    full example payload never passes through Arrow. ``writer`` is a
    :class:`benchmax.store.RunWriter` or ``None``.
    """

    engine: Engine
    examples: Mapping[str, Example]
    tokenizer: Any
    base_url: str
    model: str = "policy"
    sampling: SamplingParams = field(default_factory=SamplingParams)
    writer: Any = None
    loop: EventLoopThread | None = None
    policy: Any = None
    first_batch: int = 0
    example_index: Mapping[str, int] = field(default_factory=dict)
    last: RolloutBatch | None = None
    known_components: frozenset[str] | None = None
    _batch: int = field(default=-1, repr=False)
    _warned: set[str] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self._batch = self.first_batch - 1

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        training = bool(getattr(trainer.model, "training", True))
        size = trainer.num_generations if training else trainer.num_generations_eval
        return self.generate(prompts, group_size=size, step=int(trainer.state.global_step))

    def generate(self, prompts: Sequence[Any], *, group_size: int, step: int) -> dict[str, list[Any]]:
        """Run the batch and return TRL's ``prompt_ids``/``completion_ids``/``logprobs``/
        ``env_mask`` plus the reward keys the component reward functions read."""
        groups = self._groups(prompts, group_size)
        self._batch += 1
        batch = self._batch
        if self.loop is None:
            self.loop = EventLoopThread()
        results = self.loop.run(self._run_groups(groups))
        pairs = [
            (outcome, example)
            for (example, _), result in zip(groups, results, strict=True)
            for outcome in result.outcomes
        ]
        outcomes = [outcome for outcome, _ in pairs]
        if self.writer is not None:
            self._store(groups, results, step, batch)
        if self.policy is not None:
            self.policy.release([outcome.rollout_id for outcome in outcomes])
        fill = zero_fill([outcome.rewards for outcome in outcomes])
        self._warn_unknown(fill.components)
        sequences = [self._sequence(outcome, example) for outcome, example in pairs]
        self.last = RolloutBatch(step, batch, tuple(outcomes), tuple(sequences), fill.rewards, fill.filled)
        failed = sum(not is_scorable(outcome.termination_reason) for outcome in outcomes)
        if failed:
            logger.warning("step %d: %d of %d rollouts failed operationally", step, failed, len(outcomes))
        return {
            "prompt_ids": [list(seq.prompt_ids) for seq in sequences],
            "completion_ids": [list(seq.completion_ids) for seq in sequences],
            "logprobs": [list(seq.logprobs) for seq in sequences],
            "env_mask": [list(seq.env_mask) for seq in sequences],
            REWARDS_KEY: list(fill.rewards),
            FILLED_KEY: [list(names) for names in fill.filled],
            SCORABLE_KEY: [is_scorable(outcome.termination_reason) for outcome in outcomes],
            "termination_reason": [outcome.termination_reason for outcome in outcomes],
            "rollout_id": [outcome.rollout_id for outcome in outcomes],
        }

    # -- groups ----------------------------------------------------------------

    def _groups(self, prompts: Sequence[Any], size: int) -> list[tuple[Example, list[str]]]:
        if size < 1 or len(prompts) % size:
            raise ValueError(f"{len(prompts)} prompts do not split into groups of {size}")
        groups = []
        for start in range(0, len(prompts), size):
            chunk = [self._example_id(prompt) for prompt in prompts[start : start + size]]
            if len(set(chunk)) != 1:
                raise ValueError(
                    f"prompts {start}..{start + size - 1} are not one example's siblings: {chunk}"
                )
            example = self.examples[chunk[0]]
            token = uuid.uuid4().hex[:8]
            ids = [f"b{self._batch + 1}-{token}-{index}" for index in range(size)]
            groups.append((example, ids))
        return groups

    def _example_id(self, prompt: Any) -> str:
        if isinstance(prompt, str) and prompt in self.examples:
            return prompt
        raise ValueError(
            f"rollout_func got prompt {str(prompt)[:80]!r}, which is no example id of this run; "
            "the training dataset's 'prompt' column must hold benchmax example ids"
        )

    async def _run_groups(self, groups: Sequence[tuple[Example, list[str]]]) -> list[GroupResult]:
        return list(await asyncio.gather(*(self._run_group(example, ids) for example, ids in groups)))

    async def _run_group(self, example: Example, rollout_ids: Sequence[str]) -> GroupResult:
        requests = [
            RolloutRequest(
                rollout_id=rollout_id,
                example=example,
                model=self.model,
                base_url=self.base_url,
                split="train",
                sampling=self.sampling,
            )
            for rollout_id in rollout_ids
        ]
        started = time.time()
        try:
            return await self.engine.run_group(requests)
        except Exception as exc:
            logger.exception("rollout group for example %s failed", example.id)
            error = f"run_group raised {type(exc).__name__}: {exc}"
            return GroupResult(
                tuple(
                    RolloutOutcome(
                        rewards={},
                        termination_reason=TerminationReason.CONTEXT_ERROR,
                        error=error,
                        rollout_id=request.rollout_id,
                        example_id=example.id,
                        messages=[dict(m) for m in example.payload["prompt_messages"]],
                        started_at=started,
                        ended_at=time.time(),
                        sampling=self.sampling,
                    )
                    for request in requests
                )
            )

    # -- tokens ----------------------------------------------------------------

    def _sequence(self, outcome: RolloutOutcome, example: Example) -> TokenSequence:
        try:
            return assemble(outcome)
        except TokenMismatch as exc:
            logger.error("rollout %s: %s; masked out of the loss", outcome.rollout_id, exc)
        except ValueError:
            pass
        return self._empty(example)

    def _empty(self, example: Example) -> TokenSequence:
        """A rollout with no usable tokens: its prompt and one masked end token."""
        try:
            prompt = render_prompt(self.tokenizer, example.payload["prompt_messages"], None)
        except Exception:
            prompt = []
        eos = self.tokenizer.eos_token_id
        prompt = prompt or [eos]
        return TokenSequence(tuple(prompt), (eos,), (0,), (0.0,))

    # -- store and warnings ----------------------------------------------------

    def _store(
        self,
        groups: Sequence[tuple[Example, list[str]]],
        results: Sequence[GroupResult],
        step: int,
        batch: int,
    ) -> None:
        from benchmax.store import GroupWrite

        for (example, _), result in zip(groups, results, strict=True):
            outcomes = result.outcomes
            self.writer.write_group(
                GroupWrite(
                    group_id=outcomes[0].rollout_id.rsplit("-", 1)[0],
                    example_id=example.id,
                    example_idx=self.example_index.get(example.id, 0),
                    batch=batch,
                    outcomes=outcomes,
                    sample_indices=tuple(range(len(outcomes))),
                    logs=result.logs,
                    step=step,
                    started_at=min(outcome.started_at for outcome in outcomes),
                    ended_at=max(outcome.ended_at for outcome in outcomes),
                )
            )
        try:
            self.writer.fill_batch(batch)
        except Exception:
            logger.exception("writing step %d's rollouts to the run store failed", step)

    def _warn_unknown(self, components: Sequence[str]) -> None:
        if self.known_components is None:
            return
        for name in components:
            if name not in self.known_components and name not in self._warned:
                self._warned.add(name)
                logger.warning(
                    "the env emitted reward component %r, unknown when training started; it is "
                    "stored but not trained on (pass --weight %s=1 to train on it)",
                    name,
                    name,
                )


def assemble(outcome: RolloutOutcome) -> TokenSequence:
    """Rebuild a rollout's token stream from its turns, never from its messages.

    Turn ``k+1``'s prompt must start with turn ``k``'s prompt plus completion; the
    ids between are tool results and template glue (``env_mask`` 0).
    """
    turns = [turn for turn in outcome.turns if turn.prompt_token_ids is not None]
    if not turns or any(turn.completion_token_ids is None for turn in turns):
        raise ValueError("rollout has no token ids")
    prompt = list(turns[0].prompt_token_ids or ())
    stream = list(prompt)
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    for turn in turns:
        turn_prompt = list(turn.prompt_token_ids or ())
        if turn_prompt[: len(stream)] != stream:
            raise TokenMismatch(f"turn {turn.index}'s prompt does not extend the tokens before it")
        glue = turn_prompt[len(stream) :]
        generated = list(turn.completion_token_ids or ())
        turn_logprobs = list(turn.completion_logprobs or ())
        if len(turn_logprobs) != len(generated):
            turn_logprobs = [0.0] * len(generated)
        completion += glue + generated
        mask += [0] * len(glue) + [1] * len(generated)
        logprobs += [0.0] * len(glue) + turn_logprobs
        stream = turn_prompt + generated
    if not completion:
        raise ValueError("rollout generated no tokens")
    return TokenSequence(tuple(prompt), tuple(completion), tuple(mask), tuple(logprobs))
