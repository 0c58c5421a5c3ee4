"""A run's plan: which of its groups are still to run (a resumed run skips the stored ones), and how
many are left in each batch. A pass over the dataset before the first group starts counts them, and
keeps the pending groups when they are few; otherwise they are found again, chunk by chunk, as the run goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from benchmax.envs import Example
from benchmax.runner._config import RunConfig
from benchmax.runner._session import GroupKey, RunSession

_KEEP_PENDING = 100_000
"""Pending groups the planning pass keeps (a resumed run's are usually few) instead of finding them again."""


@dataclass(slots=True)
class _Plan:
    """What the planning pass found: the dataset's size, the groups left per batch, and
    the pending groups themselves when they are few enough to keep."""

    examples: int
    left_in_batch: dict[int, int]
    pending: list[tuple[GroupKey, Example[Any]]] | None


def _plan(session: RunSession, config: RunConfig, examples: Iterable[Example[Any]]) -> _Plan:
    per_batch = config.groups_per_batch()
    plan = _Plan(0, {}, [])
    for chunk in _pending_chunks(session, config.split, examples, sync=True):
        plan.examples += chunk.examples
        for key, _ in chunk.pending:
            batch = _batch(key.example_index, per_batch)
            plan.left_in_batch[batch] = plan.left_in_batch.get(batch, 0) + 1
        if plan.pending is not None:
            plan.pending.extend(chunk.pending)
            if len(plan.pending) > _KEEP_PENDING:
                plan.pending = None
    return plan


@dataclass(frozen=True, slots=True)
class _Chunk:
    examples: int
    pending: list[tuple[GroupKey, Example[Any]]]


def _pending_chunks(
    session: RunSession, split: str, examples: Iterable[Example[Any]], *, sync: bool
) -> Iterator[_Chunk]:
    """The dataset in chunks, each with those of its groups not stored yet."""
    for size, pending in session.pending_examples(split, examples, sync=sync):
        yield _Chunk(size, pending)


async def _pending(
    session: RunSession, split: str, examples: Iterable[Example[Any]], plan: _Plan
) -> AsyncIterator[tuple[GroupKey, Example[Any]]]:
    """The groups to run, in dataset order: the planned ones, or found again chunk by chunk."""
    if plan.pending is not None:
        for item in plan.pending:
            yield item
        return
    chunks = _pending_chunks(session, split, examples, sync=False)
    while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
        for item in chunk.pending:
            yield item


def _batch(index: int, per_batch: int | None) -> int:
    return 0 if per_batch is None else index // per_batch
