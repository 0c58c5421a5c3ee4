"""Run a command as a fresh unprivileged uid, for the sandbox tests when they run as root (CI).

``python tests/sandbox/as_user.py -- COMMAND...`` (as root). What the local sandbox
lets model code do depends on who runs benchmax: as root the host's pipes belong to
root and sandboxes run as ``nobody``; as a normal user they are that user's. So the
sandbox tests also run this way. The uid is the first free one from 20000 (no
account is created: nothing needs one), with a fresh ``HOME``. Directories the uid
cannot traverse that the command needs (a pyenv under ``/root``, the checkout) are
shown through the sandbox's own launcher, in a private mount namespace, never on
the host. The exit status is the command's.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmax.sandbox import _launcher
from benchmax.sandbox._bwrap_host import _python_prefixes, find_bwrap

REPO = Path(__file__).resolve().parents[2]


def free_uid(start: int = 20000) -> int:
    """The first uid from ``start`` with no account and no process."""
    used = {info.st_uid for info in (_stat(p) for p in Path("/proc").iterdir() if p.name.isdigit()) if info}
    for uid in range(start, start + 10000):
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in used:
                return uid
    raise SystemExit(f"no free uid in {start}..{start + 9999}")


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except OSError:
        return None


def exposed_paths() -> list[str]:
    """What the command needs to see: the interpreter, its import path, the checkout and bubblewrap."""
    paths = {*_python_prefixes(sys.executable), str(REPO)}
    paths.update(os.path.realpath(entry) for entry in sys.path if entry and os.path.isdir(entry))
    bwrap = find_bwrap()
    if bwrap:
        paths.add(os.path.dirname(os.path.realpath(bwrap)))
    real = sorted(paths)
    return [p for p in real if not any(p != o and p.startswith(o.rstrip("/") + "/") for o in real)]


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise SystemExit("usage: python tests/sandbox/as_user.py -- COMMAND...")
    command = argv[argv.index("--") + 1 :]
    command[0] = shutil.which(command[0]) or command[0]
    if os.geteuid() != 0:
        raise SystemExit("as_user.py switches users, so it needs root; as a normal user run the command itself")
    uid = free_uid()
    home = tempfile.mkdtemp(prefix="benchmax-as-user-")
    os.chown(home, uid, uid)
    name = f"benchmax-test-{uid}"
    env = {
        **os.environ,
        "HOME": home,
        "USER": name,
        "LOGNAME": name,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])),
    }
    launcher = Path(_launcher.__file__).read_text(encoding="utf-8")
    try:
        return subprocess.run(
            [sys.executable, "-I", "-S", "-c", launcher, str(uid), str(uid), "\n".join(exposed_paths()), *command],
            env=env,
            cwd=REPO,
            check=False,
        ).returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
