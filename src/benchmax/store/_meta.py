"""A run's metadata as one typed record: what the runner writes and every reader in the project reads.

On disk it is the ``meta`` table, one JSON value per key, as it always was (an
old run opens, and ``--resume`` works across versions). :meth:`RunMeta.from_json`
reads any run: a key this version does not know stays in ``extra``, a value of
the wrong type reads as unknown. ``Run.meta`` (the plain dict) stays for users'
code; readers inside benchmax use ``Run.run_meta``.

Three values are JSON owned by the package that writes them, held here as
mappings because the store sits below those packages: ``config`` (the runner's
``RunConfig.to_meta``, read back with ``RunConfig.from_meta``), ``train``
(``TrainConfig.to_meta`` / ``TrainConfig.from_meta``) and ``cost`` (the
client's ``calls_to_meta`` / ``calls_from_meta``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmax.store._provenance import Provenance
from benchmax.store._vocabulary import RunStatus, run_status


@dataclass(frozen=True, slots=True)
class ProvenanceResume:
    """A resume that found the env code or data changed since the run started."""

    at: float
    changes: tuple[str, ...]
    provenance: Provenance | None

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "changes": list(self.changes),
            "provenance": self.provenance.to_json() if self.provenance is not None else None,
        }

    @classmethod
    def from_json(cls, value: object) -> ProvenanceResume | None:
        if not isinstance(value, Mapping):
            return None
        return cls(
            at=_float(value.get("at")) or 0.0,
            changes=tuple(str(change) for change in value.get("changes") or ()),
            provenance=Provenance.from_json(value.get("provenance")),
        )


@dataclass(frozen=True, slots=True)
class RunMeta:
    """Everything a run directory says about its run (``None``: not recorded)."""

    kind: str | None = None
    """``eval``, ``rescore`` or ``train``."""
    status: RunStatus | None = None
    """Where the run stands (an older spelling reads as today's: see :func:`run_status`)."""
    error: str | None = None
    created_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    active_seconds: float | None = None
    """Seconds the run ran, over all its sessions."""
    versions: Mapping[str, Any] | None = None
    config: Mapping[str, Any] | None = None
    """An eval's ``RunConfig.to_meta()`` (read it with ``RunConfig.from_meta``)."""
    train: Mapping[str, Any] | None = None
    """A training run's ``TrainConfig.to_meta()`` (read it with ``TrainConfig.from_meta``)."""
    pass_threshold: float | None = None
    env_class: str | None = None
    env_file: str | None = None
    model: str | None = None
    base_url: str | None = None
    dataset_size: int | None = None
    cost: Mapping[str, Any] | None = None
    """The run's model calls (``benchmax.client.calls_to_meta``) and the prices used."""
    provenance: Provenance | None = None
    provenance_resumes: tuple[ProvenanceResume, ...] = ()
    outages: tuple[Mapping[str, Any], ...] = ()
    rescored_from: str | None = None
    source_created_at: float | None = None
    source_cost: Mapping[str, Any] | None = None
    steps: int | None = None
    train_seconds: float | None = None
    evals: Mapping[str, Any] | None = None
    replay_only: Mapping[str, Any] | None = None
    """The reward parts each env's rewards hold that only a replay of the episode could compute
    again (``{env: ["turn rewards", "outcome"]}``, from ``benchmax.envs.replay_only``): what
    ``benchmax rescore`` keeps as stored or refuses to recompute. Unset: every part rescores."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Keys this version does not know (a newer benchmax's, or a user's ``set_meta``), as stored."""

    @property
    def status_text(self) -> str | None:
        """The status to show: a known one, else whatever a newer benchmax stored."""
        raw = self.extra.get("status")
        return self.status or (raw if isinstance(raw, str) else None)

    @property
    def model_name(self) -> str | None:
        """The model a run sampled: as recorded when it ran, else as its config names it."""
        return self.model or (str(self.config["model"]) if self.config and self.config.get("model") else None)

    @property
    def env_name(self) -> str | None:
        """The env a run ran: its class, else the spec its config names."""
        return self.env_class or (str(self.config["env"]) if self.config and self.config.get("env") else None)

    @property
    def env_label(self) -> str | None:
        """The env name a one-env run's rollouts carry: the spec it was run with (a mixture names
        its members by theirs, so a single run and a mixture's member compare), else its class."""
        spec = self.config.get("env") if self.config else None
        return spec if isinstance(spec, str) and spec else self.env_class

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> RunMeta:
        """The record of a stored meta table (key -> decoded JSON); tolerant of any older or newer run.

        A value of a known key that does not read (another type, a status this version
        does not know) stays in ``extra`` as stored, like an unknown key.
        """
        known: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in values.items():
            read = _READERS.get(key)
            field_value = read(value) if read is not None else None
            if field_value is not None:
                known[key] = field_value
            elif key != "schema_version" and (read is None or value is not None):
                extra[key] = value
        return cls(**known, extra=extra)

    def to_json(self) -> dict[str, Any]:
        """The meta table's keys and JSON values for every recorded field (``extra`` included)."""
        return {**self.extra, **meta_values({name: getattr(self, name) for name in _READERS}, skip_unset=True)}


def meta_values(changes: Mapping[str, Any], *, skip_unset: bool = False) -> dict[str, Any]:
    """``changes`` (:class:`RunMeta` field names and values) as meta keys and JSON values.

    A name that is not a field raises ``TypeError``, so a writer cannot misspell a
    key a reader looks for. ``None`` is written as JSON null (it clears a value),
    unless ``skip_unset``.
    """
    values: dict[str, Any] = {}
    for name, value in changes.items():
        if name not in _READERS:
            raise TypeError(f"RunMeta has no field {name!r}")
        if value is None or (name in _EMPTY_UNSET and not value):
            if skip_unset:
                continue
            values[name] = None if name not in _EMPTY_UNSET else []
            continue
        values[name] = _json(value)
    return values


def _json(value: Any) -> Any:
    if isinstance(value, Provenance | ProvenanceResume):
        return value.to_json()
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: _json(item) for key, item in value.items()}
    return value


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _resumes(value: object) -> tuple[ProvenanceResume, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(item for item in (ProvenanceResume.from_json(entry) for entry in value) if item is not None)


def _outages(value: object) -> tuple[Mapping[str, Any], ...]:
    return tuple(entry for entry in value if isinstance(entry, Mapping)) if isinstance(value, list | tuple) else ()


_READERS: dict[str, Any] = {
    "kind": _str,
    "status": run_status,
    "error": _str,
    "created_at": _float,
    "started_at": _float,
    "ended_at": _float,
    "active_seconds": _float,
    "versions": _mapping,
    "config": _mapping,
    "train": _mapping,
    "pass_threshold": _float,
    "env_class": _str,
    "env_file": _str,
    "model": _str,
    "base_url": _str,
    "dataset_size": _int,
    "cost": _mapping,
    "provenance": Provenance.from_json,
    "provenance_resumes": _resumes,
    "outages": _outages,
    "rescored_from": _str,
    "source_created_at": _float,
    "source_cost": _mapping,
    "steps": _int,
    "train_seconds": _float,
    "evals": _mapping,
    "replay_only": _mapping,
}
"""How each stored key reads (a value of another type reads as not recorded)."""
_EMPTY_UNSET = frozenset(("provenance_resumes", "outages"))


def labelled(env: str | None, label: str | None) -> str | None:
    """The env a stored row belongs to: its example's (a mixture's member), else the run's own
    (``label``, :attr:`RunMeta.env_label`: a run of one env stores no env per example)."""
    return env if env is not None else label
