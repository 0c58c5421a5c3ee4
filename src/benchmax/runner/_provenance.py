"""A run's provenance: what made it, recorded by :class:`~benchmax.runner.RunSession` for every run.

benchmax's version; the env (its installed package's name and version, or its
file); a hash of the env's source (its module and the other ``.py`` files of its
package or directory, bounded); a hash of each dataset file it read; the git
commit and whether the env's directory has uncommitted changes; the model, the
endpoint (without credentials) and the sampling. Never a secret: API keys are
read from the environment at run time and never pass through here, env kwargs
are left out, and URLs lose their user info and query string.

How two runs' provenances differ is the store's (``benchmax.store.provenance_changes``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmax import __version__
from benchmax.auth import redact_url
from benchmax.envs import SamplingParams
from benchmax.loading import EnvSpec
from benchmax.mix import EnvMix
from benchmax.runner._digest import FileDigests
from benchmax.store import CodeDigest, DataDigest, DataFile, EnvIdentity, GitState, Provenance

MAX_SOURCE_FILES = 256
"""Source files hashed per env at most (the env's own module always among them)."""
MAX_SOURCE_BYTES = 16 * 2**20
LISTED_SOURCE_FILES = 64
"""Per-file digests kept in the run (``diff`` names changed files among these)."""
MAX_DATA_FILES = 10_000
LISTED_DATA_FILES = 32
GIT_TIMEOUT = 5.0
_SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages", "build", "dist", "venv", "runs"}


@dataclass(frozen=True, slots=True)
class RunOrigin:
    """What a face knows about a run as it starts; the session turns it into the run's provenance.

    ``inherited`` is a source run's provenance (rescoring): the data, model,
    endpoint and sampling that made the transcripts come from it, while the env
    and its code are the ones scoring now.
    """

    env: object | None = None
    """The env instance or class."""
    spec: EnvSpec | None = None
    dataset: object | None = None
    """The dataset ``create_dataset`` returned (its ``source_files()`` or ``path`` are hashed)."""
    model: str | None = None
    endpoint: str | Sequence[str] | None = None
    sampling: SamplingParams | None = None
    inherited: Provenance | None = None


def run_provenance(origin: RunOrigin) -> Provenance:
    """The provenance record of a run starting from ``origin`` (never raises for git or files)."""
    if isinstance(origin.env, EnvMix):
        return _mix_provenance(origin, origin.env)
    inherited = origin.inherited or Provenance()
    cls = origin.env if inspect.isclass(origin.env) else type(origin.env) if origin.env is not None else None
    env, root, main = _env_identity(cls, origin.spec)
    if origin.dataset is not None:
        with FileDigests() as digests:
            data = _data(origin.dataset, digests)
    else:
        data = inherited.data
    endpoint = origin.endpoint if origin.endpoint is not None else inherited.endpoint
    return Provenance(
        benchmax=__version__,
        python=platform.python_version(),
        recorded_at=time.time(),
        env=env,
        code=_code(root, main),
        git=_git(_directory_of(root, main), main),
        data=data,
        model=origin.model if origin.model is not None else inherited.model,
        endpoint=_endpoint(endpoint) if endpoint is not None else None,
        sampling=_sampling(origin.sampling) if origin.sampling is not None else inherited.sampling,
        inherited=None
        if origin.inherited is None
        else tuple(
            key
            for key, own in (("data", origin.dataset), ("model", origin.model), ("endpoint", origin.endpoint),
                             ("sampling", origin.sampling))
            if own is None
        ),
    )  # fmt: skip


def _mix_provenance(origin: RunOrigin, mix: EnvMix) -> Provenance:
    """A mixture's provenance: the run's model, endpoint and sampling, and each env's own code and data
    (its spec, its files, the dataset it read) under its name."""
    members = tuple(
        (
            member.name,
            run_provenance(
                RunOrigin(
                    env=member.env,
                    spec=EnvSpec(member.spec, member.env_kwargs) if member.spec is not None else None,
                    dataset=mix.datasets.get(member.name),
                )
            ),
        )
        for member in mix.members
    )
    run = run_provenance(replace(origin, env=None, spec=None, dataset=None))
    names = "+".join(member.name for member in mix.members)
    identity = EnvIdentity(spec=names, class_name=f"{type(mix).__module__}.{type(mix).__qualname__}", kind="mix")
    data = run.data
    if origin.dataset is not None:  # the mixture's own examples (their order, names and payloads)
        data = DataDigest(source=type(origin.dataset).__name__, examples_sha256=_examples_digest(origin.dataset))
    return replace(run, env=identity, members=members, data=data)


def _env_identity(cls: type | None, spec: EnvSpec | None) -> tuple[EnvIdentity, Path | None, Path | None]:
    """What names the env, the root its source is hashed under, and its own module file."""
    main = _source_file(cls)
    installed = spec.installed() if spec is not None else None
    env: dict[str, Any] = {"spec": spec.spec if spec is not None else None}
    if cls is not None:
        env["class_name"] = f"{cls.__module__}.{cls.__qualname__}"
    if installed is not None:
        env.update(
            kind="package",
            name=installed.name,
            distribution=installed.distribution,
            version=installed.version,
            entry_point=installed.value,
        )
        main = main or installed.source_file()
        root = _package_root(installed.module.split(".")[0], main) or main
    elif spec is not None and spec.directory is not None:
        env["kind"] = "file"
        root = spec.directory
    else:
        env["kind"] = "module"
        top = cls.__module__.split(".")[0] if cls is not None else ""
        root = _package_root(top, main) or (main.parent if main is not None else None)
        dist = _distribution(top) if top else None
        if dist is not None:
            env.update(distribution=dist.metadata["Name"], version=dist.version)
    env["path"] = str(main) if main is not None else None
    return EnvIdentity(**env), root, main


def _source_file(cls: type | None) -> Path | None:
    if cls is None:
        return None
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    return Path(source).resolve() if source else None


def _package_root(top: str, main: Path | None) -> Path | None:
    """The directory of ``main``'s top-level package when ``main`` lies in it; ``main`` when it is that module."""
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if main is None or not file:
        return None
    location = Path(file).resolve()
    if location.name == "__init__.py" and main.is_relative_to(location.parent):
        return location.parent
    return main if location == main else None


def _distribution(top: str) -> importlib.metadata.Distribution | None:
    for name in (top, top.replace("_", "-")):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        listed = (dist.read_text("top_level.txt") or "").split()
        if not listed or top in listed:
            return dist
    return None


def _directory_of(root: Path | None, main: Path | None) -> Path | None:
    if root is not None and root.is_dir():
        return root
    return main.parent if main is not None else None


def _code(root: Path | None, main: Path | None) -> CodeDigest:
    """One digest over the env's source files (sorted relative paths and their contents)."""
    files = _source_files(root, main)
    truncated = len(files) > MAX_SOURCE_FILES
    files = files[:MAX_SOURCE_FILES]
    base = _directory_of(root, main)
    combined = hashlib.sha256()
    digests: dict[str, str] = {}
    total = 0
    hashed = 0
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if total + len(data) > MAX_SOURCE_BYTES and hashed:
            truncated = True
            break
        total += len(data)
        relative = file.relative_to(base).as_posix() if base is not None and file.is_relative_to(base) else file.name
        digest = hashlib.sha256(data).hexdigest()
        combined.update(f"{relative}\0{digest}\n".encode())
        if len(digests) < LISTED_SOURCE_FILES:
            digests[relative] = digest[:16]
        hashed += 1
    return CodeDigest(
        root=str(base) if base is not None else None,
        sha256=combined.hexdigest() if hashed else None,
        files=hashed,
        bytes=total,
        truncated=truncated,
        digests=digests,
    )


def _source_files(root: Path | None, main: Path | None) -> list[Path]:
    """``main`` first, then the other ``.py`` files under ``root`` in walk order (sorted), one past the bound."""
    found: list[Path] = [main] if main is not None and main.is_file() else []
    if root is None or not root.is_dir():
        return found
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(
            name for name in subdirs if not name.startswith(".") and name not in _SKIPPED_DIRS
            and not name.endswith(".egg-info")
        )  # fmt: skip
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = Path(directory, name).resolve()
            if path != main:
                found.append(path)
            if len(found) > MAX_SOURCE_FILES:
                return found
    return found


def _git(directory: Path | None, main: Path | None) -> GitState | None:
    """The commit and dirty state of the env's directory when it is tracked in a git repository."""
    if directory is None or shutil.which("git") is None:
        return None
    environment = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            env=environment,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return None
        if main is not None and git("check-ignore", "-q", str(main)).returncode == 0:
            return None  # an ignored file (a venv inside the repository) is not the repository's code
        head = git("rev-parse", "--verify", "-q", "HEAD")
        status = git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return None
    return GitState(
        commit=head.stdout.strip() or None,
        dirty=bool(status.stdout.strip()) if status.returncode == 0 else None,
        repository=top.stdout.strip(),
    )


def _data(dataset: object, digests: FileDigests) -> DataDigest:
    files = _dataset_files(dataset)
    origin = getattr(dataset, "origin", None)
    hub = (
        {key: value for key, value in origin.items() if value is not None}
        if isinstance(origin, Mapping) and origin.get("hub")
        else None
    )
    combined = hashlib.sha256()
    entries: list[DataFile] = []
    total = 0
    hashed = 0
    for file in files[:MAX_DATA_FILES]:
        try:
            size = file.stat().st_size
            digest = digests.sha256(file)
        except OSError as exc:
            entries.append(DataFile(str(file), error=f"{type(exc).__name__}: {exc}"))
            continue
        total += size
        hashed += 1
        combined.update(f"{file.name}\0{digest}\n".encode())
        if len(entries) < LISTED_DATA_FILES:
            entries.append(DataFile(str(file.resolve()), size=size, sha256=digest))
    return DataDigest(
        source=type(dataset).__name__,
        origin=hub,
        files=tuple(entries),
        count=len(files),
        bytes=total,
        sha256=combined.hexdigest() if hashed else None,
        truncated=len(files) > MAX_DATA_FILES,
        examples_sha256=_examples_digest(dataset),
    )


def _examples_digest(dataset: object) -> str | None:
    """The in-memory dataset's digest of its examples (``Dataset._content_digest``), when it has one."""
    hook = getattr(dataset, "_content_digest", None)
    if not callable(hook):
        return None
    digest = hook()
    return digest if isinstance(digest, str) else None


def _dataset_files(dataset: object) -> list[Path]:
    source_files = getattr(dataset, "source_files", None)
    if callable(source_files):
        try:
            return [Path(file) for file in source_files()]
        except (TypeError, ValueError, OSError):
            return []
    path = getattr(dataset, "path", None)
    if isinstance(path, str | Path) and Path(path).is_file():
        return [Path(path)]
    return []


def _endpoint(value: str | Sequence[str]) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return _clean_url(value)
    return tuple(_clean_url(url) for url in value)


def _clean_url(url: str) -> str:
    """The URL as :func:`~benchmax.auth.redact_url` shows it, less query and fragment: the endpoint itself."""
    return redact_url(url).partition("#")[0].partition("?")[0]


def _sampling(sampling: SamplingParams) -> dict[str, Any]:
    values = asdict(sampling)
    if values.get("stop"):
        values["stop"] = list(values["stop"])
    return {key: value for key, value in values.items() if value not in (None, False, {}, [], ())}
