"""The ``benchmax`` command itself: its version, and help that names what to type."""

from __future__ import annotations

from runkit import cli_env, run_cli

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
    usages = (
        ("validate", "[OPTIONS] [ENV]..."), ("rescore", "[OPTIONS] RUN_DIR [ENV]"), ("eval", "[OPTIONS] [ENV]...")
    )  # fmt: skip
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


COMMANDS = ("", "eval", "validate", "train", "export", "rescore", "diff", "inspect", "serve", "init", "list")


def _help(command: str, *flag: str, columns: int = 80) -> str:
    result = run_cli(*([command] if command else []), *(flag or ("-h",)), env=cli_env(COLUMNS=str(columns)))
    assert result.returncode == 0, result.stdout
    return result.stdout


def test_every_help_page_takes_h_fits_80_columns_whole_and_names_no_python_type():
    for command in COMMANDS:
        text = _help(command)
        assert text == _help(command, "--help"), command
        assert "Usage:" in text, command
        too_wide = [line for line in text.splitlines() if len(line) > 80]
        assert not too_wide, (command, too_wide)
        assert "…" not in text, (command, "something was cut")
        for python_type in ("<list[", "<str>", "<int", "<float", "<path>", "<bool>", "int range", "float range"):
            assert python_type not in text, (command, python_type)


def test_eval_and_train_help_show_their_options_in_groups():
    eval_help = _help("eval")
    sections = {
        "Env:": ("--env-arg", "--data-dir", "--auth"),
        "Run:": ("--split", "--concurrency", "--run-dir", "--resume", "--max-failure-rate"),
        "Model endpoint:": ("--base-url URL", "--model NAME", "--model-check / --no-model-check", "--api-key-env VAR"),
        "Sampling:": ("--temperature", "--max-tokens", "--top-p", "--seed", "--extra-body"),
        "Limits:": ("--request-timeout", "--max-outage", "--max-requests", "--max-content-chars"),
        "Cache and cost:": ("--cache DIR|off", "--cache-judge", "--prices FILE", "--max-cost USD"),
        "Executor:": ("--executor local|ray", "--ray-address", "--workers"),
    }
    _assert_sections(eval_help, sections)
    train_help = _help("train")
    _assert_sections(
        train_help,
        {
            "Env:": ("--env-arg", "--data-dir", "--auth", "--max-examples"),
            "GRPO:": ("--group-size", "--learning-rate", "--beta"),
            "Sampling:": ("--temperature", "--top-p", "--max-tokens"),
            "vLLM:": ("--vllm ", "--vllm-url"),
        },
    )


def _assert_sections(text: str, sections: dict[str, tuple[str, ...]]) -> None:
    """Each heading is there, and each of its options is listed under it, before the next heading."""
    lines = text.splitlines()
    headings = [index for index, line in enumerate(lines) if line and not line[0].isspace() and line.endswith(":")]
    for heading, options in sections.items():
        start = lines.index(heading)
        end = next((index for index in headings if index > start), len(lines))
        block = "\n".join(lines[start:end])
        for option in options:
            assert f"  {option}" in block, (heading, option, block)


def test_the_command_list_gives_each_command_s_summary_whole():
    text = _help("", columns=200)
    export = next(line for line in text.splitlines() if line.strip().startswith("export "))
    assert export.split("export", 1)[1].strip() == (
        "Write every rollout of a run to one file, for analysis outside benchmax."
    )


def test_export_takes_o_for_its_output_file(tmp_path):
    result = run_cli("export", tmp_path / "no-run", "-o", tmp_path / "out.jsonl")

    assert result.returncode == 2
    assert "No such option" not in result.stdout
    assert "no benchmax run" in result.stdout or "does not exist" in result.stdout, result.stdout
