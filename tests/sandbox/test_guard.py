"""The opt-in guard fallback: Python programs under rlimits and an audit hook, nothing else."""

from __future__ import annotations

import os

import pytest

from benchmax.sandbox import GuardProvider, SandboxError, SandboxSpec, run_python_async
from benchmax.sandbox._guard import network_isolation


async def guarded(code: str, **options):
    return await run_python_async(code, provider=GuardProvider(), **options)


async def test_a_program_runs_and_reports_the_guard():
    result = await guarded("print(input()[::-1])", stdin="abc\n")
    assert (result.stdout, result.exit_code, result.isolation) == ("cba\n", 0, "guard")


async def test_limits_hold():
    assert (await guarded("while True:\n    pass", timeout=1.0)).timed_out
    memory = await guarded("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))", memory_mb=128)
    assert memory.memory_error


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("open('../escape.txt', 'w').write('x')", "writing"),
        ("open('/etc/hostname').read()", "reading '/etc/hostname'"),
        ("import os\nos.listdir('/root')", "reading '/root'"),
        ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen is not allowed"),
        ("import os\nos.kill(1, 9)", "os.kill is not allowed"),
        ("import socket\nsocket.create_connection(('127.0.0.1', 80), timeout=2)", "network access is not allowed"),
    ],
)
async def test_the_audit_hook_refuses_files_processes_and_sockets_through_pythons_apis(code, message):
    result = await guarded(code)
    assert result.exit_code == 1 and f"PermissionError: sandbox: {message}" in result.stderr


async def test_with_a_network_namespace_only_a_loopback_device_exists():
    if network_isolation() != "namespace":
        pytest.skip("this kernel refuses network namespaces here; the audit hook is the only layer")
    result = await guarded("import socket\nprint([name for _, name in socket.if_nameindex()])")
    assert result.stdout.strip() == "['lo']"


async def test_it_runs_python_only_and_keeps_paths_inside_its_workspace():
    async with GuardProvider().sandbox() as sandbox:
        with pytest.raises(SandboxError, match="only Python programs"):
            await sandbox.exec("ls")
        with pytest.raises(PermissionError):
            await sandbox.write_file("/etc/x", "y")
        with pytest.raises(PermissionError):
            await sandbox.read_file("../../etc/passwd")
        await sandbox.write_file("kept.txt", "kept")
        root = sandbox.root
        result = await run_python_async("print(open('kept.txt').read())", sandbox=sandbox)
        assert result.stdout == "kept\n"
    assert not root.exists() and not os.path.exists(root)


async def test_it_refuses_what_it_cannot_honour():
    with pytest.raises(SandboxError, match="no image, rootfs, mounts, network or extra writable dirs"):
        await GuardProvider().start(SandboxSpec(network=True))
