"""Rescoring: the env's current reward code over a stored run's transcripts, into a new run."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmax.engine import Engine, StoredRollout
from benchmax.envs import (
    BaseEnv,
    EnvSpec,
    EnvSpecError,
    Example,
    RolloutRequest,
    SamplingParams,
    TerminationReason,
    TurnRecord,
)
from benchmax.runner._config import RunConfig
from benchmax.runner._session import GroupKey, RunSession
from benchmax.store import RolloutRecord, Run


async def arescore(source: Path, *, env_spec: str | None = None, run_dir: Path | None = None) -> Path:
    """Write a new run next to ``source`` with every stored group scored again.

    Operational failures stay failures (there is no transcript to score);
    rollout ids, groups and batches are kept so ``benchmax diff`` lines up.
    """
    with Run(source) as old:
        meta = old.meta
        config = RunConfig.from_meta(meta["config"])
        spec = EnvSpec(env_spec or config.env, config.env_kwargs)
        env = spec.load()
        if not isinstance(env, BaseEnv):
            raise EnvSpecError(f"{spec.spec}: rescoring needs a BaseEnv (its compute_reward hooks)")
        target = run_dir or source.with_name(f"{source.name}-rescored-{time.strftime('%Y%m%d-%H%M%S')}")
        engine = Engine(env, config.engine)
        try:
            session = RunSession.create(
                target,
                kind="rescore",
                meta={
                    **{
                        key: value
                        for key, value in meta.items()
                        if key not in ("status", "error", "kind", "created_at", "started_at", "ended_at", "outages")
                    },
                    "config": replace(config, env=spec.spec, run_dir=target).to_meta(),
                    "rescored_from": str(source),
                    "source_created_at": meta.get("created_at"),
                },
            )
            async with session.running():
                await _rescore_groups(old, session, engine, meta, config.split)
                session.close_batches()
        finally:
            await engine.aclose()
            await env.aclose()
    return target


async def _rescore_groups(old: Run, session: RunSession, engine: Engine, meta: dict[str, Any], split: str) -> None:
    examples = {example.id: example for example in old.examples()}
    session.add_examples(split, old.examples())
    by_group: dict[str, list[RolloutRecord]] = defaultdict(list)
    for record in old.rollouts():
        by_group[record.group_id].append(record)
    for group in old.groups():
        records = sorted(by_group.get(group.group_id, ()), key=lambda record: record.sample_index)
        if not records:
            continue
        example = examples.get(group.example_id) or Example(
            group.example_id, {"prompt_messages": records[0].messages[:1]}
        )
        requests = [_request(record, example, meta) for record in records]
        started = time.time()
        result = await engine.rescore_group(requests, [_stored(record) for record in records])
        session.write_group(
            GroupKey(group.group_id, group.example_id, group.example_idx, group.step),
            result,
            batch=group.batch,
            started_at=started,
            sample_indices=[record.sample_index for record in records],
        )


def _request(record: RolloutRecord, example: Example[Any], meta: dict[str, Any]) -> RolloutRequest[Any]:
    return RolloutRequest(
        rollout_id=record.rollout_id,
        example=example,
        model=str(meta.get("model") or "stored"),
        base_url="stored://transcript",
        split=record.split,  # type: ignore[arg-type]
        sampling=SamplingParams.from_dict(record.sampling),
    )


def _stored(record: RolloutRecord) -> StoredRollout:
    turns = tuple(TurnRecord.from_dict(turn) for turn in record.turns)
    reason, error = record.termination_reason, record.error
    if reason in (TerminationReason.REWARD_ERROR, TerminationReason.GROUP_REWARD_ERROR):
        reason, error = _loop_reason(record), None
    return StoredRollout(record.messages, reason, error, turns)


def _loop_reason(record: RolloutRecord) -> str:
    """How the model loop ended, for a rollout whose stored reason is its scoring failure."""
    if record.turns and record.turns[-1].get("finish_reason") == "length":
        return TerminationReason.OUTPUT_EXCEEDED
    last = record.messages[-1] if record.messages else {}
    if last.get("role") == "assistant" and not last.get("tool_calls"):
        return TerminationReason.FINISHED
    return TerminationReason.MAX_TURNS_EXCEEDED
