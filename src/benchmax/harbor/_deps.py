"""Harbor is optional: importing this package costs nothing, using it needs ``benchmax[harbor]``."""

from __future__ import annotations

import importlib
import sys


def require_harbor() -> None:
    """Fail at use, with the install command, when the ``harbor`` package is not importable."""
    try:
        importlib.import_module("harbor")
    except ModuleNotFoundError as exc:
        if exc.name != "harbor":
            raise
        if sys.version_info < (3, 12):
            raise ImportError(
                "HarborEnv needs the harbor package, which requires Python 3.12 or newer "
                f"(this is {sys.version_info.major}.{sys.version_info.minor}); on 3.12+ install "
                "`benchmax[harbor]` plus the extra of the sandbox provider you use"
            ) from None
        raise ImportError(
            "HarborEnv needs the harbor package: install `benchmax[harbor]` plus the extra of the "
            "sandbox provider you use (e.g. `harbor[modal]`); the local provider needs none"
        ) from None
