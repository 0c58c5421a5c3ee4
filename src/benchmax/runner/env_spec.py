"""Finding and constructing an env from what a user types: a file, a module or a directory.

Env code is loaded from the local file system only; a spec is never fetched.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmax.envs.environment import Environment

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class EnvSpecError(ValueError):
    """The env spec does not name a loadable environment class."""


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """``path/to/file.py:Class``, ``package.module:Class`` or an examples directory
    (holding ``env.py`` with one env class; its data files sit beside it)."""

    spec: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def directory(self) -> Path | None:
        """The default ``base_dir`` for data: the env file's directory, when there is one."""
        target = self._file()
        return target.parent.resolve() if target is not None else None

    def _file(self) -> Path | None:
        path_part = self.spec.rsplit(":", 1)[0] if self._has_class() else self.spec
        path = Path(path_part)
        if path.is_dir():
            return path / "env.py"
        if path.suffix == ".py":
            return path
        return None

    def _has_class(self) -> bool:
        head, sep, tail = self.spec.rpartition(":")
        return bool(sep) and bool(tail) and tail.isidentifier() and not (len(head) == 1 and head.isalpha())

    def load_class(self) -> type[Environment]:
        if _URL.match(self.spec):
            raise EnvSpecError(
                f"{self.spec}: env code is loaded from local files and installed modules only, never "
                "fetched; download it, review it, and pass its local path"
            )
        class_name = self.spec.rpartition(":")[2] if self._has_class() else None
        file = self._file()
        if file is not None:
            module = _import_file(file)
        else:
            module_name = self.spec.rpartition(":")[0] if class_name else self.spec
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                raise EnvSpecError(
                    f"cannot import {module_name!r} ({exc}); give path/to/file.py:Class, "
                    "package.module:Class or an examples directory"
                ) from exc
        if class_name is not None:
            cls = getattr(module, class_name, None)
            if not (inspect.isclass(cls) and issubclass(cls, Environment)):
                raise EnvSpecError(f"{module.__name__} has no environment class {class_name!r}")
            return cls
        candidates = [
            value
            for value in vars(module).values()
            if inspect.isclass(value)
            and issubclass(value, Environment)
            and value.__module__ == module.__name__
            and not inspect.isabstract(value)
        ]
        if len(candidates) != 1:
            names = ", ".join(sorted(c.__name__ for c in candidates)) or "none"
            raise EnvSpecError(
                f"{self.spec}: expected exactly one environment class, found {names}; "
                "name it as FILE:Class"
            )
        return candidates[0]

    def load(self) -> Environment:
        cls = self.load_class()
        try:
            return cls(**dict(self.kwargs))
        except TypeError as exc:
            raise EnvSpecError(f"cannot construct {cls.__name__}(**{dict(self.kwargs)!r}): {exc}") from exc



def _import_file(file: Path) -> Any:
    if not file.is_file():
        raise EnvSpecError(f"{file}: env file not found")
    resolved = file.resolve()
    name = f"benchmax_env_{abs(hash(str(resolved))):x}"
    # Reuse the module only while the file is unchanged: a rescore or validate in a
    # long-lived process (a notebook) must see the env code as it is now.
    status = resolved.stat()
    stamp = (status.st_mtime_ns, status.st_size)
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, "__benchmax_stamp__", None) == stamp:
        return cached
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise EnvSpecError(f"{file}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    module.__benchmax_stamp__ = stamp  # type: ignore[attr-defined]
    sys.modules[name] = module
    parent = str(resolved.parent)
    added = parent not in sys.path
    if added:
        sys.path.insert(0, parent)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        where = _location(file, resolved, exc)
        raise EnvSpecError(f"{where}: importing it raised {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            sys.path.remove(parent)
    return module


def _location(file: Path, resolved: Path, exc: BaseException) -> str:
    """``file:line`` of the env file's line that raised (or imported what raised)."""
    if isinstance(exc, SyntaxError) and exc.filename == str(resolved) and exc.lineno:
        return f"{file}:{exc.lineno}"
    lines = [frame.lineno for frame in traceback.extract_tb(exc.__traceback__) if frame.filename == str(resolved)]
    return f"{file}:{lines[-1]}" if lines else str(file)
