"""Which runs the inspector serves, and what of their metadata it may show.

Run ids in URLs are directory names looked up in this catalog, never joined onto
a filesystem path, so no URL can reach outside the served directory.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from benchmax.auth import redact_urls
from benchmax.store import DB_NAME, RunMeta, RunQueries, run_status

_SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|bearer|cookie)", re.I)
_SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)")
REDACTED = "[redacted]"


class UnknownRun(LookupError):
    """The URL names a run this inspector does not serve."""


class RunCatalog:
    """Runs under one root: the root itself when it holds a run, else its child directories."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.exists():
            raise FileNotFoundError(f"{root} does not exist; pass a run directory or a folder of runs")
        self._open: dict[str, RunQueries] = {}
        self._headlines: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def runs(self) -> dict[str, Path]:
        """``{run_id: run_dir}``, newest first; rescanned on each call so new runs appear."""
        if (self.root / DB_NAME).exists():
            return {self.root.name: self.root}
        found = [child for child in self.root.iterdir() if child.is_dir() and (child / DB_NAME).exists()]
        found.sort(key=lambda child: (child / DB_NAME).stat().st_mtime, reverse=True)
        return {child.name: child for child in found}

    def get(self, run_id: str) -> RunQueries:
        with self._lock:
            if run_id in self._open:
                return self._open[run_id]
        path = self.runs().get(run_id)
        if path is None:
            raise UnknownRun(run_id)
        queries = RunQueries(path)
        with self._lock:
            return self._open.setdefault(run_id, queries)

    def summary(self, run_id: str) -> dict[str, Any]:
        """One runs-list row; cached until the run's files change."""
        queries = self.get(run_id)
        stamp = _stamp(queries.db)
        cached = self._headlines.get(run_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        meta = queries.run_meta()
        headline = queries.headline()
        row = {
            "run_id": run_id,
            "env": meta.env_name,
            "model": meta.model_name,
            "created_at": meta.created_at or meta.started_at,
            "status": meta.status_text,
            "kind": meta.kind,
            "rescore": self.rescore_of(meta),
            "bytes": sum(size for size in stamp[1::2]),
            **headline,
            "state": run_state(
                meta.status_text,
                headline["rollouts"],
                headline["scored"],
                unscored=unscored(headline),
                error=meta.error,
            ),
        }
        if unscored(headline):
            row["pass_rate"] = None  # nothing was scored: no rate, not 0%
        self._headlines[run_id] = (stamp, row)
        return row

    def rescore_of(self, meta: RunMeta) -> dict[str, Any] | None:
        """For a rescored run: its source's name, creation time and, when this catalog serves
        the source too, its run id (so the page can link it); ``None`` for any other run."""
        if meta.kind != "rescore":
            return None
        source = meta.rescored_from
        name = Path(source).name if source else None
        served = None
        if name is not None:
            found = self.runs().get(name)
            if found is not None and _same_path(found, Path(str(source))):
                served = name
        return {"source": name, "run_id": served, "source_created_at": meta.source_created_at}

    def close(self) -> None:
        with self._lock:
            for queries in self._open.values():
                queries.close()
            self._open.clear()


def unscored(figures: dict[str, Any]) -> bool:
    """Whether a run's rollouts carry no reward component at all (imported conversations before
    ``benchmax rescore``): its pass rate and rewards are "none yet", not 0."""
    return bool(figures.get("rollouts")) and not figures.get("components")


def run_state(
    status: object, rollouts: int, scored: int, *, unscored: bool = False, error: str | None = None
) -> dict[str, Any]:
    """How the inspector shows where a run stands: its status and a tone to paint it in.

    A completed run none of whose rollouts was scored is painted as failed: it ran
    to the end, but measured nothing. Old runs' ``finished`` reads as completed;
    a status this version does not know is shown as it is, in a neutral tone.
    """
    known = run_status(status)
    if known is None:
        return {"status": status if isinstance(status, str) else None, "tone": "muted", "note": None}
    if known == "completed" and rollouts and not scored:
        return {"status": known, "tone": "bad", "note": "every rollout failed"}
    if known == "completed" and error:  # ran to the end, and failed its verdict (benchmax eval exited 1)
        return {"status": known, "tone": "bad", "note": "failed (exit 1)"}
    if known == "completed" and unscored:
        return {"status": known, "tone": "muted", "note": "not scored yet (benchmax rescore)"}
    tone = {"running": "info", "completed": "ok", "failed": "bad", "interrupted": "warn"}[known]
    return {"status": known, "tone": tone, "note": None}


def redact(value: Any, key: str = "") -> Any:
    """Metadata as the inspector shows it: secret-looking fields and URL credentials masked.

    The store never holds API keys (only the name of the variable that holds
    one); this is the second line, for metadata written by other tools.
    """
    if isinstance(value, dict):
        return {name: redact(item, str(name)) for name, item in value.items()}
    if isinstance(value, list):
        return [redact(item, key) for item in value]
    if isinstance(value, str):
        if _SECRET_KEY.search(key) and not key.lower().endswith("_env") and value:
            return REDACTED
        return redact_urls(_SECRET_VALUE.sub(REDACTED, value))
    return value


def _same_path(found: Path, recorded: Path) -> bool:
    """Whether the served run is the one a rescore recorded (a relative record matches by name)."""
    if not recorded.is_absolute():
        return True
    try:
        return found.resolve() == recorded.resolve()
    except OSError:
        return False


def _stamp(db: Path) -> tuple[int, ...]:
    values: list[int] = []
    for path in (db, db.with_name(db.name + "-wal")):
        try:
            stat = path.stat()
        except FileNotFoundError:
            values.extend((0, 0))
        else:
            values.extend((stat.st_mtime_ns, stat.st_size))
    return tuple(values)
