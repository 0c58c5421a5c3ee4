"""``benchmax import``: recorded traffic (chat logs, OTLP GenAI traces) into a run, for rescoring.

The import itself (finding each conversation's example, building its outcome, writing the
run) is the runner's (:func:`benchmax.runner.import_run`); this command reads the file and
says what it did. Nothing is written unless the whole file reads (``--skip-bad`` leaves
malformed lines out and says how many).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from benchmax.cli._options import DataDir, EnvArgs, parse_env_args
from benchmax.cli._output import error_line, plural
from benchmax.envs import DatasetSplit
from benchmax.errors import BenchmaxError
from benchmax.loading import EnvSpec
from benchmax.runner import RunSession, import_run
from benchmax.traces import TraceFormatError, read_traces

console = Console(highlight=False)
_SHOWN_SKIPS = 5


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
    chosen: DatasetSplit = "train" if split == "train" else "eval"
    if not file.is_file():
        console.print(error_line(f"{file}: no such file"))
        raise typer.Exit(2)
    spec = EnvSpec(env, parse_env_args(env_arg))
    try:
        RunSession.check_new(output)
        read = read_traces(file, skip_bad=skip_bad)
        if not read.conversations:
            raise TraceFormatError(f"{file}: no conversation to import")
        count = asyncio.run(import_run(read, spec, output, data_dir=data_dir, split=chosen, source=file))
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
