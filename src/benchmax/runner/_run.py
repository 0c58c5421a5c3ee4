"""An eval run: load the env and its examples, check the model endpoint, then run and store every group.

Everything that can fail before a rollout is spent is checked first, in order:
the env loads, its examples and tools are valid, the model endpoint answers
(the embedded model passes its self-test). Only then is the run directory
created, so a typo leaves nothing behind. Groups are scheduled while their
siblings fit in ``concurrency``, each settled group is written whole, batches
are zero-filled as they close, and the run's status is set on every way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from benchmax.auth import ModelAuth, StaticBearerAuth, bound_model_auth, redact_url
from benchmax.client import CallFigures, ClientPool, EndpointDown, GateEvent, Outage, PriceTable
from benchmax.engine import GroupResult
from benchmax.envs import (
    BaseEnv,
    DatasetError,
    EnvDefinitionError,
    Environment,
    Example,
    RolloutRequest,
    SamplingParams,
    TerminationReason,
)
from benchmax.errors import BenchmaxError
from benchmax.loading import EnvSpec, ExampleStream, data_directories, open_examples
from benchmax.mix import EnvMix
from benchmax.runner._config import EMBEDDED, RunConfig
from benchmax.runner._endpoint import Endpoint, EndpointWatch, OutageSource, model_endpoint
from benchmax.runner._executor import GroupExecutor, LocalExecutor, SlotClaim
from benchmax.runner._plan import _batch, _pending, _Plan, _plan
from benchmax.runner._provenance import RunOrigin
from benchmax.runner._replay import replay_parts
from benchmax.runner._session import GroupKey, RunSession
from benchmax.runner._spend import RunSpend
from benchmax.runner._validate import code_at
from benchmax.runner._verdict import RunVerdict, judge_run, record_verdict
from benchmax.store import Run, RunMeta, RunStats, StoreError
from benchmax.telemetry import start_telemetry, stop_telemetry

logger = logging.getLogger("benchmax.runner")


class RunObserver(Protocol):
    """Receives progress; the CLI's live display is one."""

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None: ...

    def on_group(self, result: GroupResult, *, env: str | None = None) -> None:
        """A group is stored; ``env`` names its env in a mixture (``None`` for a run of one env)."""

    def on_outage(self, event: GateEvent, outage: Outage, waiting: int) -> None: ...


class RunStopped(BenchmaxError):
    """The run stopped before its end for a reason outside it (an endpoint down past its budget,
    ``--max-cost`` spent); what is stored is whole, and ``--resume`` continues it.

    ``hint`` says what to do before resuming; ``resume_options`` are options the
    resume command needs (a higher ``--max-cost``).
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str = "Resume it once the model server is back:",
        resume_options: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.hint = hint
        self.resume_options = resume_options


@dataclass(frozen=True, slots=True)
class _Stop:
    reason: str
    hint: str = "Resume it once the model server is back:"
    resume_options: tuple[str, ...] = ()
    drain: bool = False
    """Start no new group but let those in flight finish and be stored (their calls are paid for):
    ``--max-cost``. Otherwise (an outage) the groups in flight are abandoned at once."""


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    stats: RunStats
    new_rollouts: int
    client_stats: dict[str, Any]
    verdict: RunVerdict
    outages: tuple[Outage, ...] = ()
    cost: Mapping[str, Any] | None = None
    """The run's model calls and what they cost, as stored (all sessions): see ``RunSpend``."""


def sampling_for(sampling: SamplingParams, sample_index: int) -> SamplingParams:
    """Siblings get ``seed + sample_index`` so a seeded group is reproducible yet diverse."""
    if sampling.seed is None:
        return sampling
    return replace(sampling, seed=sampling.seed + sample_index)


async def arun(
    config: RunConfig,
    *,
    env: Environment[Any, Any] | None = None,
    observer: RunObserver | None = None,
    resume: bool = False,
    clients: ClientPool | None = None,
    on_ready: Callable[[], None] | None = None,
) -> RunResult:
    """Run (or resume) an eval; returns once every group is stored and filled.

    ``clients`` is the model client pool to run with (local executor only): a
    trainer passes one where its policy is registered under ``config.base_url``,
    so a checkpoint is evaluated through the same engine and store as any model.
    ``on_ready`` is called once the env is loaded and every example of the split
    read and checked, before the model endpoint is started or checked: a command
    line announces the run there, so an env or a dataset that fails prints only
    its error.
    """
    config = config.with_run_dir()
    assert config.run_dir is not None
    run_dir = config.run_dir
    if not resume:
        RunSession.check_new(run_dir)
    owned = env is None
    spec = EnvSpec(config.env, config.env_kwargs) if config.mix is None else None
    prices = PriceTable.load(config.prices)  # a broken price file fails before anything is loaded
    executor: GroupExecutor | None = None
    telemetry = start_telemetry(config.engine.telemetry)
    try:
        if env is None:
            env = spec.load() if spec is not None else await EnvMix.load(config.mix)  # type: ignore[arg-type]
        examples = await _read_examples(env, config, spec if owned else None, run_dir if resume else None)
        executor = make_executor(config, env, prices, clients=clients)
        try:  # the env's definition and tool schemas, checked before the run is announced or made
            await executor.start()
        except EnvDefinitionError as exc:
            raise _located(exc, env) from exc
        if on_ready is not None:
            on_ready()
        auth: ModelAuth | None = (
            StaticBearerAuth.from_env(config.api_key_env) if config.api_key_env else config.credentials
        )
        clients = _clients(executor, config)
        async with model_endpoint(
            None if config.base_url == EMBEDDED else config.base_urls,
            config.model,
            clients,
            log_dir=run_dir,
            auth=auth,
            check_model=config.check_model,
        ) as endpoint:
            if config.max_cost is not None and prices.price(endpoint.model) is None:
                raise BenchmaxError(
                    f"--max-cost needs the price of the model {endpoint.model!r}, which the price table "
                    f"({', '.join(prices.sources)}) does not list; add it to a price file and give it with "
                    "--prices FILE (see docs/cost-and-cache.md)"
                )
            origin = RunOrigin(
                env=env,
                spec=spec if owned else None,
                dataset=examples.dataset,
                model=endpoint.model,
                endpoint=EMBEDDED if endpoint.embedded else _stored_url(endpoint),
                sampling=config.sampling,
            )
            session = await asyncio.to_thread(_open_session, config, run_dir, origin, resume)
            try:  # one pass over the dataset stores (or checks) it and finds what is left to run
                plan = await asyncio.to_thread(_plan, session, config, examples)
            except BaseException as exc:
                session.abandon(exc) if resume else session.discard()
                raise
            async with session.running():
                session.update_meta(
                    env_class=f"{type(env).__module__}.{type(env).__qualname__}",
                    env_file=_source_file(env),
                    model=endpoint.model,
                    base_url=EMBEDDED if endpoint.embedded else _stored_url(endpoint),
                    replay_only=replay_parts(env) or None,
                )
                spend = RunSpend(session, _calls_of(executor), prices, config.max_cost)
                try:
                    new_rollouts = await _schedule(
                        config, executor, examples, plan, session, observer, endpoint, auth, clients, spend
                    )
                    await asyncio.to_thread(session.close_batches)
                finally:
                    with contextlib.suppress(StoreError):  # on every way out: a stopped run keeps what it spent
                        spend.store()
        client_stats = executor.stats()
        outages = tuple(_outage_source(executor, clients).outages())
    finally:
        await _release(executor, clients, env if owned else None)
        await asyncio.to_thread(stop_telemetry, telemetry)  # queued spans go out, bounded by the export timeout
    with Run(run_dir) as run:
        stats = run.stats()
        cost = run.run_meta.cost
    verdict = judge_run(stats, config.max_failure_rate)
    await asyncio.to_thread(record_verdict, run_dir, verdict)
    return RunResult(run_dir, stats, new_rollouts, client_stats, verdict, outages, cost)


async def _release(
    executor: GroupExecutor | None, clients: ClientPool | None, env: Environment[Any, Any] | None
) -> None:
    """What the run held, closed: its executor, the driver's own client pool, and ``env`` when the run loaded it."""
    if executor is not None:
        await executor.aclose()
    if clients is not None and clients is not getattr(executor, "clients", None):
        await clients.aclose()  # the driver's own pool, for the preflight under Ray
    if env is not None:
        try:
            await env.aclose()
        except Exception:
            logger.exception("%s.aclose() failed", type(env).__name__)


async def _read_examples(
    env: Environment[Any, Any], config: RunConfig, spec: EnvSpec | None, resumed: Path | None
) -> ExampleStream:
    """Every example of the run's split, read and checked before the model starts or the run dir
    exists: a bad row (eval.jsonl:4) leaves nothing behind, not a run dir holding a model log.
    ``spec``: the env's, when the run loaded it (its data directories); else one directory.
    ``resumed``: the run dir of a resumed run; one whose dataset is stored checks it against the
    store instead (reading only what it has left to run, when the dataset's digest is the one it
    started with)."""
    if spec is not None:
        places: tuple[Path, ...] = data_directories(spec, config.data_dir)
    else:  # an env given as an instance, or a mixture (each member reads its own data dirs)
        places = (Path(config.data_dir or Path.cwd()),)
    examples = await open_examples(env, config.split, places, max_examples=config.max_examples)
    stored = await asyncio.to_thread(_stored_positions, resumed) if resumed is not None else None
    if not stored and not await asyncio.to_thread(_count, examples):
        raise DatasetError(
            f"{type(env).__name__}.create_dataset({config.split!r}) returned no examples "
            f"(data dir: {examples.base_dir})"
        )
    return examples


def _open_session(config: RunConfig, run_dir: Path, origin: RunOrigin, resume: bool) -> RunSession:
    """The run's session: the stored one resumed, or a new eval run."""
    if resume:
        return RunSession.resume(run_dir, origin=origin)
    meta = RunMeta(config=config.to_meta(), pass_threshold=config.pass_threshold)
    return RunSession.create(run_dir, kind="eval", meta=meta, origin=origin)


def evaluate(env: str | Environment[Any, Any], **options: Any) -> RunResult:
    """Run an eval from Python: ``benchmax.evaluate("examples/math", base_url=..., model=...)``.

    ``env`` is a spec string or an env instance (then the caller owns its
    ``aclose``); ``options`` are :class:`RunConfig` fields plus ``resume`` and
    ``observer``. ``result.verdict`` says whether the run did its job.
    """
    resume = bool(options.pop("resume", False))
    observer = options.pop("observer", None)
    if isinstance(env, str):
        config = RunConfig(env=env, **options)
        instance = None
    else:
        config = RunConfig(env=f"{type(env).__module__}:{type(env).__qualname__}", **options)
        instance = env
    return asyncio.run(arun(config, env=instance, observer=observer, resume=resume))


def _located(exc: EnvDefinitionError, env: Environment[Any, Any]) -> EnvDefinitionError:
    """The error with the ``FILE:LINE`` of what it is about, as ``benchmax validate`` gives it:
    the env's ``list_tools`` for a tool schema, else its class statement."""
    if not isinstance(env, BaseEnv):
        return exc
    where = code_at(type(env), "list_tools" if ".list_tools()" in str(exc) else None)
    return EnvDefinitionError(f"{where}: {exc}") if where else exc


def _count(examples: Iterable[Example[Any]]) -> int:
    return sum(1 for _ in examples)


def _stored_positions(run_dir: Path) -> int | None:
    """The size of the dataset a run to resume stored whole (``None``: it stopped before that)."""
    try:
        with Run(run_dir) as run:
            return run.run_meta.dataset_size or None
    except (OSError, BenchmaxError):
        return None


def make_executor(
    config: RunConfig,
    env: Environment[Any, Any],
    prices: PriceTable | None = None,
    *,
    clients: ClientPool | None = None,
) -> GroupExecutor:
    if config.executor == "ray":
        if clients is not None:
            raise ValueError("a client pool of your own runs only on the local executor")
        from benchmax.runner._ray import RayExecutor

        return RayExecutor(config, prices=prices, auth=bound_model_auth())
    return LocalExecutor(
        env, config.engine, clients=clients, prices=prices, cache=config.cache, concurrency=config.concurrency
    )


def _calls_of(executor: GroupExecutor) -> Callable[[], tuple[CallFigures, ...]]:
    """This session's model calls so far: the local ledger's, or those the Ray actors last reported."""
    if isinstance(executor, LocalExecutor):
        return executor.ledger.totals
    return lambda: tuple(CallFigures.from_dict(item) for item in executor.stats().get("calls") or ())


def _stored_url(endpoint: Endpoint) -> str | list[str]:
    if len(endpoint.replicas) > 1:
        return [redact_url(url) for url in endpoint.replicas]
    return redact_url(endpoint.base_url)


def _outage_source(executor: GroupExecutor, clients: ClientPool) -> OutageSource:
    """Who sees the endpoint's outages: the pool the rollouts use, or the Ray executor's merged view of its actors'."""
    source = getattr(executor, "outage_source", None)
    return source if source is not None else clients


def _clients(executor: GroupExecutor, config: RunConfig) -> ClientPool:
    """The client pool whose gates guard this run's endpoint (the driver's own, under Ray)."""
    clients = getattr(executor, "clients", None)
    if isinstance(clients, ClientPool):
        return clients
    return config.engine.client_pool()


async def _schedule(
    config: RunConfig,
    executor: GroupExecutor,
    examples: Iterable[Example[Any]],
    plan: _Plan,
    session: RunSession,
    observer: RunObserver | None,
    endpoint: Endpoint,
    auth: ModelAuth | None,
    clients: ClientPool,
    spend: RunSpend,
) -> int:
    size = config.group_size
    per_batch = config.groups_per_batch()
    left_in_batch = plan.left_in_batch
    pending_groups = sum(left_in_batch.values())
    if observer is not None:
        observer.on_start(
            total_rollouts=plan.examples * size,
            done_rollouts=(plan.examples - pending_groups) * size,
            run_dir=session.run_dir,
        )
    if not pending_groups:
        return 0
    slots = executor.slots  # the one limit of --concurrency: claimed here, held by the executor
    written = 0
    stopping: list[_Stop] = []
    main = asyncio.current_task()

    def stop(reason: str) -> None:
        # The endpoint is down past its budget. Nothing its outage held may be stored
        # as a failure: the run stops here, whole groups only, and --resume reruns the rest.
        halt(_Stop(reason))

    def env_stop(reason: str) -> None:
        # The served env went away: the same way out, with the env's server to wait for.
        halt(_Stop(reason, "Resume it once the env server is back:"))

    def halt(why: _Stop) -> None:
        if any(not item.drain for item in stopping) or (why.drain and stopping):
            return  # an abandoning stop is final; a draining one is asked for once
        stopping.append(why)
        if not why.drain and main is not None:
            main.cancel()

    def abandoning() -> _Stop | None:
        return next((item for item in stopping if not item.drain), None)

    def check_budget() -> None:
        # --max-cost spent: no group starts after this; those in flight finish and are stored, so
        # what they spent is not lost (the overshoot is theirs), and --resume runs the rest.
        reason = spend.over_budget()
        if reason is not None and spend.max_cost is not None:
            more = f"{spend.max_cost * 2:g}"
            hint = f"Resume it with a higher --max-cost (the run's total, all sessions), e.g. {more}:"
            halt(_Stop(reason, hint, ("--max-cost", more), drain=True))

    if spend.max_cost is not None:
        check_budget()  # a resumed run may have spent its budget already
        if isinstance(executor, LocalExecutor):
            executor.ledger.subscribe(check_budget)  # every call, as its reply arrives

    watch = EndpointWatch(
        _outage_source(executor, clients),
        endpoint,
        session,
        observer if hasattr(observer, "on_outage") else None,
        stop,
        stats=executor.totals,
        in_flight=lambda: len(tasks) * size,
    )

    async def run_group(key: GroupKey, example: Example[Any], claim: SlotClaim) -> None:
        nonlocal written
        async with claim:
            requests = [
                RolloutRequest(
                    rollout_id=key.rollout_id(sample),
                    example=example,
                    model=endpoint.model,
                    base_url=endpoint.base_url,
                    model_auth=auth,
                    split=config.split,
                    sampling=sampling_for(config.sampling, sample),
                )
                for sample in range(size)
            ]
            started = time.time()
            try:
                result = await executor.run_group(requests)
            except EndpointDown as exc:  # raised by a Ray actor whose requests the outage failed
                watch.stop(str(exc))
                return
            down = _env_down(executor, result)
            if down is not None:  # the env's server went away: nothing it touched is stored as a failure
                env_stop(down)
                return
            if abandoning() is not None:
                return
            batch = _batch(key.example_index, per_batch)
            # waits while the store's writer lags: the slot stays taken, so no new group starts
            await session.awrite_group(key, result, batch=batch, started_at=started)
            written += size
            if spend.max_cost is not None:
                check_budget()  # the Ray actors' calls are known once their group is back
            if spend.due():
                await asyncio.to_thread(spend.store)
            if observer is not None:
                observer.on_group(result, env=example.env)
            left_in_batch[batch] -= 1
            if per_batch is not None and left_in_batch[batch] == 0:
                await asyncio.to_thread(session.close_batch, batch)

    tasks: set[asyncio.Task[None]] = set()
    failures: list[BaseException] = []

    def finished(task: asyncio.Task[None]) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            failures.append(task.exception())  # type: ignore[arg-type]

    stop_sigterm = _install_sigterm()
    watch.__enter__()
    try:
        async for key, example in _pending(session, config.split, examples, plan):
            claim = await slots.claim(size)
            if failures:
                claim.release()
                raise failures[0]
            if stopping:
                claim.release()
                break
            task = asyncio.create_task(run_group(key, example, claim))
            tasks.add(task)
            task.add_done_callback(finished)
        while tasks:
            await asyncio.wait(set(tasks))
        if failures:
            raise failures[0]
        if stopping:  # drained: every group started is stored
            why = stopping[0]
            reason = spend.over_budget() or why.reason  # the figure after the groups in flight finished
            raise RunStopped(
                f"{reason}; the run stopped with every started group finished and stored",
                hint=why.hint,
                resume_options=why.resume_options,
            )
    except asyncio.CancelledError:
        why = abandoning()
        if why is not None:
            if main is not None:
                main.uncancel()
            raise RunStopped(
                f"{why.reason}; the run stopped with every finished group stored",
                hint=why.hint,
                resume_options=why.resume_options,
            ) from None
        raise
    finally:
        watch.__exit__()
        stop_sigterm()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return written


def _env_down(executor: GroupExecutor, result: GroupResult) -> str | None:
    """Why the env can run no more rollouts (a served env whose server went away), else ``None``."""
    env = getattr(executor, "env", None)
    if isinstance(env, Environment) and env.unavailable is not None:
        return env.unavailable
    for outcome in result.outcomes:
        if outcome.termination_reason == TerminationReason.ENV_UNAVAILABLE:
            return outcome.error or "the env's server stopped answering"
    return None


def _source_file(env: Environment[Any, Any]) -> str | None:
    """The local file the env class was loaded from, kept in the run so it says what code ran."""
    import inspect

    try:
        source = inspect.getsourcefile(type(env))
    except TypeError:
        return None
    return str(Path(source).resolve()) if source else None


def _install_sigterm() -> Callable[[], None]:
    """SIGTERM cancels the run like Ctrl-C does, so contexts exit and the store is consistent."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is None:
        return lambda: None
    try:
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
    except (NotImplementedError, RuntimeError):
        return lambda: None
    return lambda: loop.remove_signal_handler(signal.SIGTERM)
