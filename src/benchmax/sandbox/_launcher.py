"""Starts bubblewrap as an unprivileged user when benchmax runs as root.

Run as ``python -I -S -c <this file> UID GID EXPOSE BWRAP ARGS...`` (standard
library only; EXPOSE is newline-separated paths). A sandbox whose processes run as host root would pass every
owner check on root's files (``/etc/shadow``, keys under ``/etc/ssh``), capability
drop or not, so we switch to an unprivileged uid (``nobody`` by default) before
bubblewrap creates its user namespace: the sandbox can then read what "others"
may read, and nothing more.

That user cannot traverse directories such as ``/root``, where the interpreter
often lives (pyenv, a venv). So first, in a private mount namespace that only
this process and its children see, each such directory is covered with a small
tmpfs holding just the paths the sandbox must see, bound back from the
originals. Nothing is mounted on the host; the namespace ends with the sandbox.
"""

import os
import sys

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18


def _check(result, what):
    if result != 0:
        import ctypes

        error = ctypes.get_errno()
        sys.stderr.write(f"benchmax sandbox launcher: {what}: {os.strerror(error)}\n")
        sys.exit(125)


def _blocked_ancestor(path):
    """The highest directory on ``path`` that others cannot traverse, or None."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & 0o001:
            return current
    return None


def expose(paths):
    import ctypes  # only when something must be exposed: it costs a few ms to import

    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    hidden = {}
    for path in paths:
        ancestor = _blocked_ancestor(path)
        if ancestor is not None and os.path.exists(path):
            hidden.setdefault(ancestor, []).append(path)
    for ancestor, inside in sorted(hidden.items()):
        # Open the originals in this namespace before covering them (a bind source
        # must be a mount of the caller's own namespace).
        fds = [(path, os.open(path, os.O_PATH)) for path in inside]
        _check(
            libc.mount(b"benchmax-expose", ancestor.encode(), b"tmpfs", 0, b"mode=0755,size=1m"),
            f"covering {ancestor}",
        )
        for path, fd in fds:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
            source = f"/proc/self/fd/{fd}".encode()
            _check(libc.mount(source, path.encode(), None, _MS_BIND | _MS_REC, None), f"exposing {path}")
            os.close(fd)


def main():
    uid, gid, paths = int(sys.argv[1]), int(sys.argv[2]), [p for p in sys.argv[3].split("\n") if p]
    argv = sys.argv[4:]
    if paths:
        expose(paths)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"benchmax sandbox launcher: cannot run {argv[0]}: {exc}\n")
        sys.exit(125)


if __name__ == "__main__":
    main()
