"""The ``benchmax`` command itself: its version, and help that names what to type."""

from __future__ import annotations

from runkit import run_cli

from benchmax import __version__


def test_version_prints_the_installed_version():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"benchmax {__version__}"


def test_every_command_names_its_arguments_in_capitals_with_help_for_every_option():
    for command in ("eval", "validate", "train", "export", "rescore", "diff", "inspect", "init"):
        result = run_cli(command, "--help")
        assert result.returncode == 0, result.stdout
        usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
        assert "env" not in usage.split("[OPTIONS]", 1)[1], f"arguments are named in capitals: {usage}"
    sampling = run_cli("eval", "--help").stdout
    for flag in ("--temperature", "--max-tokens", "--top-p", "--max-failure-rate", "--max-outage"):
        line = next(line for line in sampling.splitlines() if flag in line)
        assert len(line.split(flag, 1)[1].strip().split()) > 2, f"{flag} has no help text: {line}"
