"""The Docker provider against a real Docker-compatible daemon.

The daemon is whatever ``DOCKER_HOST`` (or the default socket) points at; CI
starts one (``.ci/run``: Debian's dockerd with the vfs storage driver and no
bridge). The image is made here, with ``docker import``, from this machine's own
``/bin/sh``, a few coreutils, the test interpreter and its standard library: no
registry is needed. Where no daemon answers, these tests are skipped: that is a
machine without Docker, not a failure.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import time
from pathlib import Path

import pytest

from benchmax.sandbox import DockerProvider, Limits, SandboxError, SandboxSpec, run_python_async

SRC = Path(__file__).resolve().parents[2] / "src"
TOOLS = ("cat", "ls", "sleep", "mkdir", "rm", "dd", "yes", "id", "env", "tar", "dirname", "basename", "chmod", "stat")
_SKIP = {"site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "ensurepip", "lib2to3", "__pycache__"}


def _client():
    docker = pytest.importorskip("docker", reason="the docker SDK is not installed (pip install 'benchmax[docker]')")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as error:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        if os.environ.get("BENCHMAX_TEST_REQUIRE_DOCKER") == "1":  # CI started a daemon: its absence is a failure
            pytest.fail(f"the Docker daemon CI started does not answer at {where}: {error}")
        pytest.skip(f"no Docker-compatible daemon answers at {where} on this machine ({type(error).__name__})")
    return client


def _image_tar() -> bytes:
    files: dict[str, Path] = {}

    def add(binary: Path, target: str) -> None:
        files[target] = binary
        shown = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
        for library in re.findall(r"(/\S+) \(0x", shown):
            name = library.lstrip("/")
            # the image's /lib and /lib64 are links into /usr (merged /usr)
            merged = name.split("/", 1)[0] in ("lib", "lib64")
            files[f"usr/{name}" if merged else name] = Path(os.path.realpath(library))

    add(Path(os.path.realpath("/bin/sh")), "usr/bin/sh")
    for tool in TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin")
        if found:
            add(Path(os.path.realpath(found)), f"usr/bin/{tool}")
    add(Path(os.path.realpath(sys.executable)), "usr/bin/python3")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for directory, dirs, names in os.walk(stdlib):
        dirs[:] = [name for name in dirs if name not in _SKIP]
        for name in names:
            source = Path(directory) / name
            files[f"usr/lib/{stdlib.name}/{source.relative_to(stdlib)}"] = source
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as tar:
        for link in ("bin", "lib", "lib64"):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(info)
        parents = {str(parent) for target in files for parent in Path(target).parents if str(parent) != "."}
        for directory in sorted(parents | {"tmp", "workspace", "etc", "proc", "dev", "sys"}):
            info = tarfile.TarInfo(directory)  # explicit, or the daemon makes them 0700
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for target, source in sorted(files.items()):
            tar.add(str(source), arcname=target)
    return buffer.getvalue()


@pytest.fixture(scope="session")
def image() -> str:
    client = _client()
    tag = "benchmax-sandbox-test:latest"
    try:
        client.images.get(tag)
    except Exception:
        client.api.import_image_from_data(_image_tar(), repository="benchmax-sandbox-test", tag="latest")
    return tag


@pytest.fixture
async def docker_sandbox(image: str):
    provider = DockerProvider(image=image)
    sandbox = await provider.start()
    yield sandbox
    await sandbox.stop()
    await provider.aclose()


def _container_exists(container_id: str) -> bool:
    client = _client()
    try:
        client.containers.get(container_id)
    except Exception:
        return False
    return True


async def test_commands_run_as_an_unprivileged_user_with_exit_codes_streams_stdin_env_and_cwd(docker_sandbox):
    result = await docker_sandbox.exec("id -u; pwd; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "1000\n/workspace\n", "err\n")
    await docker_sandbox.exec(["mkdir", "-p", "sub"])
    piped = await docker_sandbox.exec(["/bin/sh", "-c", 'pwd; echo "$GREETING"; cat'], cwd="sub",
                                      env={"GREETING": "hi"}, stdin="in")  # fmt: skip
    assert piped.stdout == "/workspace/sub\nhi\nin" and piped.ok


async def test_timeouts_and_output_caps_kill_the_command_and_later_commands_still_work(docker_sandbox):
    started = time.monotonic()
    slow = await docker_sandbox.exec("sleep 60 & sleep 61; echo never", timeout=1)
    assert slow.timed_out and "never" not in slow.stdout and time.monotonic() - started < 20
    flood = await docker_sandbox.exec("yes", max_output_bytes=5000)
    assert flood.output_truncated and len(flood.stdout) == 5000
    assert (await docker_sandbox.exec("echo alive")).stdout == "alive\n"
    commands = await docker_sandbox.exec("for p in /proc/[0-9]*; do cat $p/cmdline; echo; done")
    assert "sleep60" not in commands.stdout.replace("\0", "")


async def test_files_move_in_and_out_and_errors_are_oserrors(docker_sandbox, tmp_path: Path):
    await docker_sandbox.write_file("pkg/mod.py", b"X = 1\n")
    await docker_sandbox.write_file("/tmp/data.bin", b"\x00\xff" * 8, mode=0o600)
    assert await docker_sandbox.read_file("pkg/mod.py") == b"X = 1\n"
    assert await docker_sandbox.read_file("/tmp/data.bin") == b"\x00\xff" * 8
    assert [(e.path, e.type) for e in await docker_sandbox.list_files(recursive=True)] == [
        ("pkg", "dir"),
        ("pkg/mod.py", "file"),
    ]
    with pytest.raises(FileNotFoundError):
        await docker_sandbox.read_file("missing")
    with pytest.raises(IsADirectoryError):
        await docker_sandbox.read_file("pkg")
    with pytest.raises(OSError, match="Read-only file system"):
        await docker_sandbox.write_file("/usr/evil", "x")
    source = tmp_path / "repo"
    (source / "src").mkdir(parents=True)
    (source / "src" / "app.py").write_text("print('app')\n")
    await docker_sandbox.copy_in(source, "checkout")
    assert (await docker_sandbox.exec(["python3", "src/app.py"], cwd="checkout")).stdout == "app\n"
    await docker_sandbox.exec("echo new > checkout/new.txt")
    await docker_sandbox.copy_out("checkout", tmp_path / "back")
    assert (tmp_path / "back" / "new.txt").read_text() == "new\n"
    assert (tmp_path / "back" / "src" / "app.py").read_text() == "print('app')\n"


async def test_the_container_has_no_network_a_read_only_root_and_a_disk_cap(image):
    provider = DockerProvider(image=image)
    async with provider.sandbox(SandboxSpec(limits=Limits(disk_mb=8, tmp_mb=8))) as sandbox:
        code = "import socket; print(sorted(name for _, name in socket.if_nameindex()))"
        assert (await sandbox.exec(["python3", "-c", code])).stdout == "['lo']\n"
        assert "Read-only file system" in (await sandbox.exec("echo x > /etc/x")).stderr
        fill = await sandbox.exec("dd if=/dev/zero of=big bs=1M count=32 2>&1", timeout=60)
        assert "No space left on device" in fill.stdout
    await provider.aclose()


async def test_the_process_limit_stops_a_fork_bomb(image):
    provider = DockerProvider(image=image)
    async with provider.sandbox(SandboxSpec(limits=Limits(processes=32))) as sandbox:
        code = (
            "import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(20)\n            os._exit(0)\n        n += 1\n"
            "except OSError as e:\n    print(n, e.errno)\n"
        )
        result = await sandbox.exec(["python3", "-c", code], timeout=60)
        count, errno_ = map(int, result.stdout.split())
        assert errno_ == 11 and count < 32
        await sandbox.terminate_processes()
        assert (await sandbox.exec("echo ok")).stdout == "ok\n"
    await provider.aclose()


async def test_run_python_runs_in_a_fresh_container(image):
    provider = DockerProvider(image=image)
    result = await run_python_async("print(input()[::-1])", stdin="abc\n", provider=provider)
    assert (result.stdout, result.isolation) == ("cba\n", "docker")
    await provider.aclose()


async def test_stop_removes_the_container_and_refuses_more_work(image):
    provider = DockerProvider(image=image)
    sandbox = await provider.start()
    container = sandbox.container_id
    assert _container_exists(container)
    await sandbox.stop()
    assert not _container_exists(container)
    with pytest.raises(SandboxError, match="stopped"):
        await sandbox.exec("true")
    await provider.aclose()


OWNER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[1])
    from benchmax.sandbox import DockerProvider

    async def main():
        sandbox = await DockerProvider(image=sys.argv[2]).start()
        asyncio.create_task(sandbox.exec("sleep 300", timeout=600))
        print(sandbox.container_id, flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


async def test_sigkill_of_the_owner_removes_its_container(image):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(SRC), image], stdout=subprocess.PIPE, text=True)
    try:
        container = (await asyncio.wait_for(asyncio.to_thread(owner.stdout.readline), 60)).strip()
        assert container and _container_exists(container)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30
    while _container_exists(container) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not _container_exists(container), "the container outlived the process that owned it"


def test_without_an_image_the_provider_says_what_to_pass():
    with pytest.raises(SandboxError, match="needs an image"):
        asyncio.run(DockerProvider().start())
