"""A mixture of envs that is itself an env: one dataset drawn from every member, each rollout run by its own env.

Trainers and ``run_group`` callers drive an :class:`EnvMix` like any
:class:`~benchmax.envs.Environment`. Its examples are the members' own, re-made
with an id unique across the mixture (``NAME/ID``) and ``env=NAME``; a request is
handed to the member its ``env`` names with the member's own example (its id and payload
exactly as a run of that env alone sees them), and the outcomes come back under
the mixture's example id: :meth:`EnvMix.route` and :meth:`EnvMix.unroute`, the one pair
every caller (the mixture's own hooks, the runner's executor) goes through. Groups never
mix envs: a group is one example's.

The order of the examples:

* ``eval``: every member's examples (each up to its ``max_examples``),
  interleaved round-robin in member order (``A0 B0 C0 A1 B1 ...``; a member that
  runs out drops out of the round). Weights do not matter for eval.
* ``train``: as many draws as the members with a weight above zero hold examples
  together (or the mixture's ``max_examples``). Each draw picks a member with
  probability ``weight / sum(weights)`` and takes that member's next example in a
  shuffled order of its examples (shuffled again whenever it runs out, so a
  member drawn more often than it has examples repeats them). Everything is drawn
  from one ``random.Random(seed)``: the same seed and data give the same order, and
  another seed another.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmax.envs import (
    Dataset,
    DatasetError,
    DatasetSplit,
    Environment,
    Example,
    RolloutAttempt,
    RolloutOutcome,
    RolloutRequest,
    ValidationDiagnostic,
    check_group,
)
from benchmax.loading import open_examples
from benchmax.mix._errors import MixError
from benchmax.mix._members import MixMember, MixSpec, check_members

logger = logging.getLogger("benchmax.mix")

SEPARATOR = "/"
"""Between a member's name and its example's id in a mixture's example id."""


def mixture_id(name: str, example_id: str) -> str:
    """The id of a member's example in the mixture: unique across it, stable across runs."""
    return f"{name}{SEPARATOR}{example_id}"


class MixDataset(Dataset[Any]):
    """A mixture's examples, each carrying its env's name (``Example.env``)."""

    def __init__(self, examples: Sequence[Example[Any]]) -> None:
        super().__init__(examples)
        self._envs: list[str | None] = [example.env for example in examples]

    def __getitem__(self, index: int) -> Example[Any]:
        example = self._packed[index]
        return Example(example.id, example.payload, self._envs[index])

    def __iter__(self) -> Iterator[Example[Any]]:
        for example, env in zip(self._packed, self._envs, strict=True):
            yield Example(example.id, example.payload, env)

    def _known_ids(self) -> Sequence[str] | None:
        return self._packed.ids

    def _content_digest(self) -> str | None:
        return self._packed.content_digest()

    def env_counts(self) -> dict[str, int]:
        """How many examples of each env the dataset holds."""
        counts: dict[str, int] = {}
        for env in self._envs:
            if env is not None:
                counts[env] = counts.get(env, 0) + 1
        return counts


class EnvMix(Environment[Any, RolloutAttempt]):
    """Several envs run as one: see the module's docstring for the order of the examples."""

    def __init__(self, members: Sequence[MixMember], *, seed: int = 0) -> None:
        members = tuple(members)
        check_members(members)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise MixError(f"the mixture's seed must be an integer, got {seed!r}")
        self.members: tuple[MixMember, ...] = members
        self.seed = seed
        self._by_name = {member.name: member for member in members}
        self.datasets: dict[str, object] = {}
        """What each member's ``create_dataset`` returned for the last split read (its provenance)."""

    @classmethod
    async def load(cls, spec: MixSpec) -> EnvMix:
        """The mixture ``spec`` names, every member constructed; members loaded before one that fails
        are closed again, and the error names the env that failed."""
        loaded: list[MixMember] = []
        try:
            for member in spec.members:
                loaded.append(await asyncio.to_thread(member.load))
        except BaseException:
            await close_members(loaded)
            raise
        return cls(loaded, seed=spec.seed)

    def member(self, name: str | None) -> MixMember:
        """The member called ``name``; an example of no member of this mixture is refused."""
        found = self._by_name.get(name) if name is not None else None
        if found is None:
            raise MixError(
                f"example of env {name!r} is not from this mixture (its envs: {', '.join(self._by_name)})"
            )
        return found

    def route(self, requests: Sequence[RolloutRequest[Any]]) -> tuple[MixMember, list[RolloutRequest[Any]]]:
        """A group's member (named by its example's ``env``), and the group's requests as that member
        receives them: its own example, id and payload as a run of it alone sees them (one member per
        group: groups never mix envs). :meth:`unroute` takes the member's outcomes back."""
        check_group(requests)
        example = requests[0].example
        member = self.member(example.env)
        prefix = member.name + SEPARATOR
        if not example.id.startswith(prefix):
            raise MixError(f"example {example.id!r} of env {member.name!r} has no {prefix!r} prefix to its id")
        own = Example(example.id[len(prefix) :], example.payload)
        return member, [replace(request, example=own) for request in requests]

    @staticmethod
    def unroute(outcome: RolloutOutcome, requests: Sequence[RolloutRequest[Any]]) -> RolloutOutcome:
        """A member's outcome of a group :meth:`route` sent it, under the mixture's example id."""
        example_id = requests[0].example.id
        return replace(outcome, example_id=example_id) if outcome.example_id != example_id else outcome

    # The contract.

    @property
    def requires_public_model_endpoint(self) -> bool:
        return any(member.env.requires_public_model_endpoint for member in self.members)

    @property
    def unavailable(self) -> str | None:
        for member in self.members:
            reason = member.env.unavailable
            if reason is not None:
                return f"env {member.name!r}: {reason}"
        return None

    def validation_diagnostics(self) -> Sequence[ValidationDiagnostic]:
        found: list[ValidationDiagnostic] = []
        for member in self.members:
            for diagnostic in member.env.validation_diagnostics():
                found.append(replace(diagnostic, message=f"env {member.name!r}: {diagnostic.message}"))
        return tuple(found)

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> MixDataset:
        """Every member's examples of ``split`` as the mixture's (see the module docstring for the order)."""
        per_member: list[list[Example[Any]]] = []
        datasets: dict[str, object] = {}
        for member in self.members:
            examples, dataset = await self._member_examples(member, split, Path(base_dir))
            datasets[member.name] = dataset
            per_member.append(examples)
        self.datasets = datasets
        if split == "train":
            order = list(self._drawn(per_member, max_examples))
        else:
            order = list(_interleaved(per_member))
            if max_examples is not None:
                order = order[:max_examples]
        return MixDataset(order)

    async def _member_examples(
        self, member: MixMember, split: DatasetSplit, base_dir: Path
    ) -> tuple[list[Example[Any]], object]:
        try:
            stream = await open_examples(member.env, split, member.places(base_dir), max_examples=member.max_examples)
            examples = await asyncio.to_thread(list, stream)
        except DatasetError as exc:
            raise type(exc)(f"env {member.name!r}: {exc}") from exc
        except Exception as exc:
            exc.add_note(f"while reading the {split} examples of env {member.name!r}")
            raise
        if not examples:
            raise DatasetError(
                f"env {member.name!r}: {type(member.env).__name__}.create_dataset({split!r}) returned no examples "
                f"(data dir: {stream.base_dir})"
            )
        return [
            Example(mixture_id(member.name, example.id), example.payload, member.name) for example in examples
        ], stream.dataset

    def _drawn(self, per_member: Sequence[Sequence[Example[Any]]], max_examples: int | None) -> Iterator[Example[Any]]:
        rng = random.Random(self.seed)
        weights = [member.weight for member in self.members]
        total = sum(len(examples) for examples, weight in zip(per_member, weights, strict=True) if weight > 0)
        draws = total if max_examples is None else max_examples
        orders: list[list[int]] = [[] for _ in per_member]
        indices = range(len(per_member))
        for _ in range(draws):
            chosen = rng.choices(indices, weights=weights)[0]
            if not orders[chosen]:
                order = list(range(len(per_member[chosen])))
                rng.shuffle(order)
                orders[chosen] = order[::-1]
            yield per_member[chosen][orders[chosen].pop()]

    async def run_rollout(self, request: RolloutRequest[Any]) -> RolloutAttempt:
        member, (routed,) = self.route([request])
        return await member.env.run_rollout(routed)

    async def run_group(self, requests: Sequence[RolloutRequest[Any]]) -> Mapping[str, RolloutOutcome]:
        """The group run by its member's own ``run_group`` (its engine, its group rewards)."""
        member, routed = self.route(requests)
        outcomes = await member.env.run_group(routed)
        return {key: self.unroute(outcome, requests) for key, outcome in outcomes.items()}

    async def aclose(self) -> None:
        """Close every member; one that fails does not keep the others open (its error is raised after)."""
        await close_members(self.members, raise_errors=True)


def _interleaved(per_member: Sequence[Sequence[Example[Any]]]) -> Iterator[Example[Any]]:
    longest = max((len(examples) for examples in per_member), default=0)
    for index in range(longest):
        for examples in per_member:
            if index < len(examples):
                yield examples[index]


async def close_members(members: Sequence[MixMember], *, raise_errors: bool = False) -> None:
    failed: list[str] = []
    for member in members:
        try:
            await member.env.aclose()
        except Exception as exc:
            logger.exception("env %r: %s.aclose() failed", member.name, type(member.env).__name__)
            failed.append(f"env {member.name!r}: {type(exc).__name__}: {exc}")
    if failed and raise_errors:
        raise MixError(f"closing the mixture failed for {len(failed)} env(s): {'; '.join(failed)}")
