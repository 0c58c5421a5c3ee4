"""The host<->supervisor channel of the local sandbox, attacked the way model code would attack it.

A command inside runs as the same uid as every process of its sandbox. Whatever
of them holds the channel and stays dumpable hands it over through
``/proc/<pid>/fd``: the red-team pass of issue #35 forged a passing result and
ran a command without limits that way, as a normal user (as root the host's
pipes belong to root and the sandbox runs as ``nobody``, so it never showed).
Every probe here writes hostile frames into every descriptor of every other
process it can open, and must change nothing. This file runs as whoever runs
pytest, and :func:`test_the_probes_hold_as_an_unprivileged_user_too` runs it
again as a fresh non-root uid when that is root (CI).

The host side is attacked too: a supervisor that announces a 4 GB frame must
get a clear protocol error, not a host process that buffers what follows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmax.sandbox import SandboxError, SandboxSpec, _bwrap, run_python_async

AS_USER = Path(__file__).with_name("as_user.py")

# Writes `frame` (a Python expression of request_id) into every descriptor of every other
# process it can open for writing, for the ids a host has likely used, then exits with 3.
EVERY_FD = r"""
import json, os, struct, sys
def frame(request_id):
{frame}
opened = []
for pid in sorted((p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()), key=int):
    try:
        fds = os.listdir(f"/proc/{{pid}}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{{pid}}/fd/{{fd}}"
        try:
            handle = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(handle, b"".join(frame(request_id) for request_id in range(1, 33)))
            opened.append(path)
        except OSError:
            pass
        os.close(handle)
print("wrote to", opened)
raise SystemExit(3)
"""

FORGED_REPLY = """
    data = b"ALL 10 TESTS PASSED (forged)\\n"
    body = json.dumps({"id": request_id, "exit_code": 0, "timed_out": False, "truncated": False,
                       "duration": 0.1, "stdout_len": len(data)}).encode()
    return struct.pack("!II", len(body), len(data)) + body + data
"""

FORGED_EXEC = """
    body = json.dumps({"op": "exec", "id": 100000 + request_id, "argv": ["/bin/sh", "-c",
                       "cat /proc/self/limits > /workspace/forged-exec"], "cwd": "/workspace",
                       "env": {"PATH": "/usr/bin:/bin"}, "timeout": 30.0, "max_output": 100,
                       "limits": {}}).encode()
    return struct.pack("!II", len(body), 0) + body
"""


async def test_a_reply_forged_through_proc_fds_does_not_reach_the_host(bwrap, sandbox):
    probe = EVERY_FD.format(frame=FORGED_REPLY)
    fresh = await run_python_async(probe, provider=bwrap)  # the probe, as it ran it
    assert fresh.exit_code == 3 and "forged" not in fresh.stdout, fresh
    assert "wrote to" in fresh.stdout
    kept = await run_python_async(probe, sandbox=sandbox)
    assert kept.exit_code == 3 and "forged" not in kept.stdout, kept
    after = await sandbox.exec(["echo", "still answering"])
    assert after.exit_code == 0 and after.stdout == "still answering\n"


async def test_an_exec_frame_forged_through_proc_fds_runs_nothing(sandbox):
    probe = await run_python_async(EVERY_FD.format(frame=FORGED_EXEC), sandbox=sandbox)
    assert probe.exit_code == 3 and "wrote to" in probe.stdout, probe
    # A forged frame that got through has been read before this request (one channel, in
    # order); its command then has these 5 s to leave its file.
    waited = await sandbox.exec(
        "for i in $(seq 50); do [ -e forged-exec ] && break; sleep 0.1; done; cat forged-exec 2>&1 || true"
    )
    assert "Max processes" not in waited.stdout, f"a forged exec ran, without limits:\n{waited.stdout}"
    with pytest.raises(FileNotFoundError):
        await sandbox.read_file("forged-exec")


async def test_no_process_the_commands_can_see_holds_the_channel(sandbox):
    """Structural, beside the probes: no descriptor a command can list is a socket (the channel is one)."""
    listing = await sandbox.exec(
        [sandbox.python, "-c", "import os\nfor p in os.listdir('/proc'):\n if p.isdigit():\n"
         "  try: print(p, sorted(os.readlink(f'/proc/{p}/fd/{f}') for f in os.listdir(f'/proc/{p}/fd')))\n"
         "  except OSError as e: print(p, 'refused', e.errno)\n"]
    )  # fmt: skip
    assert listing.exit_code == 0, listing
    assert "socket:" not in listing.stdout, listing.stdout
    lines = dict(line.split(" ", 1) for line in listing.stdout.splitlines())
    assert lines["1"].startswith("[") and lines["1"].count("pipe:") == 1, (
        f"bubblewrap's init (dumpable) holds /dev/null, its own stderr and its monitor's eventfd: {lines['1']}"
    )
    assert lines["2"].startswith("refused"), "the supervisor is not dumpable"


async def test_bubblewraps_eventfd_to_its_monitor_is_listed_but_cannot_be_opened(sandbox):
    """Pid 1 also holds an eventfd (how bubblewrap's init reports the exit status to its monitor
    outside): a command sees it in /proc/1/fd but cannot open it to read or write a status."""
    probe = await sandbox.exec(
        [sandbox.python, "-c", "import os\n"
         "fds = [f for f in os.listdir('/proc/1/fd') if os.readlink(f'/proc/1/fd/{f}') == 'anon_inode:[eventfd]']\n"
         "print(len(fds))\n"
         "for f in fds:\n"
         "    for flags in (os.O_RDONLY, os.O_WRONLY, os.O_RDWR):\n"
         "        try:\n"
         "            os.close(os.open(f'/proc/1/fd/{f}', flags))\n"
         "            print('opened', flags)\n"
         "        except OSError as e:\n"
         "            print('refused', e.errno)\n"]
    )  # fmt: skip
    assert probe.exit_code == 0, probe
    count, *answers = probe.stdout.split("\n")[:-1]
    assert count == "1" and answers == ["refused 13"] * 3, probe.stdout


HOSTILE_AGENT = r"""
import json, os, socket, struct, sys
channel = socket.socket(fileno=int(sys.argv[1]))
def read_exact(size):
    data = b""
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data
ready = json.dumps({"op": "ready", "pid": os.getpid(), "python": "3"}).encode()
channel.sendall(struct.pack("!II", len(ready), 0) + ready)
size, data_size = struct.unpack("!II", read_exact(8))
request = json.loads(read_exact(size))
read_exact(data_size)
KIND
try:
    for _ in range(512):
        channel.sendall(b" " * (1 << 20))
except OSError:
    pass
"""
HUGE_JSON = "channel.sendall(struct.pack('!II', 0xFFFFFFFF, 0))"
HUGE_PAYLOAD = (
    "body = json.dumps({'id': request['id'], 'exit_code': 0, 'timed_out': False, 'truncated': False,"
    " 'duration': 0.1, 'stdout_len': 0}).encode()\n"
    "channel.sendall(struct.pack('!II', len(body), 0x20000000) + body)"
)


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [(HUGE_JSON, "a 4294967295-byte reply header"), (HUGE_PAYLOAD, "a 536870912-byte payload")],
    ids=["4 GB header", "512 MB payload"],
)
async def test_a_supervisor_announcing_a_huge_frame_gets_a_protocol_error_not_host_memory(
    bwrap, monkeypatch, kind, expected
):
    monkeypatch.setattr(_bwrap, "_AGENT_SOURCE", HOSTILE_AGENT.replace("KIND", kind))
    sandbox = await bwrap.start(SandboxSpec())
    try:
        before = _rss_mb()
        with pytest.raises(SandboxError, match="broke its protocol") as raised:
            await sandbox.exec(["true"], timeout=5, max_output_bytes=1000)
        grown = _rss_mb() - before
        assert expected in str(raised.value), raised.value
        assert grown < 64, f"the host grew by {grown:.0f} MB reading a hostile frame"
        assert sandbox.stopped
    finally:
        await sandbox.stop()


def test_the_probes_hold_as_an_unprivileged_user_too():
    """CI runs as root, where the host's pipes are root's: this file again, as a fresh non-root uid."""
    if os.geteuid() != 0:
        pytest.skip(
            f"pytest runs as uid {os.geteuid()}, not root: the probes above already ran unprivileged, and "
            "running them as root needs root (CI runs as root and so does both)"
        )
    whoami = subprocess.run(
        [sys.executable, str(AS_USER), "--", sys.executable, "-c", "import os; print(os.geteuid())"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert whoami.returncode == 0 and int(whoami.stdout) not in (0, 65534), whoami
    run = subprocess.run(
        [sys.executable, str(AS_USER), "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         str(Path(__file__)), "-k", "not unprivileged_user_too"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert re.search(r"\b([5-9]|\d\d+) passed", run.stdout) and "skipped" not in run.stdout, run.stdout[-2000:]
