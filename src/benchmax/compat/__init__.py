"""benchmax 0.2.x's module paths, served from one table.

0.2.x code imports names from module paths that no longer hold code here
(``benchmax.rewards.judge``, ``benchmax.envs.harbor.env``, ``benchmax.sft.rows``,
...). Rather than a shim file beside each real module, :data:`MODULES` names every
0.2.x module path, the names 0.2.x exported from it (its ``__all__``) and, for a
path with no file here, where each name it served lives now. A finder installed
by ``import benchmax`` serves those paths: the module it builds resolves each name
from its home on first access, so ``from benchmax.envs.harbor.env import HarborEnv``
gets the very class ``benchmax.harbor.HarborEnv`` is (``isinstance`` and pickling
by reference hold). A path that is still a file here (``benchmax.envs.base``) is
that file; its entry records its 0.2.x names, which tests/compat checks against
the recorded 0.2.5 surface.

This is the one module that names private homes (0.2.5's tests import a few
private names), by string: nothing imports it but ``benchmax/__init__.py``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from benchmax.compat._table import MODULES, OldModule

__all__ = ["MODULES", "OldModule", "install", "resolve"]


def resolve(home: str, name: str) -> Any:
    """The object at ``home`` (``"module"`` or ``"module:attribute"``) for the name ``name``."""
    module, _, attribute = home.partition(":")
    return getattr(importlib.import_module(module), attribute or name)


class _OldModuleLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = MODULES[module.__name__]
        module.__doc__ = f"benchmax 0.2.x's module path ``{module.__name__}``, served by :mod:`benchmax.compat`."
        module.__all__ = list(old.public)

        def __getattr__(name: str) -> Any:
            home = old.names.get(name)
            if home is None:
                raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
            value = resolve(home, name)
            setattr(module, name, value)
            return value

        def __dir__() -> Sequence[str]:
            return sorted({*module.__dict__, *old.names})

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]


class _OldModuleFinder(importlib.abc.MetaPathFinder):
    """Last on ``sys.meta_path``: a 0.2.x path no file answered is built from :data:`MODULES`."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = MODULES.get(fullname)
        if old is None or not old.names:
            return None
        package = any(other.startswith(fullname + ".") for other in MODULES)
        return importlib.util.spec_from_loader(fullname, _OldModuleLoader(), is_package=package)


def install() -> None:
    """Serve 0.2.x's module paths (idempotent; ``import benchmax`` calls it)."""
    if not any(isinstance(finder, _OldModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_OldModuleFinder())
