"""Curricula: which example each training group runs, following how the policy does.

A GRPO group whose siblings all score the same teaches nothing; the trainer drops
and refills such groups, but drawing the same too-easy and too-hard examples again
keeps generating them. A :class:`Sampler` decides what is drawn. The trainer calls
``draw`` for every group it generates and ``update`` with every scored group, keeps
``state()`` in the run store after each step (``train --resume`` hands it back to
``load_state``) and logs ``figures()`` with the step.

The built-ins and ``--curriculum`` specs are in ``_samplers``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchmax.envs import Example, is_endless
from benchmax.mix import mixture_id
from benchmax.train._config import TrainError


class CurriculumError(TrainError):
    """The curriculum cannot run as given, or its sampler failed; the message says what to change."""


@dataclass(frozen=True, slots=True)
class GroupScore:
    """One scored group, as the trainer reports it to its sampler.

    ``scores`` are the siblings' weighted rewards (what GRPO's advantages are taken
    from; a component a rollout lacks counts 0); ``dead`` is the trainer's own verdict
    (no advantage to learn from).
    """

    example: Example[Any]
    step: int
    scores: tuple[float, ...]
    dead: bool

    @property
    def env(self) -> str | None:
        return self.example.env

    @property
    def mean(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else 0.0

    def pass_rate(self, threshold: float = 1.0) -> float:
        """The share of siblings whose score reaches ``threshold`` (eval's pass rule)."""
        return sum(score >= threshold for score in self.scores) / len(self.scores) if self.scores else 0.0


class ExamplePool:
    """What a sampler draws from: the training set by env, endless generators, level datasets.

    Every example a sampler may return is one the pool handed out (:meth:`get` knows it):
    the trainer refuses any other. The pool holds no position of its own; a sampler keeps
    its indices in its state, so a resumed run draws what the interrupted one would have.
    """

    def __init__(
        self,
        examples: Sequence[Example[Any]],
        *,
        endless: Mapping[str | None, Any] | None = None,
        levels: Mapping[str | None, Sequence[str]] | None = None,
        level_datasets: Mapping[tuple[str | None, str], Any] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self._known: dict[str, Example[Any]] = {}
        self._positions: dict[str, int] = {}
        self._new: list[Example[Any]] = []
        self._by_env: dict[str | None, list[str]] = {}
        self.ids: list[str] = []
        """The training set's distinct example ids, in dataset order (a mixture's: its weighted draw's)."""
        for example in examples:
            if example.id not in self._known:
                self.ids.append(example.id)
            self._remember(example, new=False)
            listed = self._by_env.setdefault(example.env, [])
            if example.id not in listed:
                listed.append(example.id)
        self._endless = dict(endless or {})
        self._levels = {env: tuple(names) for env, names in (levels or {}).items()}
        self._level_datasets = dict(level_datasets or {})
        self._generated: dict[tuple[Any, ...], Example[Any]] = {}
        found = list(self._by_env) or list(self._endless)
        self.envs: tuple[str | None, ...] = tuple(sorted(set(found) | set(self._endless), key=lambda name: name or ""))
        self.weights: dict[str, float] = dict(weights or {})
        """A mixture's weights by env name, as the user gave them (empty for one env)."""

    def ids_of(self, env: str | None) -> Sequence[str]:
        """The distinct training examples of ``env``, in dataset order."""
        return self._by_env.get(env, [])

    def endless(self, env: str | None = None) -> bool:
        """Whether ``env``'s training set is generated without end (draw it with :meth:`generated`)."""
        return env in self._endless

    def generated(self, env: str | None, index: int) -> Example[Any]:
        """Example ``index`` of ``env``'s endless training set."""
        key = ("endless", env, index)
        if key not in self._generated:
            self._generated[key] = self._tagged(self._endless[env].example_at(index), env)
        return self._generated[key]

    def levels(self, env: str | None = None) -> tuple[str, ...]:
        """``env``'s difficulty levels, easiest first (``()``: it has none, or the curriculum loaded none)."""
        return self._levels.get(env, ())

    def level_size(self, env: str | None, level: str) -> int | None:
        """How many examples the level holds (``None``: endless)."""
        dataset = self._level_datasets[(env, level)]
        return None if is_endless(dataset) else len(dataset)

    def at_level(self, env: str | None, level: str, index: int) -> Example[Any]:
        """Example ``index`` of ``env``'s ``level`` (a finite level wraps around)."""
        dataset = self._level_datasets[(env, level)]
        if not is_endless(dataset):
            if not len(dataset):
                raise CurriculumError(f"difficulty level {level!r} of {env or 'the env'} holds no examples")
            index %= len(dataset)
        key = ("level", env, level, index)
        if key not in self._generated:
            self._generated[key] = self._tagged(dataset[index], env)
        return self._generated[key]

    def get(self, example_id: str) -> Example[Any] | None:
        """The example of that id, when the pool handed it out; ``None`` otherwise."""
        return self._known.get(example_id)

    def take_new(self) -> list[tuple[int, Example[Any]]]:
        """Examples generated since the last call, with their positions (the trainer stores them)."""
        new, self._new = self._new, []
        return [(self._positions[example.id], example) for example in new]

    def _tagged(self, example: Example[Any], env: str | None) -> Example[Any]:
        if env is not None and example.env != env:
            # an env of a mixture: its examples' ids carry its name, as the mixture's own do
            example = Example(mixture_id(env, example.id), example.payload, env)
        self._remember(example, new=True)
        return example

    def _remember(self, example: Example[Any], *, new: bool) -> None:
        if example.id in self._known:
            return
        self._positions[example.id] = len(self._positions)
        self._known[example.id] = example
        if new:
            self._new.append(example)

    def position(self, example_id: str) -> int:
        """The example's position among every example the run has seen (0 for an unknown id)."""
        return self._positions.get(example_id, 0)


class Sampler:
    """Decides which example each training group runs; subclass it and override :meth:`draw`.

    ``draw(pool, step)`` returns an example the pool handed out (or its id); ``update``
    gets every scored group; ``state``/``load_state`` carry what the sampler learned
    (plain JSON) across a resume; ``figures`` are logged with each step (flat names:
    ``curriculum/<figure>`` for the run, ``curriculum/<env>/<figure>`` per env of a mixture;
    the inspector's Training tab charts ``set_aside``, ``level`` and ``weight``).

        class HardFirst(Sampler):
            def __init__(self):
                self.failed = []

            def draw(self, pool, step):
                return self.failed.pop() if self.failed else random.choice(pool.ids)

            def update(self, group):
                if group.mean < 0.5:
                    self.failed.append(group.example.id)
    """

    uses_levels: ClassVar[bool] = False
    """Whether the trainer must load the envs' difficulty levels into the pool."""

    def start(self, pool: ExamplePool) -> None:
        """Called once before the first draw: check the pool suits the sampler (raise to refuse)."""

    def draw(self, pool: ExamplePool, step: int) -> Example[Any] | str:
        raise NotImplementedError(f"{type(self).__name__}.draw(pool, step) must return an example or its id")

    def update(self, group: GroupScore) -> None:
        """One scored group (every group generated, dead or live)."""

    def state(self) -> dict[str, Any]:
        return {}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """The state :meth:`state` returned after the last step a resumed run keeps."""

    def figures(self) -> dict[str, float]:
        return {}

    def describe(self) -> str:
        """The sampler as its ``--curriculum`` spec (recorded with the run)."""
        cls = type(self)
        return f"{cls.__module__}:{cls.__qualname__}"


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
