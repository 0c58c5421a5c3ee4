"""Runs inside the sandbox child before the candidate program: isolate, limit, guard, run.

Executed as ``python -I -P _bootstrap.py CONFIG_JSON`` with the working
directory already set to the run's temp dir. It imports nothing from benchmax,
so it works for any interpreter that can run the candidate.

Layers, strongest first: kernel resource limits (``setrlimit``), a fresh network
namespace when the kernel lets us make one (``unshare(CLONE_NEWNET)``), then a
PEP 578 audit hook that refuses sockets, subprocesses, signals and file access
outside the temp dir through Python's APIs. The audit hook stops ordinary code
and honest mistakes; it is not a security boundary against code written to
escape it (ctypes stays importable because numpy needs it; PEP 578 says as much).
"""

import json
import os
import resource
import sys

_SETUP_FAILED = 125
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
        "os.startfile",
    }
)
_NETWORK_EVENTS = frozenset(
    {
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyname_ex",
        "socket.gethostbyaddr",
        "socket.getnameinfo",
        "socket.sethostname",
    }
)
# Events whose first argument is a path the program changes.
_WRITE_EVENTS = frozenset(
    {
        "os.mkdir",
        "os.rmdir",
        "os.remove",
        "os.truncate",
        "os.chmod",
        "os.chown",
        "os.utime",
        "os.mkfifo",
        "os.mknod",
        "os.chflags",
        "os.lchflags",
        "os.setxattr",
        "os.removexattr",
    }
)
_DIR_FD_LAST = frozenset(
    {"os.mkdir", "os.rmdir", "os.remove", "os.chmod", "os.chown", "os.utime", "os.mkfifo", "os.mknod"}
)
_READ_EVENTS = frozenset({"os.listdir", "os.scandir"})
_DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _fail(message):
    sys.stderr.write(f"benchmax sandbox setup failed: {message}\n")
    sys.stderr.flush()
    os._exit(_SETUP_FAILED)


def unshare_network():
    """Move this process into an empty network namespace; ``None``, or why it could not.

    A new user namespace comes with it whenever the kernel allows: the program
    then holds no capabilities on the host, so it cannot ``setns`` its way back
    to the host network even when the parent runs as root.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    attempts = [_CLONE_NEWUSER | _CLONE_NEWNET]
    if os.geteuid() == 0:
        attempts.append(_CLONE_NEWNET)
    failure = None
    for flags in attempts:
        if libc.unshare(flags) == 0:
            failure = None
            break
        failure = os.strerror(ctypes.get_errno())
    del libc
    return failure


def die_with_parent(parent):
    """SIGKILL this program when benchmax dies, even by SIGKILL (nothing is left running)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() != parent:
        os._exit(_SETUP_FAILED)


def _set_limits(config):
    mib = 1024 * 1024
    limits = [
        (resource.RLIMIT_AS, config["memory_mb"] * mib),
        (resource.RLIMIT_CPU, config["cpu_seconds"]),
        (resource.RLIMIT_FSIZE, config["max_file_mb"] * mib),
        (resource.RLIMIT_NOFILE, 256),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in limits:
        resource.setrlimit(which, (value, value))


def _guard(workdir):
    """Install the audit hook; paths are resolved so ``..`` and symlinks cannot slip out."""
    realpath = os.path.realpath
    join = os.path.join
    getcwd = os.getcwd
    fspath = os.fspath
    readlink = os.readlink
    sep = os.sep
    workdir = realpath(workdir)
    readable = {workdir}
    for entry in [*sys.path, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]:
        if entry:
            readable.add(realpath(entry))
    readable_roots = tuple(sorted(readable))
    devices = frozenset(_DEVICE_FILES)

    def inside(path, roots):
        return any(path == root or path.startswith(root.rstrip(sep) + sep) for root in roots)

    def resolve(path, dir_fd=None):
        if isinstance(path, int):
            return None
        path = fspath(path)
        if isinstance(path, bytes):
            path = path.decode(sys.getfilesystemencoding(), "surrogateescape")
        if not path.startswith(sep):
            relative_to_fd = isinstance(dir_fd, int) and dir_fd >= 0
            base = readlink(f"/proc/self/fd/{dir_fd}") if relative_to_fd else getcwd()
            path = join(base, path)
        return realpath(path)

    def deny(what, path):
        raise PermissionError(f"sandbox: {what} {path!r} is outside the working directory")

    def check_write(path, dir_fd=None):
        resolved = resolve(path, dir_fd)
        if resolved is not None and resolved not in devices and not inside(resolved, (workdir,)):
            deny("writing", resolved)

    def check_read(path, dir_fd=None):
        resolved = resolve(path, dir_fd)
        if resolved is not None and resolved not in devices and not inside(resolved, readable_roots):
            deny("reading", resolved)

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            (check_write if writing else check_read)(path)
        elif event in _READ_EVENTS:
            if args[0] is not None:
                check_read(args[0])
        elif event in _WRITE_EVENTS:
            dir_fd = args[-1] if event in _DIR_FD_LAST else None
            check_write(args[0], dir_fd)
        elif event in ("os.rename", "os.link"):
            check_write(args[0], args[2])
            check_write(args[1], args[3])
        elif event == "os.symlink":
            raise PermissionError("sandbox: creating symlinks is not allowed")
        elif event == "os.chdir":
            resolved = resolve(args[0])
            if resolved is not None and not inside(resolved, (workdir,)):
                deny("changing directory to", resolved)
        elif event in _PROCESS_EVENTS:
            raise PermissionError(f"sandbox: {event} is not allowed (no subprocesses or signals)")
        elif event in _NETWORK_EVENTS:
            raise PermissionError(f"sandbox: network access is not allowed ({event})")
        elif event == "socket.__new__" and args[1] != 1:
            # AF_UNIX (1) socketpairs keep asyncio working; nothing else is allowed.
            raise PermissionError("sandbox: network access is not allowed (socket)")

    sys.addaudithook(hook)


def _run(path):
    import builtins
    import traceback

    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    try:
        code = compile(source, path, "exec")
    except SyntaxError:
        traceback.print_exc(limit=0)
        sys.exit(1)
    namespace = {"__name__": "__main__", "__file__": path, "__builtins__": builtins}
    try:
        exec(code, namespace)
    except SystemExit:
        raise
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.stderr.flush()
        sys.exit(1)


def main():
    if sys.argv[1:] == ["--probe-network"]:
        failure = unshare_network()
        print(failure or "ok")
        return
    config = json.loads(sys.argv[1])
    die_with_parent(config["parent"])
    workdir = config["workdir"]
    if config["network"] == "namespace":
        failure = unshare_network()
        if failure:
            _fail(f"could not create a network namespace ({failure})")
    try:
        _set_limits(config)
    except (ValueError, OSError) as exc:
        _fail(f"could not set resource limits ({exc})")
    sys.path.insert(0, workdir)
    _guard(workdir)
    _run(os.path.join(workdir, config["main"]))


if __name__ == "__main__":
    main()
