"""The sandbox against real subprocesses: limits hold, the network is closed, files stay inside."""

import asyncio
import os
import time

import pytest

from benchmax.sandbox import SandboxError, network_isolation, run_python, run_python_async


def test_a_program_reads_stdin_and_writes_stdout():
    result = run_python("import sys\nprint(sys.stdin.read().upper(), end='')", stdin="hello")
    assert (result.stdout, result.stderr, result.exit_code) == ("HELLO", "", 0)
    assert result.ok and not result.timed_out


def test_an_infinite_loop_is_killed_at_the_deadline():
    started = time.monotonic()
    result = run_python("while True:\n    pass", timeout=1.0)
    assert result.timed_out and not result.ok
    assert result.exit_code == -9
    assert time.monotonic() - started < 5


def test_a_sleeping_program_is_killed_at_the_wall_clock_deadline():
    result = run_python("import time\nprint('start', flush=True)\ntime.sleep(60)", timeout=0.5)
    assert result.timed_out
    assert result.stdout == "start\n"


def test_a_memory_bomb_hits_the_memory_limit():
    result = run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))", memory_mb=128)
    assert result.exit_code == 1 and result.memory_error
    assert "MemoryError" in result.stderr


def test_network_access_is_refused():
    code = "import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=2)"
    result = run_python(code)
    assert result.exit_code == 1
    assert "PermissionError: sandbox: network access is not allowed" in result.stderr
    raw = "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_STREAM)"
    assert "network access is not allowed" in run_python(raw).stderr


def test_with_a_network_namespace_only_a_loopback_device_exists():
    if network_isolation() != "namespace":
        pytest.skip("this kernel refuses network namespaces here; the audit hook is the only layer")
    result = run_python("import socket\nprint([name for _, name in socket.if_nameindex()])")
    assert result.stdout.strip() == "['lo']"
    assert result.network_isolation == "namespace"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("open('../escape.txt', 'w').write('x')", "writing"),
        ("open('/etc/hostname').read()", "reading '/etc/hostname'"),
        ("import os\nos.mkdir('/tmp/benchmax-sandbox-escape')", "writing"),
        ("import os\nos.chdir('..')", "changing directory"),
        ("import os\nos.symlink('/etc', 'etc')", "creating symlinks"),
        ("import os\nos.listdir('/root')", "reading '/root'"),
        ("import os\nos.remove('/tmp/nothing')", "writing"),
    ],
)
def test_file_access_outside_the_temp_dir_is_refused(code, message):
    result = run_python(code)
    assert result.exit_code == 1
    assert f"PermissionError: sandbox: {message}" in result.stderr
    assert not os.path.exists("/tmp/benchmax-sandbox-escape")


def test_files_inside_the_temp_dir_work_and_helpers_import():
    code = (
        "import os, shutil, helper\n"
        "os.makedirs('out/deep')\n"
        "open('out/deep/x.txt', 'w').write(helper.TEXT)\n"
        "print(open('data/in.txt').read(), open('out/deep/x.txt').read(), sorted(os.listdir('.')))\n"
        "shutil.rmtree('out')\n"
    )
    files = {"helper.py": "TEXT = 'hi'\n", "data/in.txt": b"bytes"}
    result = run_python(code, files=files)
    assert result.stdout == "bytes hi ['data', 'helper.py', 'main.py', 'out']\n", result.stderr


def test_the_temp_dir_is_removed_afterwards():
    result = run_python("import os\nprint(os.getcwd())")
    assert result.stdout.strip().startswith("/")
    assert not os.path.exists(result.stdout.strip())


def test_subprocesses_and_signals_are_refused():
    assert "subprocess.Popen is not allowed" in run_python("import subprocess\nsubprocess.run(['true'])").stderr
    assert "os.system is not allowed" in run_python("import os\nos.system('true')").stderr
    assert "os.kill is not allowed" in run_python("import os\nos.kill(1, 9)").stderr


def test_the_environment_is_scrubbed(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = run_python("import os\nprint(sorted(os.environ))")
    assert "OPENAI_API_KEY" not in result.stdout
    assert "HOME" in result.stdout


def test_output_is_bounded_and_a_flood_is_stopped():
    result = run_python("while True:\n    print('x' * 1000)", max_output_bytes=10_000, timeout=10)
    assert result.output_truncated and not result.timed_out and not result.ok
    assert len(result.stdout) < 10_100
    assert result.stdout.endswith("[output truncated]")


def test_large_stdin_is_fed_without_deadlock():
    data = "y" * 3_000_000
    result = run_python("import sys\nprint(len(sys.stdin.read()))", stdin=data)
    assert result.stdout == "3000000\n"


def test_errors_show_the_programs_traceback_and_exit_status():
    result = run_python("def f():\n    return 1 / 0\nf()")
    assert result.exit_code == 1
    assert 'main.py", line 2, in f' in result.stderr and "ZeroDivisionError" in result.stderr
    assert run_python("raise SystemExit(3)").exit_code == 3
    assert "SyntaxError" in run_python("def (:").stderr


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="relative path"):
        run_python("", files={"/etc/passwd": "x"})
    with pytest.raises(ValueError, match="reserved"):
        run_python("", files={"main.py": "x"})
    with pytest.raises(ValueError, match="timeout must be positive"):
        run_python("", timeout=0)
    with pytest.raises(ValueError, match="memory_mb"):
        run_python("", memory_mb=1)


def test_a_missing_interpreter_is_a_sandbox_error(tmp_path):
    with pytest.raises(SandboxError, match="could not start"):
        run_python("print(1)", python=str(tmp_path / "python"))


async def test_async_runs_proceed_concurrently_without_blocking_the_loop(loop_ticks):
    async with loop_ticks(0.01) as ticks:
        started = time.monotonic()
        results = await asyncio.gather(*(run_python_async("import time\ntime.sleep(0.5)") for _ in range(2)))
        elapsed = time.monotonic() - started
    assert all(result.ok for result in results)
    assert elapsed < 1.5
    assert ticks.count > 20
