"""Procedural datasets: examples generated without end, and difficulty levels an env exposes.

A procedural env (reasoning-gym's generators, a puzzle maker) has no natural end to its
data: example ``i`` is whatever its generator makes from ``i``. :class:`EndlessDataset`
is that dataset: seeded by the index, so two runs see the same examples in the same
order, and read lazily, so a trainer takes as many as it needs. Nothing can read it
whole: an eval must say how many examples it takes (``--max-examples``).

An env whose generator has a difficulty knob exposes it as *levels*
(:class:`LevelledEnv`): an ordered list of level names, easiest first, and the dataset of
one level. A curriculum (``benchmax train --curriculum levels``) starts at the easiest
and moves up as the policy passes; an env adapter implements the two methods and
nothing else changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from benchmax.envs._errors import DatasetError
from benchmax.envs._records import DatasetSplit, Example
from benchmax.envs.dataset import Dataset, to_example

Payload = TypeVar("Payload")


class EndlessDatasetError(DatasetError):
    """An endless dataset was asked for whole; the message says which cap to give."""


class UnknownLevelError(DatasetError):
    """A difficulty level the env does not have; the message names the ones it has."""


class EndlessDataset(Generic[Payload]):
    """Examples ``generate(0)``, ``generate(1)``, ... without end.

    ``generate(index)`` returns an :class:`Example` or a payload dict (whose id is its
    content hash) and must depend on ``index`` alone (seed your generator with it), so
    a run, and its resume, read the same examples. Iterating never stops; index it,
    or :meth:`take` a prefix.
    """

    endless = True
    """Marks a dataset nothing may read whole (:func:`is_endless`)."""

    def __init__(self, generate: Callable[[int], Example[Payload] | Mapping[str, Any]]) -> None:
        if not callable(generate):
            raise TypeError(f"EndlessDataset needs a function of the example index, got {type(generate).__name__}")
        self._generate = generate

    def __getitem__(self, index: int) -> Example[Payload]:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise IndexError(f"an endless dataset is indexed by a non-negative int, got {index!r}")
        return to_example(self._generate(index), where=f"example[{index}] (generated)")

    def __iter__(self) -> Iterator[Example[Payload]]:
        return (self[index] for index in itertools.count())

    def take(self, count: int) -> Dataset[Payload]:
        """The first ``count`` examples, as a finite dataset."""
        return Dataset([self[index] for index in range(count)])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({getattr(self._generate, '__name__', 'generate')})"


def is_endless(dataset: object) -> bool:
    """Whether ``dataset`` generates examples without end (it must never be read whole)."""
    return getattr(dataset, "endless", False) is True


@runtime_checkable
class LevelledEnv(Protocol):
    """An env whose examples come in difficulty levels (implement both methods on the env).

    ``difficulty_levels()`` names the levels, easiest first. ``create_level_dataset``
    returns the dataset of one level (a :class:`Dataset` or an :class:`EndlessDataset`)
    and raises :class:`UnknownLevelError` for a name not in the list
    (:func:`check_level` says it the standard way).
    """

    def difficulty_levels(self) -> Sequence[str]: ...

    async def create_level_dataset(
        self, level: str, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> Any: ...


def has_levels(env: object) -> bool:
    """Whether ``env`` exposes difficulty levels (it implements :class:`LevelledEnv`)."""
    return isinstance(env, LevelledEnv)


def check_level(owner: str, level: object, levels: Sequence[str]) -> str:
    """``level`` when it is one of ``levels``; else :class:`UnknownLevelError` naming those that exist."""
    if isinstance(level, str) and level in levels:
        return level
    raise UnknownLevelError(f"{owner} has no difficulty level {level!r}; its levels are: {', '.join(levels)}")
