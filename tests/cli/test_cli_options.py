"""Option groups: declared once as frozen dataclasses, spread into a command's options, rebuilt for it."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from benchmax.cli import app
from benchmax.cli._help import Command
from benchmax.cli._options import EnvOptions, with_option_groups


@dataclass(frozen=True, slots=True)
class _Knobs:
    size: Annotated[int, typer.Option(min=1, help="How many.")] = 3
    label: Annotated[str | None, typer.Option(help="A name.")] = None


def test_a_command_receives_its_groups_built_from_what_was_typed():
    seen: list[tuple[str, EnvOptions]] = []

    def command(env: Annotated[str, typer.Argument()], env_options: EnvOptions = EnvOptions()) -> None:
        seen.append((env, env_options))

    runner = typer.Typer()
    runner.command(cls=Command)(with_option_groups(command))
    result = CliRunner().invoke(runner, ["e.py", "--env-arg", "k=1", "--env-arg", "j=x", "--data-dir", "d"])

    assert result.exit_code == 0, result.output
    ((env, options),) = seen
    assert env == "e.py"
    assert options.env_arg == ["k=1", "j=x"] and str(options.data_dir) == "d" and options.auth == []
    assert options.kwargs() == {"k": 1, "j": "x"}


def test_two_groups_declaring_one_option_are_refused_when_the_command_is_made():
    def command(env_options: EnvOptions = EnvOptions(), again: EnvOptions = EnvOptions()) -> None:
        del env_options, again

    with pytest.raises(TypeError, match="declared by more than one group"):
        with_option_groups(command)


def test_eval_takes_its_options_as_groups_not_as_loose_parameters():
    from benchmax.cli._eval import eval_command

    declared = inspect.signature(inspect.unwrap(eval_command)).parameters
    spread = inspect.signature(eval_command).parameters

    assert len(declared) == 10  # ENV and nine option groups (the mixture's and telemetry's since #33, #34)
    assert len(spread) == 44 and "max_requests" in spread and "concurrency" in spread  # every option kept
    assert "env_response_timeout" in spread
    assert CliRunner().invoke(app, ["eval", "-h"]).exit_code == 0


def test_a_group_outside_the_declared_ones_is_not_spread():
    def command(knobs: _Knobs = _Knobs()) -> None:
        del knobs

    assert list(inspect.signature(with_option_groups(command)).parameters) == ["knobs"]
