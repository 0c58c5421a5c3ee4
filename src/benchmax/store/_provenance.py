"""How two runs' provenances differ: changed env code or data first, as warnings.

A reward delta between two runs may come from the model, or from changed env
code or data; ``benchmax diff``, the inspector's compare page and a resumed run
all say which, from the provenance each run stored (see
``benchmax.runner.run_provenance`` for what it holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["ProvenanceChange", "provenance_changes"]


@dataclass(frozen=True, slots=True)
class ProvenanceChange:
    """One way two runs' provenances differ; ``warning`` when results may differ because of it."""

    aspect: Literal["code", "data", "env", "model", "endpoint", "sampling", "benchmax", "missing"]
    warning: bool
    text: str


def provenance_changes(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[ProvenanceChange]:
    """How run B's provenance differs from run A's: changed env code and data first (warnings)."""
    if not a or not b:
        which = " and ".join(name for name, value in (("A", a), ("B", b)) if not value)
        return [ProvenanceChange("missing", False, f"run {which} recorded no provenance (older benchmax)")]
    changes: list[ProvenanceChange] = []
    code_a, code_b = a.get("code") or {}, b.get("code") or {}
    if code_a.get("sha256") != code_b.get("sha256"):
        detail = _changed_names(code_a.get("digests") or {}, code_b.get("digests") or {})
        changes.append(
            ProvenanceChange(
                "code",
                True,
                f"env code differs: A {_short(code_a.get('sha256'))} ({code_a.get('files', 0)} files), "
                f"B {_short(code_b.get('sha256'))} ({code_b.get('files', 0)} files){detail}",
            )
        )
    data_a, data_b = a.get("data") or {}, b.get("data") or {}
    if data_a.get("sha256") != data_b.get("sha256") or data_a.get("origin") != data_b.get("origin"):
        named_a = {entry.get("path", ""): entry.get("sha256") for entry in data_a.get("files") or ()}
        named_b = {entry.get("path", ""): entry.get("sha256") for entry in data_b.get("files") or ()}
        detail = _changed_names(_by_name(named_a), _by_name(named_b))
        changes.append(
            ProvenanceChange(
                "data",
                True,
                f"data differs: A {_data_label(data_a)}, B {_data_label(data_b)}{detail}",
            )
        )
    env_a, env_b = _env_label(a.get("env") or {}), _env_label(b.get("env") or {})
    if env_a != env_b:
        changes.append(ProvenanceChange("env", False, f"env: A {env_a}, B {env_b}"))
    for aspect in ("model", "endpoint", "sampling", "benchmax"):
        if a.get(aspect) != b.get(aspect):
            changes.append(ProvenanceChange(aspect, False, f"{aspect}: A {a.get(aspect)!r}, B {b.get(aspect)!r}"))  # type: ignore[arg-type]
    return changes


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "none"


def _data_label(data: Mapping[str, Any]) -> str:
    origin = data.get("origin")
    if isinstance(origin, Mapping) and origin.get("hub"):
        return f"hub {origin['hub']}@{origin.get('revision') or 'default'}"
    return f"{_short(data.get('sha256'))} ({data.get('count', 0)} files)"


def _env_label(env: Mapping[str, Any]) -> str:
    if env.get("kind") == "package":
        return f"{env.get('distribution')} {env.get('version')} ({env.get('entry_point')})"
    return str(env.get("path") or env.get("class") or env.get("spec"))


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
