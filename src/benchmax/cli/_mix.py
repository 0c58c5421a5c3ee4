"""A mixture from the command line: ``benchmax eval A B C``, ``--env [NAME=]SPEC[=WEIGHT]``, per-env options.

The grammar, for each env (a positional ENV or a ``--env`` value):

* ``SPEC``: the env, named by :func:`benchmax.runner.env_name` (``examples/math`` -> ``math``), weight 1;
* ``SPEC=WEIGHT``: with a relative weight (a number >= 0; the weights need not sum to 1);
* ``NAME=SPEC`` / ``NAME=SPEC=WEIGHT``: with an explicit name (two envs of one name must be renamed so).

Per env: ``--env-arg NAME:KEY=VALUE`` (a plain ``KEY=VALUE`` is refused in a mixture: it would
not say which env it is for), ``--data-dir NAME:DIR`` (likewise), ``--env-max-examples NAME=N``;
``--max-examples N`` caps every env at N. A run of one env (one ENV, no ``--env``) is not a
mixture and takes its options as always.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from benchmax.cli._options import EnvOptions, option_group, parse_env_args
from benchmax.loading import EnvSpec
from benchmax.mix import MemberSpec, MixError, MixSpec
from benchmax.runner import env_name

MixEnvs = Annotated[
    list[str],
    typer.Option(
        "--env",
        metavar="[NAME=]SPEC[=WEIGHT]",
        help="An env of a mixture, with an optional name and relative weight (repeatable; e.g. --env "
        "examples/math=0.5 --env fmt=examples/format=0.5). See docs/mixtures.md.",
        show_default=False,
    ),
]
EnvMaxExamples = Annotated[
    list[str],
    typer.Option(
        "--env-max-examples",
        metavar="NAME=N",
        help="In a mixture: use at most N examples of env NAME (repeatable).",
        show_default=False,
    ),
]


@option_group("Mixture")
@dataclass(frozen=True, slots=True)
class MixOptions:
    """Several envs run as one (docs/mixtures.md): each with a name, a weight and a cap of its own."""

    mix_env: MixEnvs = field(default_factory=list)
    env_max_examples: EnvMaxExamples = field(default_factory=list)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def _weight(text: str, where: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        raise typer.BadParameter(f"{where}: weight {text!r} does not parse as a number", param_hint="--env") from None
    if not math.isfinite(weight) or weight < 0:
        raise typer.BadParameter(f"{where}: weight {text!r} must be a finite number >= 0", param_hint="--env")
    return weight


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_member(value: str) -> tuple[str | None, str, float]:
    """``[NAME=]SPEC[=WEIGHT]`` as (name or ``None``, spec, weight)."""
    parts = value.split("=")
    if len(parts) == 1:
        return None, value, 1.0
    if len(parts) == 2:
        head, tail = parts
        if _is_number(tail) or not _NAME.match(head):
            return None, head, _weight(tail, f"env {head!r}")
        return head, tail, 1.0
    if len(parts) == 3:
        return parts[0], parts[1], _weight(parts[2], f"env {parts[0]!r}")
    raise typer.BadParameter(f"{value!r}: write [NAME=]SPEC[=WEIGHT], e.g. math=examples/math=0.5", param_hint="--env")


def mix_spec(
    positional: Sequence[str],
    options: Sequence[str],
    *,
    env_args: Sequence[str],
    max_examples: int | None,
    env_max_examples: Sequence[str],
    seed: int | None,
    data_dirs: Sequence[str] = (),
) -> MixSpec | None:
    """The mixture the command line names, or ``None`` for a run of one env (then nothing here applies)."""
    if len(positional) + len(options) <= 1 and not options:
        if env_max_examples:
            raise typer.BadParameter(
                "is for a mixture of envs (give several ENVs or --env)", param_hint="--env-max-examples"
            )
        return None
    given = [parse_member(value) for value in (*positional, *options)]
    names = [name or env_name(spec) for name, spec, _ in given]
    kwargs: dict[str, dict[str, Any]] = {name: {} for name in names}
    for item in env_args:
        key_part = item.partition("=")[0]
        name, colon, _ = key_part.partition(":")
        if not colon:
            raise typer.BadParameter(
                f"{item!r}: in a mixture say which env it is for, as NAME:KEY=VALUE (envs: {', '.join(names)})",
                param_hint="--env-arg",
            )
        if name not in kwargs:
            raise typer.BadParameter(f"{item!r}: no env of the mixture is named {name!r} (envs: {', '.join(names)})",
                                     param_hint="--env-arg")  # fmt: skip
        kwargs[name].update(parse_env_args([item[len(name) + 1 :]]))
    caps: dict[str, int | None] = {name: max_examples for name in names}
    for item in env_max_examples:
        name, sep, raw = item.partition("=")
        if not sep or name not in caps or not raw.isdigit() or int(raw) < 1:
            raise typer.BadParameter(
                f"{item!r}: write NAME=N with N >= 1 and NAME one of the mixture's envs ({', '.join(names)})",
                param_hint="--env-max-examples",
            )
        caps[name] = int(raw)
    places = _data_dirs(data_dirs, names)
    try:
        return MixSpec(
            tuple(
                MemberSpec(name, spec, weight, kwargs.get(name, {}), caps.get(name), places.get(name))
                for name, (_, spec, weight) in zip(names, given, strict=True)
            ),
            seed=seed or 0,
        )
    except MixError as exc:
        raise typer.BadParameter(str(exc), param_hint="--env") from None


def _data_dirs(values: Sequence[str], names: Sequence[str]) -> dict[str, Path]:
    """``--data-dir NAME:DIR`` values as ``{name: DIR}``: each for one env of the mixture, once."""
    places: dict[str, Path] = {}
    for item in values:
        name, colon, directory = item.partition(":")
        if not colon or name not in names or not directory:
            raise typer.BadParameter(
                f"{item!r}: a mixture's envs each read their own data; say which env a directory is for, as "
                f"NAME:DIR (envs: {', '.join(names)})",
                param_hint="--data-dir",
            )
        if name in places:
            raise typer.BadParameter(f"{item!r}: env {name!r} is given a data directory twice", param_hint="--data-dir")
        places[name] = Path(directory)
    return places


def run_target(env: str | None, mix: MixSpec | None, env_options: EnvOptions) -> EnvSpec | MixSpec:
    """What a command runs, typed: the mixture its options name, else ENV built with its
    ``--env-arg`` kwargs; neither is a usage error."""
    if mix is not None:
        return mix
    if env is not None:
        return EnvSpec(env, env_options.kwargs())
    raise typer.BadParameter("give ENV (or --resume RUN_DIR)", param_hint="ENV")
