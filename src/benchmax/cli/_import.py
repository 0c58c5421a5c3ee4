"""``benchmax import``: recorded traffic (chat logs, OTLP GenAI traces) into a run, for rescoring.

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

Nothing is written unless the whole file reads (``--skip-bad`` leaves malformed
lines out and says how many).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.markup import escape

from benchmax.cli._options import DataDir, EnvArgs, parse_env_args
from benchmax.cli._output import error_line, plural
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
from benchmax.errors import BenchmaxError
from benchmax.loading import EnvSpec, collect_examples, data_directories
from benchmax.runner import GroupKey, RunConfig, RunMeta, RunOrigin, RunSession
from benchmax.traces import ImportedConversation, TraceFormatError, TraceRead, read_traces

console = Console(highlight=False)
_SHOWN_SKIPS = 5
_FINISH = {"length": TerminationReason.OUTPUT_EXCEEDED, "max_tokens": TerminationReason.OUTPUT_EXCEEDED}


def import_command(
    file: Annotated[
        Path, typer.Argument(metavar="FILE", help="Chat-log JSONL (one conversation a line) or an OTLP/JSON export.")
    ],
    env: Annotated[str, typer.Option("--env", metavar="ENV", help="The env whose reward will score the rollouts.")],
    output: Annotated[Path, typer.Option("-o", "--output", metavar="RUN", help="The new run's directory.")],
    env_arg: EnvArgs = [],  # noqa: B006
    data_dir: DataDir = None,
    split: Annotated[str, typer.Option(help="The dataset split examples are looked up in (train or eval).")] = "eval",
    skip_bad: Annotated[
        bool,
        typer.Option("--skip-bad", help="Leave malformed lines out (and count them) instead of refusing the file."),
    ] = False,
) -> None:
    """Read recorded conversations into a run, so `benchmax rescore RUN` scores them with ENV's reward."""
    if split not in ("train", "eval"):
        raise typer.BadParameter(f"{split!r}: use train or eval", param_hint="--split")
    if not file.is_file():
        console.print(error_line(f"{file}: no such file"))
        raise typer.Exit(2)
    spec = EnvSpec(env, parse_env_args(env_arg))
    try:
        RunSession.check_new(output)
        read = read_traces(file, skip_bad=skip_bad)
        if not read.conversations:
            raise TraceFormatError(f"{file}: no conversation to import")
        count = asyncio.run(import_run(read, spec, output, data_dir=data_dir, split=split, source=file))  # type: ignore[arg-type]
    except BenchmaxError as exc:
        console.print(error_line(str(exc)))
        raise typer.Exit(1) from None
    console.print(f"imported {plural(count, 'conversation')} from {escape(str(file))} into {escape(str(output))}")
    if read.skipped:
        console.print(f"skipped {plural(len(read.skipped), 'malformed line')}:")
        for item in read.skipped[:_SHOWN_SKIPS]:
            console.print(f"  {escape(item.reason)}")
        if len(read.skipped) > _SHOWN_SKIPS:
            console.print(f"  ... and {len(read.skipped) - _SHOWN_SKIPS} more")
    console.print(f"score them: benchmax rescore {escape(str(output))}")


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
    config = RunConfig(
        env=spec.spec, env_kwargs=dict(spec.kwargs), data_dir=data_dir, split=split, run_dir=run_dir, model=None
    )
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
