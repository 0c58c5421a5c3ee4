"""Custom Harbor agents that carry their own source, so an env does not depend on its author's checkout.

The listed files are read when the source is captured; before a trial, they are
written once per content into a read-only directory and imported under a
package name derived from their digest, so two versions of one agent never
collide and an edited checkout never changes a running env.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib.machinery import ModuleSpec
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harbor.models.trial.config import AgentConfig

_lock = threading.RLock()
_root: Path | None = None
_written: dict[str, Path] = {}


def _canonical(path: str | Path) -> str:
    raw = str(path)
    pure = PurePosixPath(raw)
    if not raw or "\\" in raw or "\0" in raw or pure.is_absolute() or any(p in ("", ".", "..") for p in pure.parts):
        raise ValueError(f"bundled agent file {raw!r} must be a plain relative POSIX path (no '..', no '.')")
    if pure.as_posix() != raw:
        raise ValueError(f"bundled agent file {raw!r} must be written canonically as {pure.as_posix()!r}")
    return raw


@dataclass(frozen=True, slots=True, repr=False)
class BundledAgentSource:
    """The files of one custom agent (paths relative to its root, bytes), and their digest."""

    files: tuple[tuple[str, bytes], ...]
    content_id: str = field(init=False)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        normalized = []
        for path, content in self.files:
            name = _canonical(path)
            if name in seen:
                raise ValueError(f"bundled agent file {name!r} is listed twice")
            if not isinstance(content, bytes):
                raise TypeError(f"bundled agent file {name!r} must be bytes")
            seen.add(name)
            normalized.append((name, content))
        if not normalized:
            raise ValueError("a bundled agent needs at least one file")
        normalized.sort()
        digest = hashlib.sha256(b"benchmax-bundled-harbor-agent-v1\0")
        for name, content in normalized:
            digest.update(len(name.encode()).to_bytes(8, "big") + name.encode())
            digest.update(len(content).to_bytes(8, "big") + content)
        object.__setattr__(self, "files", tuple(normalized))
        object.__setattr__(self, "content_id", f"sha256:{digest.hexdigest()}")

    @classmethod
    def from_directory(cls, root: str | Path, *, files: Sequence[str | Path]) -> BundledAgentSource:
        """Read exactly ``files`` under ``root`` now (no symlinks on the way)."""
        base = Path(root).expanduser().resolve(strict=True)
        if not base.is_dir():
            raise ValueError(f"bundled agent root {base} is not a directory")
        captured = []
        for requested in files:
            name = _canonical(requested)
            path = base
            for part in PurePosixPath(name).parts:
                path = path / part
                if path.is_symlink():
                    raise ValueError(f"bundled agent file {name!r} goes through a symlink")
            if not path.is_file():
                raise ValueError(f"bundled agent file {name!r} does not exist under {base}")
            captured.append((name, path.read_bytes()))
        return cls(tuple(captured))

    @classmethod
    def from_files(cls, files: Mapping[str, bytes]) -> BundledAgentSource:
        return cls(tuple(files.items()))

    def __repr__(self) -> str:
        return f"BundledAgentSource(content_id={self.content_id!r}, files={len(self.files)})"


def _split(import_path: str) -> tuple[str, str]:
    if import_path.count(":") != 1:
        raise ValueError(f"agent import_path {import_path!r} must look like 'module.path:ClassName'")
    module, name = import_path.split(":")
    if not module or not all(part.isidentifier() for part in module.split(".")) or not name.isidentifier():
        raise ValueError(f"agent import_path {import_path!r} has an invalid module or class name")
    return module, name


@dataclass(frozen=True, slots=True, repr=False)
class BundledHarborAgent:
    """A Harbor ``AgentConfig`` with ``import_path`` (and no ``name``) plus the source it imports from."""

    config: AgentConfig
    source: BundledAgentSource

    def __post_init__(self) -> None:
        from harbor.models.trial.config import AgentConfig

        if not isinstance(self.config, AgentConfig):
            raise TypeError(f"BundledHarborAgent.config must be a Harbor AgentConfig, got {type(self.config).__name__}")
        if self.config.name is not None or self.config.import_path is None:
            raise ValueError("a bundled Harbor agent needs an import_path and no name")
        module, _ = _split(self.config.import_path)
        stem = module.replace(".", "/")
        available = {name for name, _ in self.source.files}
        if not {f"{stem}.py", f"{stem}/__init__.py"} & available:
            raise ValueError(f"the bundled agent's module {module!r} is not among its files")
        object.__setattr__(self, "config", self.config.model_copy(deep=True))

    def harbor_config(self) -> AgentConfig:
        """The plain Harbor config, its import path pointing into the written-out source."""
        return self.config.model_copy(
            deep=True, update={"name": None, "import_path": _load(self.source, self.config.import_path or "")}
        )

    def __repr__(self) -> str:
        return f"BundledHarborAgent(import_path={self.config.import_path!r}, source={self.source.content_id!r})"


def _load(source: BundledAgentSource, import_path: str) -> str:
    from harbor.agents.base import BaseAgent

    module, name = _split(import_path)
    root = _write(source)
    package = f"_benchmax_harbor_agent_{source.content_id.removeprefix('sha256:')}"
    with _lock:
        if package not in sys.modules:
            namespace = ModuleType(package)
            namespace.__path__ = [str(root)]  # type: ignore[attr-defined]
            namespace.__spec__ = ModuleSpec(package, loader=None, is_package=True)
            sys.modules[package] = namespace
        loaded = importlib.import_module(f"{package}.{module}")
    agent: Any = getattr(loaded, name, None)
    if not isinstance(agent, type) or not issubclass(agent, BaseAgent):
        raise TypeError(f"bundled agent {import_path!r} is not a Harbor BaseAgent subclass")
    return f"{package}.{module}:{name}"


def _write(source: BundledAgentSource) -> Path:
    global _root
    with _lock:
        if source.content_id in _written:
            return _written[source.content_id]
        if _root is None:
            _root = Path(tempfile.mkdtemp(prefix="benchmax-harbor-agents-"))
            atexit.register(_remove, _root)
        target = _root / source.content_id.removeprefix("sha256:")
        staging = _root / f".{target.name}.staging"
        staging.mkdir()
        try:
            for name, content in source.files:
                path = staging.joinpath(*PurePosixPath(name).parts)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        for path in [target, *target.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        _written[source.content_id] = target
        return target


def _remove(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    shutil.rmtree(root, ignore_errors=True)
