"""Rescoring: the env's current reward code over a stored run's transcripts, into a new run.

The new run adopts the source's transcripts as stored (they do not change) and
only the scores are computed and written. Scoring is spread over worker
processes (each loads the env once and scores chunks of groups read straight
from the source file), so a cheap reward uses the machine's cores, or over a
pool of Ray actors (``executor="ray"``). Either way each group is scored through
the runner's executor interface (``GroupExecutor.rescore_group``), as an eval's
groups run through ``run_group``, and rollouts in flight are counted as an
eval counts them: a judge-based reward (a model call per rollout) keeps at most
``concurrency`` rollouts in flight in all.

A judge's calls go through a :class:`benchmax.client.CallLedger` in each scoring
process: they are counted and priced into the new run's ``cost`` (the source's
is kept as ``source_cost``: the new run made no policy call), and with a response
cache the judge requests the source run (or an earlier rescore) made already are
answered from it, so rescoring after a change to another reward costs nothing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import multiprocessing
import os
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmax.auth import ModelAuth, bind_model_auth
from benchmax.client import CacheSettings, CallFigures, PriceTable, calls_to_meta, merge_figures
from benchmax.engine import EngineConfig, GroupResult, StoredRollout
from benchmax.envs import (
    BaseEnv,
    EnvSpecError,
    Example,
    RolloutRequest,
    SamplingParams,
    TerminationReason,
    TurnRecord,
    is_scorable,
)
from benchmax.loading import EnvSpec
from benchmax.mix import EnvMix, MixSpec
from benchmax.runner._config import DEFAULT_CONCURRENCY, EMBEDDED, RunConfig
from benchmax.runner._executor import GroupExecutor, LocalExecutor
from benchmax.runner._provenance import RunOrigin
from benchmax.runner._replay import refuse_stale_outcomes, replay_parts
from benchmax.runner._session import RunSession
from benchmax.store import (
    Provenance,
    RolloutRecord,
    RolloutScore,
    Run,
    RunMeta,
    ScoredGroup,
    StoredGroup,
    StoreError,
)
from benchmax.telemetry import TelemetrySettings, start_telemetry, stop_telemetry

_CHUNK_GROUPS = 250
_IN_PROCESS_BELOW = 20_000
"""Runs smaller than this (rollouts) are rescored in this process: starting workers costs more."""
_NOT_INHERITED: dict[str, Any] = {
    "status": None,
    "error": None,
    "kind": None,
    "created_at": None,
    "started_at": None,
    "ended_at": None,
    "active_seconds": None,
    "outages": (),
    "cost": None,
    "provenance": None,
    "provenance_resumes": (),
}
"""Source metadata that describes the source's own run, not the rescored one."""


async def arescore(
    source: Path,
    *,
    env_spec: str | None = None,
    run_dir: Path | None = None,
    workers: int | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    cache: CacheSettings | None = None,
    prices: str | None = None,
    auth: Mapping[str, ModelAuth] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    env_specs: Mapping[str, str] | None = None,
    telemetry: TelemetrySettings | None = None,
) -> Path:
    """Write a new run next to ``source`` with every stored group scored again.

    Operational failures stay failures (there is no transcript to score);
    rollout ids, groups and batches are kept so ``benchmax diff`` lines up.
    ``workers`` processes score (default: one per core, up to 8, for big runs;
    this process for small ones); with ``executor="ray"`` a pool of Ray actors scores
    instead (``workers`` actors, or one per CPU of the cluster at ``ray_address``).
    At most ``concurrency`` rollouts are scored at once, in all (a group larger than
    that is scored alone), as ``--concurrency`` counts them for an eval.
    ``cache`` answers the judge's repeated requests; ``prices`` is a price file over
    the shipped table (default: ``$BENCHMAX_PRICES``). ``auth`` is bound for the env's
    ``InjectedAuth`` names in every scoring process (picklable providers, such as
    :class:`~benchmax.auth.EnvironmentKeyAuth`, for worker processes).
    A mixture is rescored by its stored envs; ``env_specs`` (``{name: spec}``) gives some of them
    new code and leaves the others as stored.

    ``telemetry``: each rescored rollout is a trace (its context, its reward, a judge's
    calls), exported by the process that scores it: this one, each worker process (its
    own exporter, flushed as it exits) or each Ray actor; ``None`` leaves it to the
    standard ``OTEL_*`` variables.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1 (--concurrency)")
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be local or ray, got {executor!r}")
    table = PriceTable.load(prices)
    with Run(source) as old:
        meta = old.run_meta
        if meta.config is None:
            raise StoreError(f"{source} holds no eval config (only an eval or rescored run can be rescored)")
        config = RunConfig.from_meta(meta.config)
        rollouts = len(old)
        ranges = old.group_ranges(_CHUNK_GROUPS)
    config = replace(config, engine=replace(config.engine, telemetry=telemetry or TelemetrySettings()))
    mix = _rescored_mix(source, config, env_spec, env_specs or {})
    spec = EnvSpec(env_spec or config.env, config.env_kwargs)
    target = run_dir or source.with_name(f"{source.name}-rescored-{time.strftime('%Y%m%d-%H%M%S')}")
    processes = workers or (1 if rollouts < _IN_PROCESS_BELOW else min(os.cpu_count() or 1, 8))
    if executor == "ray":
        processes = 1  # this process sends groups to the pool; the actors do the scoring
    job = _Job(
        str(source),
        spec.spec,
        dict(spec.kwargs),
        config.engine,
        meta,
        max(1, concurrency // processes),
        table,
        cache,
        dict(auth or {}),
        mix,
    )
    scorer, kept = await _loaded_scorer(job, source)
    origin = RunOrigin(
        env=type(scorer.env) if mix is None else scorer.env,
        spec=spec if mix is None else None,
        inherited=_source_provenance(meta, config),
    )
    new_config = replace(config, env=spec.spec) if mix is None else replace(config, mix=mix)
    traces = start_telemetry(config.engine.telemetry)
    try:
        if processes > 1 or executor == "ray":
            await scorer.aclose()  # each worker (process or Ray actor) loads its own
        if executor == "ray":
            scorer = _Scorer(job)
            ray_config = replace(
                new_config, env_kwargs=dict(new_config.env_kwargs), executor="ray", workers=workers,
                ray_address=ray_address, concurrency=concurrency, cache=cache, prices=prices, run_dir=target,
            )  # fmt: skip
            await scorer.attach(_ray_executor(ray_config, table, job.auth))
        session = await asyncio.to_thread(_new_session, target, source, meta, new_config, origin, kept)
        await _score_into(session, scorer, job, source, ranges, processes, table)
    finally:
        try:
            await scorer.aclose()
        finally:
            await asyncio.to_thread(stop_telemetry, traces)  # queued spans go out, bounded by the export timeout
    return target


async def _loaded_scorer(job: _Job, source: Path) -> tuple[_Scorer, dict[str, list[str]]]:
    """The scorer with its env loaded, and the env's replayed parts: both fail here, before the
    new run exists, when the env cannot rescore ``source``."""
    scorer = _Scorer(job)
    scorer.load()
    assert scorer.env is not None
    kept = replay_parts(scorer.env)
    try:
        refuse_stale_outcomes(kept, source)
    except BaseException:
        await scorer.aclose()
        raise
    return scorer, kept


def _new_session(
    target: Path, source: Path, meta: RunMeta, config: RunConfig, origin: RunOrigin, kept: Mapping[str, list[str]]
) -> RunSession:
    """The rescored run, created: the source's metadata less what described the source's own run;
    ``kept`` names the rewards it keeps as stored (only a replay could recompute them)."""
    return RunSession.create(
        target,
        kind="rescore",
        meta=replace(
            meta,
            **_NOT_INHERITED,
            config=replace(config, run_dir=target).to_meta(),
            rescored_from=str(source),
            replay_only=kept or None,
            source_created_at=meta.created_at,
            source_cost=meta.cost,
        ),
        origin=origin,
    )


async def _score_into(
    session: RunSession,
    scorer: _Scorer,
    job: _Job,
    source: Path,
    ranges: Sequence[tuple[int, int]],
    processes: int,
    table: PriceTable,
) -> None:
    """Every chunk of the source scored (here, or in ``processes`` workers) and written into the new
    run, while the source's transcripts are adopted; the judge's calls priced into its ``cost``."""
    spent: list[tuple[CallFigures, ...]] = []
    async with session.running():
        try:
            # the copy of the transcripts (SQLite's work, seconds at a million rollouts) runs
            # while the first chunks are scored: they read the source, not the copy
            async with _adopting(session, source) as adopted:
                if processes == 1:
                    for chunk in ranges:
                        groups, figures = await scorer.score(chunk)
                        spent.append(figures)
                        await adopted
                        await asyncio.to_thread(session.write_scores, groups)
                else:
                    await _in_workers(job, ranges, processes, session, spent, adopted)
            await asyncio.to_thread(session.close_batches)
        finally:
            figures = merge_figures(*spent)
            session.update_meta(
                cost={**calls_to_meta(figures), "prices": table.describe({item.model for item in figures})}
            )


def _rescored_mix(
    source: Path, config: RunConfig, env_spec: str | None, env_specs: Mapping[str, str]
) -> MixSpec | None:
    """The mixture to rescore with: the stored one, with the envs ``env_specs`` names given new code."""
    if config.mix is None:
        if env_specs:
            raise EnvSpecError(f"{source} ran one env, not a mixture: give its new code as ENV, not --env NAME=SPEC")
        return None
    names = [member.name for member in config.mix.members]
    if env_spec is not None:
        raise EnvSpecError(
            f"{source} is a mixture of {', '.join(names)}: give an env's new code as --env NAME=SPEC, not ENV"
        )
    unknown = sorted(set(env_specs) - set(names))
    if unknown:
        raise EnvSpecError(f"--env {unknown[0]}=...: {source} has no env named {unknown[0]!r} ({', '.join(names)})")
    return replace(
        config.mix,
        members=tuple(replace(member, spec=env_specs.get(member.name, member.spec)) for member in config.mix.members),
    )


def _source_provenance(meta: RunMeta, config: RunConfig) -> Provenance:
    """What made the source's transcripts: its provenance, or (a run from before provenance) its config."""
    if meta.provenance is not None:
        return meta.provenance
    base_url = meta.base_url or config.base_url
    endpoint = tuple(base_url) if isinstance(base_url, list | tuple) else base_url
    return Provenance(model=meta.model or config.model, endpoint=EMBEDDED if endpoint == EMBEDDED else endpoint)


@dataclass(frozen=True, slots=True)
class _Job:
    """What a worker needs to score chunks of the source run (picklable)."""

    source: str
    env: str
    env_kwargs: dict[str, Any]
    engine: EngineConfig
    meta: RunMeta
    concurrency: int
    prices: PriceTable | None = None
    cache: CacheSettings | None = None
    auth: dict[str, ModelAuth] | None = None
    mix: MixSpec | None = None


@asynccontextmanager
async def _adopting(session: RunSession, source: Path) -> AsyncIterator[asyncio.Future[None]]:
    """``session.adopt(source)`` started in a thread; the body awaits it before its first write.

    It is always waited for before leaving (the thread writes through the session's
    connection), and its failure is raised unless the body's own is already on its way."""
    adopted = asyncio.ensure_future(asyncio.to_thread(session.adopt, source))
    try:
        yield adopted
    except BaseException:
        await asyncio.gather(asyncio.shield(adopted), return_exceptions=True)
        raise
    await adopted


_CHUNKS_PER_WORKER = 2
"""Chunks handed to each worker ahead of the writer: enough to keep it busy, few enough that a
lagging writer holds back the workers instead of their results piling up here."""


async def _in_workers(
    job: _Job,
    chunks: Sequence[tuple[int, int]],
    workers: int,
    session: RunSession,
    spent: list[tuple[CallFigures, ...]],
    adopted: Awaitable[None],
) -> None:
    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_worker_start, initargs=(job,)
    ) as pool:
        queued = iter(chunks)
        pending = {
            loop.run_in_executor(pool, _worker_score, chunk)
            for chunk in itertools.islice(queued, workers * _CHUNKS_PER_WORKER)
        }
        try:
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    for chunk in itertools.islice(queued, 1):
                        pending.add(loop.run_in_executor(pool, _worker_score, chunk))
                    groups, figures = future.result()
                    spent.append(figures)
                    await adopted
                    await asyncio.to_thread(session.write_scores, groups)
        finally:
            for future in pending:
                future.cancel()


def _ray_executor(config: RunConfig, prices: PriceTable, auth: Mapping[str, ModelAuth] | None) -> GroupExecutor:
    from benchmax.runner._ray import RayExecutor  # imported only for executor="ray"

    return RayExecutor(config, prices=prices, auth=auth)


class _Scorer:
    """Scores chunks of the source run on a group executor: its own local one (one per process,
    holding the env), or one it is given (the Ray pool, whose actors hold the env)."""

    def __init__(self, job: _Job) -> None:
        self.job = job
        self.env: BaseEnv | EnvMix | None = None
        self.executor: GroupExecutor | None = None
        self.run: Run | None = None

    def load(self) -> None:
        env: BaseEnv | EnvMix
        if self.job.mix is not None:
            members = tuple(member.load() for member in self.job.mix.members)
            for member in members:
                if not isinstance(member.env, BaseEnv):
                    raise EnvSpecError(f"env {member.name!r} ({member.spec}): rescoring needs a BaseEnv")
            env = EnvMix(members, seed=self.job.mix.seed)
        else:
            loaded = EnvSpec(self.job.env, self.job.env_kwargs).load()
            if not isinstance(loaded, BaseEnv):
                raise EnvSpecError(f"{self.job.env}: rescoring needs a BaseEnv (its compute_reward hooks)")
            env = loaded
        self.env = env
        local = LocalExecutor(
            env, self.job.engine, prices=self.job.prices, cache=self.job.cache, concurrency=self.job.concurrency
        )
        self.executor = local
        local.ledger.open()  # a cache directory that cannot be used fails here, before the new run exists
        self.run = Run(self.job.source)

    async def attach(self, executor: GroupExecutor) -> None:
        """Score on ``executor`` (started here) instead of a local one."""
        self.run = Run(self.job.source)
        self.executor = executor
        await executor.start()

    async def score(self, chunk: tuple[int, int]) -> tuple[list[ScoredGroup], tuple[CallFigures, ...]]:
        """The chunk's groups scored, and the model calls (a judge's) their scoring made."""
        assert self.run is not None and self.executor is not None
        executor = self.executor
        calls: list[tuple[CallFigures, ...]] = []

        async def one(stored: StoredGroup) -> ScoredGroup:
            rollouts = stored.rollouts
            example = stored.example or self._unstored(stored.group.example_id, rollouts[0])
            async with executor.slots.hold(len(rollouts)):  # the executor takes nothing more
                started = time.time()
                result: GroupResult = await executor.rescore_group(
                    [_request(record, example, self.job.meta) for record in rollouts],
                    [_stored(record) for record in rollouts],
                )
            if result.calls is not None:
                calls.append(result.calls.figures())
            return ScoredGroup(
                group_id=stored.group.group_id,
                scores=tuple(
                    RolloutScore(
                        seq,
                        outcome.termination_reason,
                        outcome.error,
                        dict(outcome.rewards),
                        outcome.logs,
                        outcome.scoring_error,
                        outcome.trace_id,
                    )
                    for seq, outcome in zip(stored.seqs, result.outcomes, strict=True)
                ),
                logs=result.logs,
                started_at=started,
                ended_at=time.time(),
            )

        groups = self.run.stored_groups(*chunk)
        with bind_model_auth(self.job.auth or {}):  # a worker process has no binding of its own
            scored = list(await asyncio.gather(*(one(group) for group in groups)))
        return scored, merge_figures(*calls)

    def _unstored(self, example_id: str, first: RolloutRecord) -> Example:
        """An example the source did not store, rebuilt from its first rollout's prompt; a mixture's
        cannot be: which env scores it is the store's ``examples.env``, not something its id tells."""
        if self.job.mix is not None:
            raise StoreError(
                f"{self.job.source}: example {example_id!r} of the mixture is not in its examples table, "
                "so which env scores it is unknown"
            )
        return Example(example_id, {"prompt_messages": first.messages[:1]})

    async def aclose(self) -> None:
        """Release the executor (its engine and call ledger), the env and the source file (again: a no-op)."""
        executor, env, run = self.executor, self.env, self.run
        self.executor = self.env = self.run = None
        try:
            if executor is not None:
                await executor.aclose()
            if env is not None:
                await env.aclose()
        finally:
            if run is not None:
                run.close()

    def close_at_exit(self, loop: asyncio.AbstractEventLoop) -> None:
        """:meth:`aclose` for a worker process that is exiting, where no thread can be started."""
        executor, env, run = self.executor, self.env, self.run
        self.executor = self.env = self.run = None
        if isinstance(executor, LocalExecutor):
            loop.run_until_complete(executor.engine.aclose())
            executor.ledger.close()
        if env is not None:
            loop.run_until_complete(env.aclose())
        if run is not None:
            run.close()


_worker: tuple[_Scorer, asyncio.AbstractEventLoop] | None = None


def _worker_start(job: _Job) -> None:
    import atexit

    global _worker
    loop = asyncio.new_event_loop()
    traces = start_telemetry(job.engine.telemetry)  # this process's own exporter (the driver's is not shared)
    atexit.register(stop_telemetry, traces)  # registered first, so it runs last: after the env's spans end
    scorer = _Scorer(job)
    scorer.load()
    _worker = (scorer, loop)
    atexit.register(scorer.close_at_exit, loop)


def _worker_score(chunk: tuple[int, int]) -> tuple[list[ScoredGroup], tuple[CallFigures, ...]]:
    assert _worker is not None
    scorer, loop = _worker
    return loop.run_until_complete(scorer.score(chunk))


def _request(record: RolloutRecord, example: Example, meta: RunMeta) -> RolloutRequest:
    return RolloutRequest(
        rollout_id=record.rollout_id,
        example=example,
        model=meta.model or "stored",
        base_url="stored://transcript",
        split=record.split,
        sampling=SamplingParams.from_dict(record.sampling),
    )


def _stored(record: RolloutRecord) -> StoredRollout:
    reason, error = record.termination_reason, record.error
    if reason in (TerminationReason.REWARD_ERROR, TerminationReason.GROUP_REWARD_ERROR):
        reason, error = _loop_reason(record.messages, record.turns), None
    elif is_scorable(reason) and not record.scored:
        error = None  # a budget stop whose scoring failed: its error is that failure, scored again now
    return StoredRollout(record.messages, reason, error, record.turns)


def _loop_reason(messages: list[dict[str, Any]], turns: tuple[TurnRecord, ...]) -> str:
    """How the model loop ended, for a rollout whose stored reason is its scoring failure."""
    if turns and turns[-1].finish_reason == "length":
        return TerminationReason.OUTPUT_EXCEEDED
    last = messages[-1] if messages else {}
    if last.get("role") == "assistant" and not last.get("tool_calls"):
        return TerminationReason.FINISHED
    return TerminationReason.MAX_TURNS_EXCEEDED
