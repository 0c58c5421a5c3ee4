"""The members of a mixture: what each env is, how much of the draw it gets, where its data lives."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.envs import Environment
from benchmax.loading import EnvSpec, data_directories
from benchmax.mix._errors import MixError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_name(name: object) -> str:
    """A member's name: it prefixes the member's example ids (``NAME/ID``) and labels its figures."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise MixError(
            f"{name!r} is not a usable env name in a mixture: use 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit (it prefixes the env's example ids as NAME/ID)"
        )
    return name


def check_weight(name: str, weight: object) -> float:
    """A member's relative weight: a finite number >= 0 (the weights need not sum to 1)."""
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight < 0:
        raise MixError(f"env {name!r}: weight {weight!r} is not a finite number >= 0 (weights are relative)")
    return float(weight)


def check_max_examples(name: str, max_examples: object) -> int | None:
    if max_examples is None:
        return None
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise MixError(f"env {name!r}: max_examples {max_examples!r} is not a positive integer")
    return max_examples


@dataclass(frozen=True, slots=True)
class MixMember:
    """One env of a mixture, loaded.

    ``data_dirs`` are where its ``create_dataset`` looks (in order, as for a run of
    that env alone: :func:`benchmax.loading.data_directories`); empty means the
    directory of the env's class file and its ``data/`` folder. ``spec`` and
    ``env_kwargs`` say how it was loaded, when it was loaded from a spec.
    """

    name: str
    env: Environment[Any, Any]
    weight: float = 1.0
    max_examples: int | None = None
    data_dirs: tuple[Path, ...] = ()
    spec: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name)
        if not isinstance(self.env, Environment):
            raise MixError(
                f"env {self.name!r}: {type(self.env).__name__} is not an environment "
                "(a benchmax.envs.BaseEnv or Environment instance)"
            )
        object.__setattr__(self, "weight", check_weight(self.name, self.weight))
        check_max_examples(self.name, self.max_examples)
        object.__setattr__(self, "data_dirs", tuple(Path(path) for path in self.data_dirs))

    def places(self, base_dir: Path) -> tuple[Path, ...]:
        """Where this member's data is looked for: its own directories, else its class file's, else ``base_dir``."""
        if self.data_dirs:
            return self.data_dirs
        try:
            source = inspect.getsourcefile(type(self.env))
        except TypeError:
            source = None
        if source is None:
            return (Path(base_dir),)
        return data_directories(EnvSpec(source))


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One env of a mixture as a user names it and a run stores it (``RunConfig.mix``).

    ``spec`` is what ``benchmax eval`` takes for one env (a file, a directory, a module,
    an installed env's name, a served env's URL); ``data_dir`` overrides where its data
    is read from.
    """

    name: str
    spec: str
    weight: float = 1.0
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_examples: int | None = None
    data_dir: Path | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if not isinstance(self.spec, str) or not self.spec.strip():
            raise MixError(f"env {self.name!r}: give the env's spec (a file, directory, module or installed name)")
        object.__setattr__(self, "weight", check_weight(self.name, self.weight))
        check_max_examples(self.name, self.max_examples)
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", Path(self.data_dir))

    def load(self) -> MixMember:
        """The member, its env constructed; a failure names this env and says why."""
        env_spec = EnvSpec(self.spec, dict(self.env_kwargs))
        try:
            env = env_spec.load()
            places = data_directories(env_spec, self.data_dir)
        except Exception as exc:
            raise MixError(f"env {self.name!r} ({self.spec}) failed to load: {exc}") from exc
        return MixMember(
            name=self.name,
            env=env,
            weight=self.weight,
            max_examples=self.max_examples,
            data_dirs=places,
            spec=self.spec,
            env_kwargs=dict(self.env_kwargs),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "weight": self.weight,
            "env_kwargs": dict(self.env_kwargs),
            "max_examples": self.max_examples,
            "data_dir": str(self.data_dir) if self.data_dir is not None else None,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> MemberSpec:
        return cls(
            name=value["name"],
            spec=value["spec"],
            weight=value.get("weight", 1.0),
            env_kwargs=dict(value.get("env_kwargs") or {}),
            max_examples=value.get("max_examples"),
            data_dir=Path(value["data_dir"]) if value.get("data_dir") else None,
        )


@dataclass(frozen=True, slots=True)
class MixSpec:
    """A mixture as a run stores it: its members and the seed of the training draw."""

    members: tuple[MemberSpec, ...]
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        check_members(self.members)

    @property
    def label(self) -> str:
        """What names the mixture where a run of one env shows its spec (``A+B+C``)."""
        return "+".join(member.name for member in self.members)

    def to_json(self) -> dict[str, Any]:
        return {"members": [member.to_json() for member in self.members], "seed": self.seed}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> MixSpec:
        return cls(
            members=tuple(MemberSpec.from_json(item) for item in value.get("members") or ()),
            seed=int(value.get("seed") or 0),
        )


def check_members(members: Sequence[MemberSpec | MixMember]) -> None:
    """At least one env, names unique, weights summing above zero."""
    if not members:
        raise MixError("a mixture needs at least one env")
    names = [member.name for member in members]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        specs = [getattr(member, "spec", None) for member in members if member.name == twice[0]]
        raise MixError(
            f"two envs are named {twice[0]!r} ({', '.join(str(spec) for spec in specs)}); give each its own "
            f"name, e.g. --env {twice[0]}2=SPEC (NAME=SPEC[=WEIGHT]) or MixMember(name=...)"
        )
    if not sum(member.weight for member in members) > 0:
        raise MixError(
            f"the weights of {', '.join(names)} sum to 0: give at least one env a weight above 0 (weights are relative)"
        )
