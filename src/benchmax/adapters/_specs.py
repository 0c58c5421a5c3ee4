"""Which adapter a spec names: the ``FRAMEWORK:`` prefixes ``benchmax.loading`` hands over here.

Each prefix maps to a function that returns a ``BaseEnv`` class bound to what follows the
prefix; ``--env-arg`` values are that class's constructor arguments. The framework is imported
only when its spec is loaded (:mod:`._extras`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from benchmax.envs import BaseEnv

ADAPTER_PREFIXES: tuple[str, ...] = ("inspect:", "reasoning-gym:", "verifiers:", "skyrl-gym:")
"""The spec prefixes of other frameworks' envs, in the order the docs list them."""


def is_adapter_spec(spec: str) -> bool:
    """Whether ``spec`` names another framework's env (``inspect:``, ``reasoning-gym:``, ...)."""
    return spec.startswith(ADAPTER_PREFIXES)


def _factory(spec: str) -> Callable[[str], type[BaseEnv]]:
    if spec.startswith("inspect:"):
        from benchmax.adapters._inspect import inspect_env_class

        return inspect_env_class
    if spec.startswith("reasoning-gym:"):
        from benchmax.adapters._reasoning_gym import reasoning_gym_env_class

        return reasoning_gym_env_class
    if spec.startswith("verifiers:"):
        from benchmax.adapters._verifiers import verifiers_env_class

        return verifiers_env_class
    from benchmax.adapters._skyrl_gym import skyrl_gym_env_class

    return skyrl_gym_env_class


def adapter_env_class(spec: str) -> type[BaseEnv]:
    """The ``BaseEnv`` class for an adapter spec; raises ``EnvSpecError`` saying what to fix or install."""
    return _factory(spec)(spec)


def adapter_directory(spec: str) -> Path | None:
    """Where an adapter env's own files live: an Inspect task file's directory; ``None`` for packaged envs."""
    if spec.startswith("inspect:"):
        file = spec.removeprefix("inspect:").partition("@")[0]
        return Path(file).resolve().parent
    return None


def adapter_env_name(spec: str) -> str:
    """A run's name for an adapter env: the task (``inspect:evals/arith.py@addition`` -> ``addition``, or the
    file's stem), the env or taskset id (without a hub owner or version), or the reasoning-gym tasks joined by ``+``."""
    prefix, _, rest = spec.partition(":")
    if prefix == "inspect":
        file, _, task = rest.partition("@")
        return task or Path(file).stem or "inspect"
    if prefix == "reasoning-gym":
        return "+".join(part.strip() for part in rest.split(",") if part.strip()) or "reasoning-gym"
    name = rest.rstrip("/").rsplit("/", 1)[-1]
    if prefix == "verifiers":
        name = name.partition("@")[0]  # a hub id, owner/name@version, names its taskset name
    return name or prefix
