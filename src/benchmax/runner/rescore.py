"""Rescoring: the env's current reward code over a stored run's transcripts, into a new run."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from benchmax import __version__
from benchmax.engine.engine import Engine, StoredRollout
from benchmax.envs.base_env import BaseEnv
from benchmax.envs.rollout import RolloutRequest, SamplingParams, TurnRecord, Usage
from benchmax.envs.termination import TerminationReason
from benchmax.envs.types import Example
from benchmax.runner.config import RunConfig
from benchmax.runner.env_spec import EnvSpec, EnvSpecError
from benchmax.store.reader import RolloutRecord, Run
from benchmax.store.writer import GroupWrite, RunWriter


async def arescore(source: Path, *, env_spec: str | None = None, run_dir: Path | None = None) -> Path:
    """Write a new run next to ``source`` with every stored group scored again.

    Operational failures stay failures (there is no transcript to score);
    rollout ids, groups and batches are kept so ``benchmax diff`` lines up.
    """
    with Run(source) as old:
        meta = old.meta
        config = RunConfig.from_meta(meta["config"])
        spec = EnvSpec(env_spec or config.env, config.env_kwargs)
        target = run_dir or source.with_name(f"{source.name}-rescored-{time.strftime('%Y%m%d-%H%M%S')}")
        env = spec.load()
        if not isinstance(env, BaseEnv):
            raise EnvSpecError(f"{spec.spec}: rescoring needs a BaseEnv (its compute_reward hooks)")
        writer = RunWriter.create(
            target,
            {
                **{key: value for key, value in meta.items() if key not in ("status", "error")},
                "config": replace(config, env=spec.spec, run_dir=target).to_meta(),
                "kind": "rescore",
                "rescored_from": str(source),
                "status": "running",
                "started_at": time.time(),
                "versions": {**meta.get("versions", {}), "benchmax": __version__},
            },
        )
        engine = Engine(env, config.engine)
        began = time.time()
        try:
            examples = {example.id: example for example in old.examples()}
            writer.add_examples(config.split, old.examples())
            by_group: dict[str, list[RolloutRecord]] = defaultdict(list)
            for record in old.rollouts():
                by_group[record.group_id].append(record)
            groups = {group.group_id: group for group in old.groups()}
            for group_id, records in by_group.items():
                records.sort(key=lambda record: record.sample_index)
                example = examples.get(records[0].example_id) or Example(
                    records[0].example_id, {"prompt_messages": records[0].messages[:1]}
                )
                requests = [_request(record, example, meta) for record in records]
                started = time.time()
                result = await engine.rescore_group(requests, [_stored(record) for record in records])
                group = groups[group_id]
                writer.write_group(
                    GroupWrite(
                        group_id=group_id,
                        example_id=example.id,
                        example_idx=group.example_idx,
                        batch=group.batch,
                        step=group.step,
                        outcomes=result.outcomes,
                        sample_indices=tuple(record.sample_index for record in records),
                        logs=result.logs,
                        started_at=started,
                        ended_at=time.time(),
                    )
                )
            for batch in writer.batches():
                writer.fill_batch(batch)
            writer.set_meta(status="completed", ended_at=time.time(), active_seconds=time.time() - began)
        finally:
            await engine.aclose()
            await env.aclose()
            writer.close()
    return target


def _request(record: RolloutRecord, example: Example, meta: dict) -> RolloutRequest:
    sampling = SamplingParams.from_dict(record.sampling)
    return RolloutRequest(
        rollout_id=record.rollout_id,
        example=example,
        model=str(meta.get("model") or "stored"),
        base_url="stored://transcript",
        split=record.split,  # type: ignore[arg-type]
        sampling=sampling,
    )


def _stored(record: RolloutRecord) -> StoredRollout:
    turns = tuple(
        TurnRecord(**{**turn, "usage": Usage(**turn.get("usage", {}))}) for turn in record.turns
    )
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
