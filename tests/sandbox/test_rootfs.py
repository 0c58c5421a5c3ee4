"""The local provider on a prepared root filesystem instead of the host's system directories.

The rootfs is made here from the interpreter running the tests: its binary at
``/usr/bin/python3``, its standard library, ``/bin/sh``, and the shared
libraries they load (hard links where the filesystem allows, copies otherwise).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from benchmax.sandbox import SandboxError, SandboxSpec, run_python_async

_SKIP = {"site-packages", "dist-packages", "test", "tests", "idlelib", "tkinter", "ensurepip", "lib2to3", "__pycache__"}


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        return
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _libraries(binary: Path) -> list[Path]:
    shown = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False).stdout
    return [Path(path) for path in re.findall(r"(/\S+) \(0x", shown)]


@pytest.fixture(scope="session")
def rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("ldd") is None:
        pytest.fail("building the test rootfs needs ldd (glibc's libc-bin)")
    root = tmp_path_factory.mktemp("rootfs")
    root.chmod(0o755)  # when the tests run as root, sandboxes run as nobody: it must be able to read it
    python = Path(os.path.realpath(sys.executable))
    shell = Path(os.path.realpath("/bin/sh"))
    _place(python, root / "usr/bin/python3")
    _place(shell, root / "usr/bin/sh")
    # and ctypes' extension: the supervisor needs ctypes to make itself non-dumpable (libffi)
    ctypes_ext = sorted(Path(sysconfig.get_paths()["platstdlib"], "lib-dynload").glob("_ctypes.*.so"))
    for binary in (python, shell, *ctypes_ext):
        for library in _libraries(binary):
            _place(Path(os.path.realpath(library)), root / str(library).lstrip("/"))
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for directory, dirs, files in os.walk(stdlib):
        dirs[:] = [name for name in dirs if name not in _SKIP]
        for name in files:
            source = Path(directory) / name
            _place(source, root / "usr/lib" / stdlib.name / source.relative_to(stdlib))
    for link in ("bin", "lib", "lib64"):
        if not (root / link).exists():
            (root / link).symlink_to(f"usr/{link}")
    (root / "etc").mkdir(exist_ok=True)
    (root / "etc" / "os-release").write_text("NAME=benchmax-test-rootfs\n")
    return root


async def test_a_rootfs_sandbox_sees_only_the_rootfs(start, rootfs: Path):
    sandbox = await start(SandboxSpec(rootfs=rootfs))
    release = await sandbox.exec(["python3", "-c", "print(open('/etc/os-release').read(), end='')"])
    assert release.stdout == "NAME=benchmax-test-rootfs\n", release
    assert (await sandbox.exec("cat /etc/os-release")).exit_code == 127  # no cat: the host's /usr is not there
    prefix = await sandbox.exec(["python3", "-c", "import sys; print(sys.prefix)"])
    assert prefix.stdout == "/usr\n", prefix
    for host_only in ("/usr/bin/apt-get", "/etc/hostname", sys.executable, "/usr/bin/env"):
        assert (await sandbox.exec(["/bin/sh", "-c", f"test -e {host_only}"])).exit_code == 1, host_only
    assert "Read-only file system" in (await sandbox.exec("echo x > /usr/x")).stderr
    result = await run_python_async("print(sum(range(10)))", sandbox=sandbox)
    assert result.stdout == "45\n" and result.isolation == "bwrap"


async def test_a_rootfs_without_python_says_so(start, tmp_path: Path):
    (tmp_path / "etc").mkdir()
    tmp_path.chmod(0o755)
    with pytest.raises(SandboxError, match="could not start"):
        await start(SandboxSpec(rootfs=tmp_path))


async def test_a_rootfs_others_cannot_read_is_refused_with_the_fix_when_root(start, tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("only a root benchmax maps sandboxes to nobody")
    tmp_path.chmod(0o700)
    with pytest.raises(SandboxError, match="chmod o\\+rX"):
        await start(SandboxSpec(rootfs=tmp_path))


async def test_a_rootfs_whose_python_lacks_ctypes_is_refused_not_run_dumpable(start, rootfs: Path, tmp_path: Path):
    # Without ctypes the supervisor cannot make itself non-dumpable, and a command could then
    # open the channel through /proc/<agent>/fd: it refuses to start rather than run exposed.
    stripped = tmp_path / "rootfs"
    shutil.copytree(rootfs, stripped, symlinks=True, copy_function=os.link)
    for module in stripped.rglob("_ctypes.*.so"):
        module.unlink()
    tmp_path.chmod(0o755)
    with pytest.raises(SandboxError, match="cannot make itself non-dumpable"):
        await start(SandboxSpec(rootfs=stripped))
