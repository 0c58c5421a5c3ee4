"""The runner: schedules groups, writes every settled group, applies the batch zero-fill.

It drives the engine for ``BaseEnv`` envs and ``Environment.run_group`` for
custom harnesses, and owns the env's lifetime when it built the env itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from benchmax import __version__
from benchmax.engine.engine import GroupResult
from benchmax.envs.dataset import to_example
from benchmax.envs.environment import Environment
from benchmax.envs.errors import DatasetError
from benchmax.envs.rollout import RolloutRequest, SamplingParams, StaticBearerAuth
from benchmax.envs.types import Example
from benchmax.runner.config import EMBEDDED, RunConfig
from benchmax.runner.env_spec import EnvSpec
from benchmax.runner.executor import GroupExecutor, LocalExecutor
from benchmax.store.reader import Run
from benchmax.store.stats import RunStats
from benchmax.store.writer import GroupWrite, RunWriter, StoreError

logger = logging.getLogger("benchmax.runner")


class RunObserver(Protocol):
    """Receives progress; the CLI's live display is one."""

    def on_start(self, *, total_rollouts: int, done_rollouts: int, run_dir: Path) -> None: ...

    def on_group(self, result: GroupResult) -> None: ...


@dataclass(frozen=True, slots=True)
class RunResult:
    run_dir: Path
    stats: RunStats
    new_rollouts: int
    client_stats: dict[str, Any]


def group_id(split: str, example: Example, step: int | None = None) -> str:
    prefix = f"step{step}/" if step is not None else ""
    return f"{prefix}{split}/{example.id}"


def rollout_id(group: str, sample_index: int) -> str:
    return f"{group}#{sample_index}"


def sampling_for(sampling: SamplingParams, sample_index: int) -> SamplingParams:
    """Siblings get ``seed + sample_index`` so a seeded group is reproducible yet diverse."""
    if sampling.seed is None:
        return sampling
    return replace(sampling, seed=sampling.seed + sample_index)


async def arun(
    config: RunConfig,
    *,
    env: Environment | None = None,
    observer: RunObserver | None = None,
    resume: bool = False,
) -> RunResult:
    """Run (or resume) an eval; returns once every group is stored and filled."""
    config = config.with_run_dir()
    assert config.run_dir is not None
    run_dir = config.run_dir
    if resume:
        writer = RunWriter.resume(run_dir)
    else:
        writer = RunWriter.create(
            run_dir,
            {
                "config": config.to_meta(),
                "status": "running",
                "created_at": time.time(),
                "started_at": time.time(),
                "active_seconds": 0.0,
                "versions": {"benchmax": __version__, "python": sys.version.split()[0]},
                "pass_threshold": config.pass_threshold,
                "kind": "eval",
            },
        )
    session_start = time.time()
    previous_active = float(writer.meta().get("active_seconds") or 0.0)
    owned = env is None
    executor: GroupExecutor | None = None
    new_rollouts = 0
    client_stats: dict[str, Any] = {}
    try:
        if env is None:
            spec = EnvSpec(config.env, config.env_kwargs)
            env = spec.load()
            default_dir = spec.directory
        else:
            default_dir = None
        writer.set_meta(
            env_class=f"{type(env).__module__}.{type(env).__qualname__}", env_file=_source_file(env), status="running"
        )
        executor = make_executor(config, env)
        await executor.start()
        data_dir = Path(config.data_dir or default_dir or Path.cwd())
        examples = await load_examples(env, config, data_dir)
        _check_examples(writer, examples, config.split, resume)
        async with _model_endpoint(config, run_dir) as (base_url, model):
            writer.set_meta(model=model, base_url=base_url if config.base_url != EMBEDDED else EMBEDDED)
            auth = StaticBearerAuth.from_env(config.api_key_env) if config.api_key_env else None
            new_rollouts = await _schedule(
                config, executor, examples, writer, observer, base_url, model, auth
            )
        for batch in writer.batches():
            await asyncio.to_thread(writer.fill_batch, batch)
        writer.set_meta(
            status="completed",
            ended_at=time.time(),
            active_seconds=previous_active + time.time() - session_start,
        )
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt) else "failed"
        with contextlib.suppress(StoreError):
            writer.flush()
            writer.set_meta(
                status=status,
                ended_at=time.time(),
                active_seconds=previous_active + time.time() - session_start,
                error=f"{type(exc).__name__}: {exc}" if status == "failed" else None,
            )
        raise
    finally:
        if executor is not None:
            client_stats = executor.stats()
            await executor.aclose()
        if owned and env is not None:
            try:
                await env.aclose()
            except Exception:
                logger.exception("%s.aclose() failed", type(env).__name__)
        writer.close()
    with Run(run_dir) as run:
        stats = run.stats()
    return RunResult(run_dir, stats, new_rollouts, client_stats)


def evaluate(env: str | Environment, **options: Any) -> RunResult:
    """Run an eval from Python: ``benchmax.evaluate("examples/math", base_url=..., model=...)``.

    ``env`` is a spec string or an env instance (then the caller owns its
    ``aclose``); ``options`` are :class:`RunConfig` fields plus ``resume`` and
    ``observer``.
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


async def load_examples(env: Environment, config: RunConfig, data_dir: Path) -> list[Example]:
    dataset = await env.create_dataset(config.split, data_dir, max_examples=config.max_examples)
    examples = []
    seen: set[str] = set()
    for index, item in enumerate(dataset):
        example = to_example(item, where=f"{type(env).__name__} {config.split}[{index}]")
        if example.id in seen:
            raise DatasetError(f"{config.split}[{index}]: duplicate example id {example.id!r}")
        seen.add(example.id)
        examples.append(example)
        if config.max_examples is not None and len(examples) >= config.max_examples:
            break
    return examples


def _check_examples(writer: RunWriter, examples: Sequence[Example], split: str, resume: bool) -> None:
    stored = writer.example_ids()
    current = [example.id for example in examples]
    if not stored:
        writer.add_examples(split, examples)
        return
    if resume and stored != current:
        first = next(
            (i for i, (a, b) in enumerate(zip(stored, current, strict=False)) if a != b),
            min(len(stored), len(current)),
        )
        raise StoreError(
            f"the dataset changed since this run started: {len(stored)} stored examples vs "
            f"{len(current)} now, first difference at index {first}; resume needs the same data"
        )


@contextlib.asynccontextmanager
async def _model_endpoint(config: RunConfig, run_dir: Path) -> AsyncIterator[tuple[str, str]]:
    if config.base_url != EMBEDDED:
        yield config.base_url, config.model
        return
    from benchmax.local import EmbeddedModel

    async with EmbeddedModel(log_dir=run_dir) as server:
        yield server.base_url, server.model


async def _schedule(
    config: RunConfig,
    executor: GroupExecutor,
    examples: Sequence[Example],
    writer: RunWriter,
    observer: RunObserver | None,
    base_url: str,
    model: str,
    auth: StaticBearerAuth | None,
) -> int:
    size = config.group_size
    per_batch = config.groups_per_batch()
    done = writer.completed_groups()
    pending = [
        (index, example)
        for index, example in enumerate(examples)
        if group_id(config.split, example) not in done
    ]
    if observer is not None:
        observer.on_start(
            total_rollouts=len(examples) * size,
            done_rollouts=(len(examples) - len(pending)) * size,
            run_dir=writer.run_dir,
        )
    left_in_batch: Counter[int] = Counter(_batch(index, per_batch) for index, _ in pending)
    slots = asyncio.Semaphore(max(1, config.concurrency // size))
    written = 0

    async def run_group(index: int, example: Example) -> None:
        nonlocal written
        try:
            gid = group_id(config.split, example)
            requests = [
                RolloutRequest(
                    rollout_id=rollout_id(gid, sample),
                    example=example,
                    model=model,
                    base_url=base_url,
                    model_auth=auth,
                    split=config.split,
                    sampling=sampling_for(config.sampling, sample),
                )
                for sample in range(size)
            ]
            started = time.time()
            result = await executor.run_group(requests)
            batch = _batch(index, per_batch)
            writer.write_group(
                GroupWrite(
                    group_id=gid,
                    example_id=example.id,
                    example_idx=index,
                    batch=batch,
                    outcomes=result.outcomes,
                    sample_indices=tuple(range(size)),
                    logs=result.logs,
                    started_at=started,
                    ended_at=time.time(),
                )
            )
            written += size
            if observer is not None:
                observer.on_group(result)
            left_in_batch[batch] -= 1
            if per_batch is not None and left_in_batch[batch] == 0:
                await asyncio.to_thread(writer.fill_batch, batch)
        finally:
            slots.release()

    tasks: list[asyncio.Task[None]] = []
    stop = _install_sigterm()
    try:
        for index, example in pending:
            await slots.acquire()
            for finished in [task for task in tasks if task.done()]:
                tasks.remove(finished)
                finished.result()
            tasks.append(asyncio.create_task(run_group(index, example)))
        await asyncio.gather(*tasks)
    finally:
        stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return written


def make_executor(config: RunConfig, env: Environment) -> GroupExecutor:
    if config.executor == "local":
        return LocalExecutor(env, config.engine)
    if config.executor == "ray":
        from benchmax.runner.ray_executor import RayExecutor

        return RayExecutor(config)
    raise ValueError(f"unknown executor {config.executor!r}; use 'local' or 'ray'")


def _source_file(env: Environment) -> str | None:
    """The local file the env class was loaded from, kept in the run so it says what code ran."""
    try:
        source = inspect.getsourcefile(type(env))
    except TypeError:
        return None
    return str(Path(source).resolve()) if source else None


def _batch(index: int, per_batch: int | None) -> int:
    return 0 if per_batch is None else index // per_batch


def _install_sigterm() -> Any:
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
