"""The program a code test with a ``check`` runs in the sandbox, as ``main.py`` (its source is sent, never imported).

Two processes. The warden (this file run with no arguments) reads the sealed check
and nonce, deletes them, makes itself non-dumpable (no other process of the sandbox
may read its memory, its descriptors or trace it), and starts the runner: this file
again, a fresh interpreter, given the check on one pipe and a report pipe. The runner
runs the candidate, then the check, in one namespace; only when the check *returns*
(an exception, ``SystemExit`` included, is a failure) does it write one byte to the
report pipe and exit 0. The warden then prints the nonce and exits 0; otherwise it
exits with the runner's failure. The nonce never exists in the runner's process, so
no frame, ``gc`` walk, file or memory read there can find it. It runs on Python 3.8+
(a rootfs's own interpreter) with the standard library only.
"""

import contextlib
import json
import os
import signal
import sys

_SEALED = "__benchmax_check__.json"
_CANDIDATE = "__benchmax_candidate__.py"


def _status(wait_status: int) -> int:
    """The runner's exit status; a signal that ended it ends the warden too, so the sandbox reports
    the same death (-9 for a kill) as for a program run on its own."""
    if os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status)
    if os.WIFSIGNALED(wait_status):
        number = os.WTERMSIG(wait_status)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number
    return 1


def _unreadable() -> None:
    """PR_SET_DUMPABLE 0: same-user processes can no longer open /proc/<warden>/mem, fd or trace it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    except Exception as exc:
        sys.stderr.write(f"code-test harness: cannot make itself unreadable ({exc}); the check is not run\n")
        os._exit(1)


def _warden() -> None:
    with open(_SEALED, "rb") as handle:
        sealed = json.loads(handle.read())
    os.unlink(_SEALED)
    nonce, check = sealed["nonce"].encode(), sealed["check"].encode("utf-8")
    del sealed
    _unreadable()
    check_read, check_write = os.pipe()
    report_read, report_write = os.pipe()
    flags = [("-E", sys.flags.ignore_environment), ("-s", sys.flags.no_user_site), ("-S", sys.flags.no_site)]
    flags += [("-B", sys.flags.dont_write_bytecode), ("-I", sys.flags.isolated)]
    argv = [sys.executable] + [flag for flag, on in flags if on]
    argv += ["-X", "utf8"] if sys.flags.utf8_mode else []
    argv += [sys.argv[0], str(check_read), str(report_write)]
    runner = os.fork()
    if runner == 0:
        try:
            os.close(check_write)
            os.close(report_read)
            os.set_inheritable(check_read, True)
            os.set_inheritable(report_write, True)
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)
    os.close(check_read)
    os.close(report_write)
    view = memoryview(check)
    try:
        while view:
            view = view[os.write(check_write, view) :]
    except OSError:
        pass  # the runner is gone already: its status says why
    os.close(check_write)
    status = _status(os.waitpid(runner, 0)[1])
    os.set_blocking(report_read, False)
    try:
        report = os.read(report_read, 2)
    except BlockingIOError:
        report = b""
    if status == 0 and report == b"\x01":
        line = memoryview(b"\n" + nonce + b"\n")
        while line:
            line = line[os.write(1, line) :]
    os._exit(status)


def _runner(check_fd: int, report_fd: int) -> None:
    # Everything the runner needs later is bound now, before candidate code can replace it.
    exit_now, write, settrace, setprofile = os._exit, os.write, sys.settrace, sys.setprofile
    run, build = exec, compile
    import traceback

    print_exc = traceback.print_exc
    chunks = []
    while True:
        chunk = os.read(check_fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(check_fd)
    check = b"".join(chunks).decode("utf-8")
    del chunks
    with open(_CANDIDATE, encoding="utf-8") as handle:
        code = handle.read()
    sys.argv[:] = ["main.py"]
    namespace = {"__name__": "__main__", "__file__": os.path.abspath(_CANDIDATE), "__builtins__": __builtins__}

    def flush() -> None:
        for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)}.values():
            try:  # noqa: SIM105  (no contextlib: candidate code may have replaced it by now)
                stream.flush()
            except BaseException:
                pass

    def fail(status: int) -> None:
        flush()
        exit_now(status)

    try:
        run(build(code, "main.py", "exec"), namespace)
    except SystemExit as stop:
        # the program may end itself with status 0 (a script's habit): the check still decides
        if stop.code not in (None, 0):
            fail(stop.code if isinstance(stop.code, int) else 1)
    except BaseException:
        print_exc()
        fail(1)
    settrace(None)
    setprofile(None)
    try:
        run(build(check, "check", "exec"), namespace)
    except SystemExit as stop:
        # only a check that returns passes: an exit out of it (sys.exit, exit(), an audit hook) fails
        sys.stderr.write(f"SystemExit({stop.code!r}) raised inside the check: a check passes only by returning\n")
        fail(stop.code if isinstance(stop.code, int) and stop.code != 0 else 1)
    except BaseException:
        print_exc()
        fail(1)
    flush()
    try:
        write(report_fd, b"\x01")
    except BaseException:
        exit_now(1)
    exit_now(0)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        _runner(int(sys.argv[1]), int(sys.argv[2]))
    else:
        _warden()
