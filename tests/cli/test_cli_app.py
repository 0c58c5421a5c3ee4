"""The ``benchmax`` command itself: its version, and help that names what to type."""

from __future__ import annotations

from runkit import run_cli

from benchmax import __version__


def test_version_prints_the_installed_version():
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"benchmax {__version__}"


def test_every_command_names_its_arguments_in_capitals_with_help_for_every_option():
    for command in ("eval", "validate", "train", "export", "rescore", "diff", "inspect", "init", "list"):
        result = run_cli(command, "--help")
        assert result.returncode == 0, result.stdout
        usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
        assert "env" not in usage.split("[OPTIONS]", 1)[1], f"arguments are named in capitals: {usage}"
    sampling = run_cli("eval", "--help").stdout
    for flag in ("--temperature", "--max-tokens", "--top-p", "--max-failure-rate", "--max-outage"):
        line = next(line for line in sampling.splitlines() if flag in line)
        assert len(line.split(flag, 1)[1].strip().split()) > 2, f"{flag} has no help text: {line}"


def test_help_writes_arguments_and_flags_as_shells_do():
    usages = (("validate", "[OPTIONS] ENV"), ("rescore", "[OPTIONS] RUN_DIR [ENV]"), ("eval", "[OPTIONS] [ENV]"))
    for command, usage in usages:
        text = run_cli(command, "--help").stdout
        assert next(line for line in text.splitlines() if "Usage:" in line).strip().endswith(usage), command
        assert "{" not in text.split("Usage:", 1)[1].splitlines()[0]
    flags = (("eval", "--no-progress"), ("diff", "--force"), ("inspect", "--no-browser"), ("", "--version"))
    for command, flag in flags:
        text = run_cli(*([command] if command else []), "--help").stdout
        line = next(line for line in text.splitlines() if flag in line)
        assert "<bool>" not in line, line
        assert "<bool>" not in text
    concurrency = next(line for line in run_cli("eval", "--help").stdout.splitlines() if "--concurrency" in line)
    assert "default: 64" in concurrency


def test_an_inspect_of_a_missing_folder_is_an_error_line(tmp_path):
    result = run_cli("inspect", tmp_path / "nowhere", "--no-browser")

    assert result.returncode == 2
    missing = tmp_path / "nowhere"
    assert result.stdout.strip() == f"error: {missing} does not exist: pass a run directory or a folder of runs"


def test_the_scripted_server_runs_as_a_module_without_a_runpy_warning():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "benchmax.testing", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout and "RuntimeWarning" not in result.stderr
