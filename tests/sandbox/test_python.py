"""run_python: untrusted programs inside the local sandbox, a fresh one per run by default."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchmax.sandbox import (
    BwrapProvider,
    SandboxError,
    SandboxUnavailable,
    default_provider,
    run_python,
    run_python_async,
)


def test_a_program_reads_stdin_and_writes_stdout_inside_the_local_sandbox(bwrap):
    result = run_python("import sys\nprint(sys.stdin.read().upper(), end='')", stdin="hello")
    assert (result.stdout, result.stderr, result.exit_code) == ("HELLO", "", 0)
    assert result.ok and result.isolation == "bwrap"


def test_the_issue_probe_reads_nothing_of_the_host(bwrap, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    secret.chmod(0o644)
    code = f"import ctypes\nlibc = ctypes.CDLL(None)\nfd = libc.open({str(secret).encode()!r}, 0)\nprint(fd)"
    result = run_python(code)
    assert result.stdout == "-1\n" and "top secret" not in result.stdout


def test_an_infinite_loop_is_killed_at_the_deadline(bwrap):
    started = time.monotonic()
    result = run_python("while True:\n    pass", timeout=1.0)
    assert result.timed_out and not result.ok and result.exit_code == -9
    assert time.monotonic() - started < 10


def test_a_sleeping_program_is_killed_at_the_wall_clock_deadline_keeping_its_output(bwrap):
    result = run_python("import time\nprint('start', flush=True)\ntime.sleep(60)", timeout=0.5)
    assert result.timed_out and result.stdout == "start\n"


def test_a_memory_bomb_hits_the_memory_limit(bwrap):
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))", memory_mb=128)
    assert result.exit_code == 1 and result.memory_error


def test_the_network_is_unreachable(bwrap):
    result = run_python("import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=2)")
    assert result.exit_code == 1
    assert "Network is unreachable" in result.stderr or "Connection refused" in result.stderr


def test_writes_outside_the_workspace_and_tmp_fail(bwrap):
    result = run_python("open('/etc/benchmax-escape', 'w')")
    assert result.exit_code == 1 and "Read-only file system" in result.stderr
    assert run_python("open('/tmp/scratch', 'w').write('ok'); print(open('/tmp/scratch').read())").stdout == "ok\n"


def test_helper_files_import_and_each_run_starts_from_a_fresh_sandbox(bwrap):
    code = (
        "import os, helper\n"
        "os.makedirs('out/deep')\n"
        "open('out/deep/x.txt', 'w').write(helper.TEXT)\n"
        "print(open('data/in.txt').read(), open('out/deep/x.txt').read(), sorted(os.listdir('.')))\n"
    )
    result = run_python(code, files={"helper.py": "TEXT = 'hi'\n", "data/in.txt": b"bytes"})
    assert result.stdout == "bytes hi ['data', 'helper.py', 'main.py', 'out']\n", result.stderr
    assert run_python("import os\nprint(sorted(os.listdir('.')))").stdout == "['main.py']\n"


async def test_runs_in_a_given_sandbox_share_its_files(sandbox):
    await run_python_async("open('state.txt', 'w').write('kept')", sandbox=sandbox)
    result = await run_python_async("print(open('state.txt').read())", sandbox=sandbox)
    assert result.stdout == "kept\n"
    assert not sandbox.stopped


def test_the_environment_is_scrubbed(bwrap, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = run_python("import os\nprint(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in result.stdout and "HOME" in result.stdout


def test_output_is_bounded_and_a_flood_is_stopped(bwrap):
    result = run_python("while True:\n    print('x' * 1000)", max_output_bytes=10_000, timeout=10)
    assert result.output_truncated and not result.timed_out and not result.ok
    assert result.stdout.endswith("[output truncated]") and len(result.stdout) < 10_100


def test_large_stdin_is_fed_without_deadlock(bwrap):
    result = run_python("import sys\nprint(len(sys.stdin.read()))", stdin="y" * 3_000_000)
    assert result.stdout == "3000000\n"


def test_errors_show_the_programs_traceback_and_exit_status(bwrap):
    result = run_python("def f():\n    return 1 / 0\nf()")
    assert result.exit_code == 1
    assert 'main.py", line 2, in f' in result.stderr and "ZeroDivisionError" in result.stderr
    assert run_python("raise SystemExit(3)").exit_code == 3
    assert "SyntaxError" in run_python("def (:").stderr


def test_a_program_that_kills_the_sandbox_supervisor_ends_as_killed_not_as_a_sandbox_fault(bwrap):
    supervisor = (
        "import os, time\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit() and b'The supervisor' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
        "        os.kill(int(pid), 9)\n"
        "time.sleep(30)\n"
    )
    result = run_python(supervisor, timeout=20)
    assert (result.exit_code, result.timed_out, result.ok) == (-9, False, False)
    assert "ended the sandbox" in result.stderr


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="relative path"):
        run_python("", files={"/etc/passwd": "x"})
    with pytest.raises(ValueError, match="reserved"):
        run_python("", files={"main.py": "x"})
    with pytest.raises(ValueError, match="timeout must be positive"):
        run_python("", timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        run_python("", memory_mb=1)
    with pytest.raises(TypeError, match="async form"):
        run_python("", sandbox=object())


def test_an_unusable_interpreter_is_a_sandbox_error(bwrap, tmp_path):
    with pytest.raises(SandboxError, match="interpreter"):
        run_python("print(1)", python=str(tmp_path / "python"))


async def test_async_runs_proceed_concurrently_without_blocking_the_loop(bwrap, loop_ticks):
    async with loop_ticks(0.01) as ticks:
        started = time.monotonic()
        results = await asyncio.gather(*(run_python_async("import time\ntime.sleep(1)") for _ in range(2)))
        elapsed = time.monotonic() - started
    assert all(result.ok for result in results)
    assert elapsed < 1.9  # both slept their second at once
    assert ticks.count > 20


async def test_the_sync_form_works_from_inside_a_running_loop(bwrap):
    assert run_python("print(6 * 7)").stdout == "42\n"


def test_a_missing_bubblewrap_fails_with_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHMAX_BWRAP", str(tmp_path / "bwrap"))
    with pytest.raises(SandboxUnavailable, match=r"apt-get install bubblewrap.*benchmax\[sandbox\]"):
        run_python("print(1)", provider=BwrapProvider())


def test_the_provider_is_chosen_by_name_and_an_unknown_name_is_refused(monkeypatch):
    monkeypatch.setenv("BENCHMAX_SANDBOX", "guard")
    assert default_provider().name == "guard"
    assert run_python("print('guarded')").isolation == "guard"
    monkeypatch.setenv("BENCHMAX_SANDBOX", "chroot")
    with pytest.raises(SandboxUnavailable, match="bwrap, docker, guard"):
        default_provider()
