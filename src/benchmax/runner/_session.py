"""One run session: a run directory's ids, writes, batches and status, for eval, rescore and training.

Every face that writes a run goes through a :class:`RunSession`, so a run looks
the same whoever made it: group and rollout ids are built from their parts,
groups are written whole, batches are zero-filled when they close, and the
status is set on every way out (``completed``, ``interrupted`` on Ctrl-C or
cancellation, ``failed`` with the error otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from benchmax import __version__
from benchmax.auth import redact_url
from benchmax.client import CallLog, Outage, total_usd
from benchmax.engine import GroupResult
from benchmax.envs import Example
from benchmax.loading import ExampleStream
from benchmax.runner._provenance import RunOrigin, run_provenance
from benchmax.store import (
    DB_NAME,
    GroupWrite,
    Provenance,
    ProvenanceResume,
    RolloutCost,
    RunMeta,
    RunStatus,
    RunWriter,
    ScoredGroup,
    StoreError,
    provenance_changes,
)

logger = logging.getLogger("benchmax.runner")

RunKind = Literal["eval", "rescore", "train"]


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Names one group of siblings: its id is built from these parts, never parsed back.

    ``occurrence`` tells apart the repeats of one example in a dataset (or in one
    training step); ``step`` is the trainer's step. Rollout ids are
    ``<group id>#<sample index>``.
    """

    id: str
    example_id: str
    example_index: int
    step: int | None = None

    @classmethod
    def of(
        cls, split: str, example: Example[Any], index: int, *, step: int | None = None, occurrence: int = 0
    ) -> GroupKey:
        return cls(group_id(split, example.id, step=step, occurrence=occurrence), example.id, index, step)

    def rollout_id(self, sample: int) -> str:
        return f"{self.id}#{sample}"


def group_id(split: str, example_id: str, *, step: int | None = None, occurrence: int = 0) -> str:
    """The id of a group (:class:`GroupKey`), from its parts."""
    prefix = f"step{step}/" if step is not None else ""
    return f"{prefix}{split}/{example_id}~{occurrence}" if occurrence else f"{prefix}{split}/{example_id}"


_CHUNK = 1000
"""Positions a resumed run's plan reads at a time (one range scan of each index)."""


def same_examples(stored: Provenance, now: Provenance) -> bool:
    """Whether a resumed run's dataset is the one it started with, by digest alone: the digest of
    the examples themselves (an in-memory dataset), else the dataset files' and the env code's
    (which turns their rows into examples). ``False`` when either run does not know it."""
    a, b = stored.data, now.data
    if a is None or b is None:
        return False
    if a.examples_sha256 is not None or b.examples_sha256 is not None:
        return a.examples_sha256 == b.examples_sha256
    return (
        a.sha256 is not None
        and not a.truncated
        and (a.sha256, a.count, a.origin) == (b.sha256, b.count, b.origin)
        and stored.code.sha256 is not None
        and stored.code.sha256 == now.code.sha256
        and not stored.members
    )


def group_keys(split: str, examples: Sequence[Example[Any]], *, step: int | None = None) -> list[GroupKey]:
    """The keys of ``examples`` in order; a repeated example gets the next occurrence number."""
    seen: dict[str, int] = {}
    keys = []
    for index, example in enumerate(examples):
        occurrence = seen.get(example.id, 0)
        seen[example.id] = occurrence + 1
        keys.append(GroupKey.of(split, example, index, step=step, occurrence=occurrence))
    return keys


class RunSession:
    """The writer of one run directory, with the run's lifecycle around it."""

    def __init__(self, writer: RunWriter, *, resumed: bool) -> None:
        self.writer = writer
        self.run_dir = writer.run_dir
        self.resumed = resumed
        meta = writer.run_meta()
        self._previous_active = meta.active_seconds or 0.0
        self._began = time.time()
        self._outages: list[Mapping[str, Any]] = list(meta.outages)
        self._closed = False
        self.dataset_trusted = False
        """Whether a resumed run's dataset has the digest it started with (:func:`same_examples`):
        its stored example ids are then trusted, and only the examples left to run are read."""

    @classmethod
    def create(
        cls,
        run_dir: str | Path,
        *,
        kind: RunKind,
        meta: RunMeta | Mapping[str, Any] = RunMeta(),
        origin: RunOrigin | None = None,
    ) -> RunSession:
        """A new run in ``run_dir`` with ``meta`` (its kind, status, times, versions and provenance
        set here; the provenance recorded from ``origin``); refuses a directory that holds a run
        already. Hashes the env's files (cached): call it off the event loop."""
        RunWriter.check_new(run_dir)
        provenance = cls._provenance(origin)
        now = time.time()
        writer = RunWriter.create(
            run_dir,
            replace(
                meta if isinstance(meta, RunMeta) else RunMeta.from_json(meta),
                kind=kind,
                status="running",
                created_at=now,
                started_at=now,
                active_seconds=0.0,
                versions={"benchmax": __version__, "python": sys.version.split()[0]},
                provenance=provenance,
            ),
        )
        return cls(writer, resumed=False)

    @classmethod
    def resume(cls, run_dir: str | Path, *, origin: RunOrigin | None = None) -> RunSession:
        """The run kept in ``run_dir``, continued; with ``origin``, a change of env code or data
        since it started is logged and kept in ``provenance_resumes``."""
        session = cls(RunWriter.resume(run_dir), resumed=True)
        if origin is not None:
            try:
                session._note_resumed(cls._provenance(origin))
            except BaseException:
                session.close()
                raise
        return session

    @staticmethod
    def _provenance(origin: RunOrigin | None) -> Provenance:
        """The one place a run's provenance is made, for eval, rescore and training alike."""
        return run_provenance(origin or RunOrigin())

    def _note_resumed(self, provenance: Provenance) -> None:
        meta = self.writer.run_meta()
        stored = meta.provenance
        if stored is None:
            self.writer.update_meta(provenance=replace(provenance, recorded_on_resume=True))
            return
        self.dataset_trusted = same_examples(stored, provenance)
        changes = [change.text for change in provenance_changes(stored, provenance) if change.warning]
        if not changes:
            return
        # one warning naming every change: a face that folds repeats of one message (the CLI's log
        # handler) would otherwise show the first change only (in a mixture, the first env's)
        logger.warning("resuming %s: %s since the run started", self.run_dir, "; ".join(changes))
        resume = ProvenanceResume(at=time.time(), changes=tuple(changes), provenance=provenance)
        self.writer.update_meta(provenance_resumes=(*meta.provenance_resumes, resume))

    @staticmethod
    def check_new(run_dir: str | Path) -> None:
        """Refuse, before anything is loaded, a directory that already holds a run."""
        RunWriter.check_new(run_dir)

    # What the run holds.

    def meta(self) -> dict[str, Any]:
        """The meta table as a plain dict (for users' code; benchmax reads :meth:`run_meta`)."""
        return self.writer.meta()

    def run_meta(self) -> RunMeta:
        return self.writer.run_meta()

    def set_meta(self, **values: Any) -> None:
        """Store meta keys as given (users' own keys too; benchmax writes :meth:`update_meta`)."""
        self.writer.set_meta(**values)

    def update_meta(self, **changes: Any) -> None:
        """Record :class:`~benchmax.store.RunMeta` fields by name (a misspelt name raises ``TypeError``)."""
        self.writer.update_meta(**changes)

    def add_examples(self, split: str, examples: Iterable[Example[Any]], *, start: int = 0) -> None:
        self.writer.add_examples(split, examples, start=start)

    def record_sampler_state(self, step: int, state: Mapping[str, Any]) -> None:
        """Keep a training curriculum's state after step ``step`` was generated."""
        self.writer.write_sampler_state(step, state)

    def sampler_state(self, *, before: int) -> tuple[int, dict[str, Any]] | None:
        """The curriculum state kept for the latest step before ``before`` (a resume continues from it)."""
        return self.writer.sampler_state(before=before)

    def pending_examples(
        self, split: str, examples: Iterable[Example[Any]], *, sync: bool
    ) -> Iterator[tuple[int, list[tuple[GroupKey, Example[Any]]]]]:
        """The examples in chunks, each as its size and the groups of it not stored yet, streamed
        (never held whole).

        With ``sync`` each chunk is first stored (a new run) or checked against the
        stored dataset (a resumed run: a changed dataset raises :class:`StoreError`
        at its first difference). A repeated example gets the next occurrence
        number, as :func:`group_keys` gives it; only repeats are counted, so the
        memory this takes does not grow with the dataset. Keys are made for pending
        groups only: a resumed run of a million examples is mostly stored ones.
        """
        if isinstance(examples, ExampleStream) and self.resumed and self.dataset_trusted:
            positions = self.writer.positions()
            if positions is not None:
                yield from self._trusted_pending(split, examples, positions)
                return
        repeats: dict[str, int] = {}
        read_example: Callable[[int], Example[Any]] | None = None
        if isinstance(examples, ExampleStream) and self.resumed and self.writer.has_examples():
            ids = examples.known_ids()
            if ids is not None:
                # The dataset knows its ids: they alone are checked against the stored ones, and only
                # the examples left to run are read (a stored id was checked when its example first ran).
                read_example = examples.example_at
                examples = (Example(example_id, None) for example_id in ids)
        positioned = self.writer.synced(split, examples, resume=self.resumed) if sync else self.writer.located(examples)
        for chunk in positioned:
            done = self.writer.completed_in(chunk[0][0], chunk[-1][0])
            pending = []
            for index, example, first in chunk:
                occurrence = 0
                if first != index:
                    occurrence = repeats[example.id] = repeats.get(example.id, 0) + 1
                if group_id(split, example.id, occurrence=occurrence) not in done:
                    if read_example is not None:
                        example = read_example(index)
                    pending.append((GroupKey.of(split, example, index, occurrence=occurrence), example))
            yield len(chunk), pending

    def _trusted_pending(
        self, split: str, examples: ExampleStream, positions: int
    ) -> Iterator[tuple[int, list[tuple[GroupKey, Example[Any]]]]]:
        """:meth:`pending_examples` of a resumed run whose dataset is the one it started with: the
        stored ids name every position, so only the examples left to run are read (and each is
        checked against its stored id as it is read). A finished run reads no example."""
        for first in range(0, positions, _CHUNK):
            last = min(first + _CHUNK, positions) - 1
            ids = self.writer.ids_at(first, last)
            done = self.writer.completed_in(first, last)
            pending = []
            for index, example_id in enumerate(ids, first):
                if group_id(split, example_id) in done:
                    continue
                example = examples.example_at(index)
                if example.id != example_id:
                    raise StoreError(
                        f"the dataset changed since this run started: first difference at index {index} (example "
                        f"{example.id[:16]}… is not the stored one there, though the dataset's digest is the "
                        "one it started with); resume needs the same data"
                    )
                pending.append((GroupKey.of(split, example, index), example))
            yield len(ids), pending

    # Writes.

    async def awrite_group(
        self,
        key: GroupKey,
        result: GroupResult,
        *,
        batch: int,
        started_at: float,
        ended_at: float | None = None,
        sample_indices: Sequence[int] | None = None,
    ) -> None:
        """:meth:`write_group` from async code: waits (without blocking the loop) while the store lags."""
        await self.writer.awrite_group(_group_write(key, result, batch, started_at, ended_at, sample_indices))

    def write_group(
        self,
        key: GroupKey,
        result: GroupResult,
        *,
        batch: int,
        started_at: float,
        ended_at: float | None = None,
        sample_indices: Sequence[int] | None = None,
    ) -> None:
        """Queue one settled group for the store (it lands whole, in one transaction; blocks while the
        store's queue is full, so a lagging writer slows the producers instead of growing memory)."""
        self.writer.write_group(_group_write(key, result, batch, started_at, ended_at, sample_indices))

    def adopt(self, source: str | Path) -> None:
        """Copy a stored run's examples and transcripts into this new one (rescoring keeps them)."""
        self.writer.adopt(source)

    def write_scores(self, groups: Sequence[ScoredGroup]) -> None:
        """Queue the new scores of groups of an adopted run."""
        self.writer.write_scores(groups)

    def record_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Keep a training step's metrics (per-component rewards, dead-group share, IS
        ratio, KL, timings...) in the run, where the inspector reads them while training runs."""
        self.writer.write_step(step, metrics)

    def close_batch(self, batch: int) -> None:
        """Apply the batch's zero-fill: every component a rollout of the batch emitted, on all of them."""
        self.writer.fill_batch(batch)

    def close_batches(self) -> None:
        """Zero-fill every batch written to since its last fill (on resume, only those)."""
        for batch in self.writer.unfilled_batches():
            self.writer.fill_batch(batch)

    def record_outage(self, outage: Outage) -> None:
        """Keep an endpoint outage (start, end, requests held) in the run's metadata."""
        endpoint = redact_url(outage.endpoint)  # stored: never a credential parameter of the URL
        entry = {
            "endpoint": endpoint,
            "started_at": outage.started_at,
            "ended_at": outage.ended_at,
            "cause": outage.cause,
            "held": outage.held,
            "failed": outage.failed,
            "rerouted": outage.rerouted,
            "error": outage.error,
        }
        self._outages = [
            existing
            for existing in self._outages
            if not (existing["endpoint"] == endpoint and existing["started_at"] == outage.started_at)
        ]
        self._outages.append(entry)
        with suppress(StoreError):
            self.writer.update_meta(outages=tuple(self._outages))

    # Lifecycle.

    @contextmanager
    def lifecycle(self) -> Iterator[RunSession]:
        """Mark the run running; on the way out mark it completed, interrupted or failed, and close it."""
        self.writer.update_meta(status="running", error=None)
        try:
            yield self
        except BaseException as exc:
            status: RunStatus = (
                "interrupted" if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt) else "failed"
            )
            self._finish(status, error=f"{type(exc).__name__}: {exc}" if status == "failed" else None)
            raise
        else:
            self._finish("completed")
        finally:
            self.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RunSession]:
        """:meth:`lifecycle` for async code."""
        with self.lifecycle():
            yield self

    def _finish(self, status: RunStatus, *, error: str | None = None) -> None:
        try:
            self.writer.flush()
        except StoreError as exc:
            # the store failed under a run that went on: the run failed, and says so
            if status == "completed":
                status, error = "failed", f"{type(exc).__name__}: {exc}"
        try:
            self.writer.set_closing_meta(
                status=status,
                ended_at=time.time(),
                active_seconds=self._previous_active + time.time() - self._began,
                error=error,
            )
        except sqlite3.Error:
            logger.exception("the run's status (%s) could not be stored in %s", status, self.run_dir)

    def abandon(self, exc: BaseException | None = None) -> None:
        """End a run that never ran or broke outside :meth:`lifecycle`: ``failed`` (or
        ``interrupted``), then closed. Does nothing to a run already ended."""
        if self._closed:
            return
        interrupted = exc is None or isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
        self._finish(
            "interrupted" if interrupted else "failed", error=None if interrupted else f"{type(exc).__name__}: {exc}"
        )
        self.close()

    def discard(self) -> None:
        """Remove a new run that never started (its dataset failed the first pass): a data
        error leaves no run behind, so the inspector does not list a run that never was."""
        if self.resumed:
            raise StoreError("a resumed run is never discarded; abandon it instead")
        self.close()
        for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"):
            with suppress(FileNotFoundError):
                (self.run_dir / name).unlink()
        with suppress(OSError):
            self.run_dir.rmdir()  # only when nothing else (a server log) was written there

    def close(self) -> None:
        self._closed = True
        self.writer.close()


def _group_write(
    key: GroupKey,
    result: GroupResult,
    batch: int,
    started_at: float,
    ended_at: float | None,
    sample_indices: Sequence[int] | None,
) -> GroupWrite:
    return GroupWrite(
        group_id=key.id,
        example_id=key.example_id,
        example_idx=key.example_index,
        batch=batch,
        step=key.step,
        outcomes=result.outcomes,
        sample_indices=tuple(sample_indices if sample_indices is not None else range(len(result.outcomes))),
        logs=result.logs,
        started_at=started_at,
        ended_at=ended_at if ended_at is not None else time.time(),
        costs=_costs(result) if result.calls is not None else (),
    )


def _costs(result: GroupResult) -> tuple[RolloutCost, ...]:
    """Each rollout's own model calls (those of the group's hooks are in the run's totals only)."""
    calls: CallLog = result.calls or CallLog()
    costs = []
    for outcome in result.outcomes:
        figures = calls.of(outcome.rollout_id)
        costs.append(
            RolloutCost(
                usd=total_usd(figures),
                requests=sum(item.requests for item in figures),
                cache_hits=sum(item.cache_hits for item in figures),
                calls=tuple(item.to_dict() for item in figures),
            )
        )
    return tuple(costs)
