"""Importing recorded traffic (chat logs, OTLP GenAI traces) into a run, for rescoring.

Each recorded conversation becomes one rollout (a group of one) of a normal run,
written through the runner's :class:`~benchmax.runner.RunSession`, unscored:
``benchmax rescore RUN`` then scores it with the env's reward, as it would an
eval's transcripts. Its example is found by this rule:

1. a conversation that names one (``example_id``, at the top level or in its
   ``metadata``; ``benchmax.example_id`` on a span) gets that example of the env's
   dataset, and an id the dataset lacks is an error of that line;
2. else the dataset example whose ``prompt_messages`` are the conversation's
   prompt (its messages before the first assistant turn), when one is;
3. else an example made from the conversation: its prompt as ``prompt_messages``
   and its ``metadata`` as the other payload fields (so a reward that reads
   ``answer`` finds it when the recording kept one).

The command that reads the file and reports is ``benchmax import`` (``benchmax.cli``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from benchmax.engine import GroupResult
from benchmax.envs import (
    DatasetError,
    DatasetSplit,
    Example,
    RolloutOutcome,
    TerminationReason,
    TurnRecord,
    Usage,
    canonical_example_id,
)
from benchmax.loading import EnvSpec, collect_examples, data_directories
from benchmax.runner._config import RunConfig
from benchmax.runner._provenance import RunOrigin
from benchmax.runner._session import GroupKey, RunSession
from benchmax.store import RunMeta
from benchmax.traces import ImportedConversation, TraceFormatError, TraceRead

_FINISH = {"length": TerminationReason.OUTPUT_EXCEEDED, "max_tokens": TerminationReason.OUTPUT_EXCEEDED}


async def import_run(
    read: TraceRead,
    spec: EnvSpec,
    run_dir: Path,
    *,
    data_dir: Path | None = None,
    split: DatasetSplit = "eval",
    source: Path | None = None,
) -> int:
    """Write ``read``'s conversations as the unscored rollouts of a new run in ``run_dir``; returns
    how many. The examples are resolved (see the module) before the run directory is made."""
    env = await asyncio.to_thread(spec.load)
    try:
        try:
            dataset = await collect_examples(env, split, data_directories(spec, data_dir))
        except DatasetError:
            dataset = []  # no data here: conversations that name an example are refused below
        examples = resolve_examples(read.conversations, dataset, split)
    finally:
        await env.aclose()
    models = sorted({item.model for item in read.conversations if item.model})
    config = RunConfig.of(spec, data_dir=data_dir, split=split, run_dir=run_dir, model=None)
    meta = RunMeta(config=config.to_meta(), pass_threshold=config.pass_threshold, model=", ".join(models) or None)
    origin = RunOrigin(env=type(env), spec=spec, model=meta.model)
    session = await asyncio.to_thread(RunSession.create, run_dir, kind="eval", meta=meta, origin=origin)
    async with session.running():
        session.set_meta(imported_from=str(source) if source is not None else None)
        unique: dict[str, tuple[int, Example[Any]]] = {}
        for example in examples:
            unique.setdefault(example.id, (len(unique), example))
        session.add_examples(split, [example for _, example in unique.values()])
        seen: dict[str, int] = {}
        for conversation, example in zip(read.conversations, examples, strict=True):
            occurrence = seen.get(example.id, 0)
            seen[example.id] = occurrence + 1
            key = GroupKey.of(split, example, unique[example.id][0], occurrence=occurrence)
            outcome = _outcome(conversation, key.rollout_id(0), example.id, split)
            await session.awrite_group(
                key, GroupResult((outcome,), ()), batch=0, started_at=outcome.started_at, ended_at=outcome.ended_at
            )
        session.update_meta(dataset_size=len(unique))
        await asyncio.to_thread(session.close_batches)
    return len(examples)


def resolve_examples(
    conversations: Sequence[ImportedConversation], dataset: Sequence[Example[Any]], split: str
) -> list[Example[Any]]:
    """Each conversation's example, by the module's rule; an ``example_id`` the dataset lacks raises."""
    by_id = {example.id: example for example in dataset}
    by_prompt: dict[bytes, Example[Any]] = {}
    for example in dataset:
        payload = example.payload if isinstance(example.payload, Mapping) else {}
        by_prompt.setdefault(_prompt_key(payload.get("prompt_messages") or ()), example)
    found = []
    for conversation in conversations:
        if conversation.example_id is not None:
            example = by_id.get(conversation.example_id)
            if example is None:
                raise TraceFormatError(
                    f"{conversation.source}: example_id {conversation.example_id!r} is not in the env's "
                    f"{split} split ({len(by_id)} examples)"
                )
        else:
            example = by_prompt.get(_prompt_key(conversation.prompt)) or _made_example(conversation)
        found.append(example)
    return found


def _prompt_key(messages: Sequence[Mapping[str, Any]]) -> bytes:
    return orjson.dumps(
        [{"role": message.get("role"), "content": message.get("content")} for message in messages],
        option=orjson.OPT_SORT_KEYS,
    )


def _made_example(conversation: ImportedConversation) -> Example[Any]:
    payload = {**conversation.metadata, "prompt_messages": [dict(message) for message in conversation.prompt]}
    return Example(canonical_example_id(payload), payload)


def _outcome(
    conversation: ImportedConversation, rollout_id: str, example_id: str, split: DatasetSplit
) -> RolloutOutcome:
    started = conversation.started_at or 0.0
    ended = conversation.ended_at or started
    turns = []
    assistant_turns = [index for index, message in enumerate(conversation.messages) if message["role"] == "assistant"]
    for number, index in enumerate(assistant_turns):
        last = number == len(assistant_turns) - 1
        message = conversation.messages[index]
        turns.append(
            TurnRecord(
                index=number,
                started_at=started,
                model_seconds=0.0,
                finish_reason=(conversation.finish_reason or "stop") if last else "tool_calls",
                usage=Usage(conversation.input_tokens, conversation.output_tokens) if last else Usage(),
                tool_calls=len(message.get("tool_calls") or ()),
            )
        )
    reason = _FINISH.get(conversation.finish_reason or "", TerminationReason.FINISHED)
    return RolloutOutcome(
        rewards={},
        termination_reason=reason,
        rollout_id=rollout_id,
        example_id=example_id,
        split=split,
        messages=[dict(message) for message in conversation.messages],
        turns=tuple(turns),
        started_at=started,
        ended_at=ended,
    )
