"""How two runs' provenances differ: changed env code or data first, as warnings.

A reward delta between two runs may come from the model, or from changed env
code or data; ``benchmax diff``, the inspector's compare page and a resumed run
all say which, from the provenance each run stored (see
``benchmax.runner.run_provenance`` for what it holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CodeDigest",
    "DataDigest",
    "DataFile",
    "EnvIdentity",
    "GitState",
    "Provenance",
    "ProvenanceChange",
    "provenance_changes",
]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class EnvIdentity:
    """What names the env of a run: an installed package, a file, or an importable module."""

    spec: str | None = None
    class_name: str | None = None
    kind: str | None = None
    """``package``, ``file`` or ``module``."""
    name: str | None = None
    distribution: str | None = None
    version: str | None = None
    entry_point: str | None = None
    path: str | None = None

    @property
    def label(self) -> str:
        """How a person tells this env apart: the package and version, else its file, class or spec."""
        if self.kind == "package":
            return f"{self.distribution} {self.version} ({self.entry_point})"
        return str(self.path or self.class_name or self.spec)

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"spec": self.spec}
        for key, value in (
            ("class", self.class_name),
            ("kind", self.kind),
            ("name", self.name),
            ("distribution", self.distribution),
            ("version", self.version),
            ("entry_point", self.entry_point),
        ):
            if value is not None:
                record[key] = value
        record["path"] = self.path
        return record  # fmt: skip

    @classmethod
    def from_json(cls, value: object) -> EnvIdentity:
        data = _mapping(value)
        return cls(
            spec=_str(data.get("spec")),
            class_name=_str(data.get("class")),
            kind=_str(data.get("kind")),
            name=_str(data.get("name")),
            distribution=_str(data.get("distribution")),
            version=None if data.get("version") is None else str(data.get("version")),
            entry_point=_str(data.get("entry_point")),
            path=_str(data.get("path")),
        )


@dataclass(frozen=True, slots=True)
class CodeDigest:
    """The hash of an env's source files (and the per-file digests ``diff`` names changed files by)."""

    root: str | None = None
    sha256: str | None = None
    files: int = 0
    bytes: int = 0
    truncated: bool = False
    digests: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "sha256": self.sha256,
            "files": self.files,
            "bytes": self.bytes,
            "truncated": self.truncated,
            "digests": dict(self.digests),
        }

    @classmethod
    def from_json(cls, value: object) -> CodeDigest:
        data = _mapping(value)
        return cls(
            root=_str(data.get("root")),
            sha256=_str(data.get("sha256")),
            files=_int(data.get("files")),
            bytes=_int(data.get("bytes")),
            truncated=bool(data.get("truncated")),
            digests={str(name): str(digest) for name, digest in _mapping(data.get("digests")).items()},
        )


@dataclass(frozen=True, slots=True)
class DataFile:
    """One dataset file: its digest and size, or why it could not be read."""

    path: str
    size: int | None = None
    sha256: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"path": self.path}
        if self.error is not None:
            record["error"] = self.error
        if self.size is not None:
            record["size"] = self.size
        if self.sha256 is not None:
            record["sha256"] = self.sha256
        return record

    @classmethod
    def from_json(cls, value: object) -> DataFile:
        data = _mapping(value)
        size = data.get("size")
        return cls(
            path=str(data.get("path") or ""),
            size=size if isinstance(size, int) else None,
            sha256=_str(data.get("sha256")),
            error=_str(data.get("error")),
        )


@dataclass(frozen=True, slots=True)
class DataDigest:
    """The hash of the dataset files a run read (``origin``: the hub dataset and revision, when from the hub)."""

    source: str | None = None
    origin: Mapping[str, Any] | None = None
    files: tuple[DataFile, ...] = ()
    count: int = 0
    bytes: int = 0
    sha256: str | None = None
    truncated: bool = False
    examples_sha256: str | None = None
    """A digest of the examples themselves (ids, envs and payloads, in order), for an in-memory
    dataset that knows it without naming its examples (``None``: not known)."""

    @property
    def label(self) -> str:
        if self.origin is not None and self.origin.get("hub"):
            return f"hub {self.origin['hub']}@{self.origin.get('revision') or 'default'}"
        return f"{self.sha256[:12] if self.sha256 else 'none'} ({self.count} files)"

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"source": self.source}
        if self.origin is not None:
            record["origin"] = dict(self.origin)
        record.update(
            files=[entry.to_json() for entry in self.files],
            count=self.count,
            bytes=self.bytes,
            sha256=self.sha256,
            truncated=self.truncated,
        )
        if self.examples_sha256 is not None:
            record["examples_sha256"] = self.examples_sha256
        return record

    @classmethod
    def from_json(cls, value: object) -> DataDigest | None:
        if not isinstance(value, Mapping):
            return None
        origin = value.get("origin")
        return cls(
            source=_str(value.get("source")),
            origin=dict(origin) if isinstance(origin, Mapping) else None,
            files=tuple(DataFile.from_json(entry) for entry in value.get("files") or () if isinstance(entry, Mapping)),
            count=_int(value.get("count")),
            bytes=_int(value.get("bytes")),
            sha256=_str(value.get("sha256")),
            truncated=bool(value.get("truncated")),
            examples_sha256=_str(value.get("examples_sha256")),
        )


@dataclass(frozen=True, slots=True)
class GitState:
    """The git commit of the env's directory and whether it had uncommitted changes (``None``: unknown)."""

    commit: str | None = None
    dirty: bool | None = None
    repository: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "dirty": self.dirty, "repository": self.repository}

    @classmethod
    def from_json(cls, value: object) -> GitState | None:
        if not isinstance(value, Mapping):
            return None
        dirty = value.get("dirty")
        return cls(_str(value.get("commit")), dirty if isinstance(dirty, bool) else None, _str(value.get("repository")))


@dataclass(frozen=True, slots=True)
class Provenance:
    """What made a run, as the runner records it and every reader compares it (the ``provenance`` meta key).

    Stored as JSON of the same shape as always (:meth:`to_json`); :meth:`from_json`
    reads any older or newer record, keeping keys it does not know in ``extra``.
    ``inherited`` names what a rescored run took from its source run.
    """

    benchmax: str | None = None
    python: str | None = None
    recorded_at: float | None = None
    env: EnvIdentity = field(default_factory=EnvIdentity)
    code: CodeDigest = field(default_factory=CodeDigest)
    git: GitState | None = None
    data: DataDigest | None = None
    model: str | None = None
    endpoint: str | tuple[str, ...] | None = None
    sampling: Mapping[str, Any] | None = None
    inherited: tuple[str, ...] | None = None
    recorded_on_resume: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    members: tuple[tuple[str, Provenance], ...] = ()
    """A mixture's envs, each with its own provenance (its code, its data), by name, in order."""

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "benchmax": self.benchmax,
            "python": self.python,
            "recorded_at": self.recorded_at,
            "env": self.env.to_json(),
            "code": self.code.to_json(),
            "git": self.git.to_json() if self.git is not None else None,
            "data": self.data.to_json() if self.data is not None else None,
            "model": self.model,
            "endpoint": list(self.endpoint) if isinstance(self.endpoint, tuple) else self.endpoint,
            "sampling": dict(self.sampling) if self.sampling is not None else None,
        }
        if self.inherited is not None:
            record["inherited"] = list(self.inherited)
        if self.recorded_on_resume:
            record["recorded_on_resume"] = True
        if self.members:
            record["members"] = {name: member.to_json() for name, member in self.members}
        return {**self.extra, **record}

    @classmethod
    def from_json(cls, value: object) -> Provenance | None:
        """The record of a stored provenance; ``None`` when the run has none (older benchmax)."""
        if not isinstance(value, Mapping) or not value:
            return None
        endpoint = value.get("endpoint")
        sampling = value.get("sampling")
        inherited = value.get("inherited")
        recorded_at = value.get("recorded_at")
        members = value.get("members")
        return cls(
            benchmax=_str(value.get("benchmax")),
            python=_str(value.get("python")),
            recorded_at=float(recorded_at) if isinstance(recorded_at, int | float) else None,
            env=EnvIdentity.from_json(value.get("env")),
            code=CodeDigest.from_json(value.get("code")),
            git=GitState.from_json(value.get("git")),
            data=DataDigest.from_json(value.get("data")),
            model=_str(value.get("model")),
            endpoint=tuple(str(url) for url in endpoint) if isinstance(endpoint, list | tuple) else _str(endpoint),
            sampling=dict(sampling) if isinstance(sampling, Mapping) else None,
            inherited=tuple(str(key) for key in inherited) if isinstance(inherited, list | tuple) else None,
            recorded_on_resume=value.get("recorded_on_resume") is True,
            extra={key: item for key, item in value.items() if key not in _KNOWN},
            members=tuple(
                (str(name), member)
                for name, item in (members.items() if isinstance(members, Mapping) else ())
                if (member := Provenance.from_json(item)) is not None
            ),
        )


_KNOWN = frozenset(
    ("benchmax", "python", "recorded_at", "env", "code", "git", "data", "model", "endpoint", "sampling", "inherited",
     "recorded_on_resume", "members")
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class ProvenanceChange:
    """One way two runs' provenances differ; ``warning`` when results may differ because of it."""

    aspect: Literal["code", "data", "env", "model", "endpoint", "sampling", "benchmax", "missing"]
    warning: bool
    text: str


def provenance_changes(
    a: Provenance | Mapping[str, Any] | None, b: Provenance | Mapping[str, Any] | None
) -> list[ProvenanceChange]:
    """How run B's provenance differs from run A's: changed env code and data first (warnings).

    Either may be given as stored (the ``provenance`` meta value) or as its record."""
    if not isinstance(a, Provenance):
        a = Provenance.from_json(a)
    if not isinstance(b, Provenance):
        b = Provenance.from_json(b)
    if a is None or b is None:
        which = " and ".join(name for name, value in (("A", a), ("B", b)) if value is None)
        return [ProvenanceChange("missing", False, f"run {which} recorded no provenance (older benchmax)")]
    changes: list[ProvenanceChange] = []
    code_a, code_b = a.code, b.code
    if code_a.sha256 != code_b.sha256:
        detail = _changed_names(code_a.digests, code_b.digests)
        changes.append(
            ProvenanceChange(
                "code",
                True,
                f"env code differs: A {_short(code_a.sha256)} ({code_a.files} files), "
                f"B {_short(code_b.sha256)} ({code_b.files} files){detail}",
            )
        )
    data_a, data_b = a.data or DataDigest(), b.data or DataDigest()
    if data_a.sha256 != data_b.sha256 or data_a.origin != data_b.origin:
        named_a = {entry.path: entry.sha256 for entry in data_a.files}
        named_b = {entry.path: entry.sha256 for entry in data_b.files}
        detail = _changed_names(_by_name(named_a), _by_name(named_b))
        changes.append(ProvenanceChange("data", True, f"data differs: A {data_a.label}, B {data_b.label}{detail}"))
    if a.env.label != b.env.label:
        changes.append(ProvenanceChange("env", False, f"env: A {a.env.label}, B {b.env.label}"))
    plain_a, plain_b = a.to_json(), b.to_json()
    for aspect in ("model", "endpoint", "sampling", "benchmax"):
        if plain_a[aspect] != plain_b[aspect]:
            changes.append(
                ProvenanceChange(aspect, False, f"{aspect}: A {plain_a[aspect]!r}, B {plain_b[aspect]!r}")  # type: ignore[arg-type]
            )
    changes.extend(_member_changes(a, b))
    return changes


def _member_changes(a: Provenance, b: Provenance) -> list[ProvenanceChange]:
    """How a mixture's envs differ, each named: its code and data changes are warnings, as for one env."""
    members_a, members_b = dict(a.members), dict(b.members)
    changes: list[ProvenanceChange] = []
    for name, member_a in members_a.items():
        member_b = members_b.get(name)
        if member_b is None:
            changes.append(ProvenanceChange("env", True, f"env {name!r} is only in A"))
            continue
        for change in provenance_changes(member_a, member_b):
            if change.aspect in ("code", "data", "env"):
                changes.append(ProvenanceChange(change.aspect, change.warning, f"env {name!r}: {change.text}"))
    changes.extend(
        ProvenanceChange("env", True, f"env {name!r} is only in B") for name in members_b.keys() - members_a.keys()
    )
    return changes


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "none"


def _by_name(named: Mapping[str, Any]) -> dict[str, Any]:
    return {Path(path).name: digest for path, digest in named.items()}


def _changed_names(a: Mapping[str, Any], b: Mapping[str, Any], limit: int = 6) -> str:
    changed = sorted(name for name in a.keys() & b.keys() if a[name] != b[name])
    only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    parts = []
    for label, names in (("changed", changed), ("only in A", only_a), ("only in B", only_b)):
        if names:
            shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
            parts.append(f"{label}: {shown}")
    return f"; {'; '.join(parts)}" if parts else ""
