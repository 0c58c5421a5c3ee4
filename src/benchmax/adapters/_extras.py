"""The one place an adapter imports its framework, so a missing one is named with its install line.

Adapters load their framework only when a spec names it: ``benchmax eval inspect:...`` without
Inspect AI installed stops before any rollout with the single ``pip install`` to run, instead of a
``ModuleNotFoundError`` from deep inside the loader.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from benchmax.envs import EnvSpecError

EXTRAS: dict[str, tuple[str, str]] = {
    "inspect_ai": ("Inspect AI", "inspect-ai"),
    "reasoning_gym": ("reasoning-gym", "gallery"),
    "verifiers": ("verifiers", "adapters"),
    "skyrl_gym": ("SkyRL-Gym", "adapters"),
}
"""Import name -> (what it is called, the benchmax extra that installs it)."""


def install_line(module: str) -> str:
    """The command that installs what ``module`` needs, as a user would paste it."""
    extra = EXTRAS[module][1]
    return f"pip install 'benchmax[{extra}]'"


def require(module: str, spec: str) -> ModuleType:
    """``import module``, or an :class:`EnvSpecError` naming the spec and the install command."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != module.split(".")[0]:
            raise
        label = EXTRAS[module.split(".")[0]][0]
        raise EnvSpecError(
            f"{spec}: needs {label}, which is not installed; install it with: {install_line(module.split('.')[0])}"
        ) from None
