"""The supervisor that runs inside a local sandbox, as its first process.

Started by bubblewrap as ``python3 -I -S -c <this file>`` (the source travels in
argv, so nothing of benchmax needs to be visible inside). It speaks framed JSON
on stdin/stdout with the host, one thread per request: run a command with
limits, read/write/list files, move tar streams, kill leftover processes. It
imports only the standard library and runs on Python 3.8+, so a prepared rootfs
only needs a ``python3``.

It makes itself non-dumpable first: commands run as the same user, and that
keeps them from opening ``/proc/<agent>/fd`` (the protocol pipes) or ptracing
it, so a command cannot forge answers to the host. A command can still kill the
agent; the host then sees the sandbox end.

Frame: 8-byte header ``!II`` (JSON length, payload length), the JSON object,
the payload bytes.
"""

import contextlib
import json
import os
import resource
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time

HEADER = struct.Struct("!II")
CHUNK = 65536
MAX_LIST = 100000
_LIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_mb": resource.RLIMIT_AS,
    "file_size_mb": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
    "processes": resource.RLIMIT_NPROC,
}
_MIB = ("memory_mb", "file_size_mb")

_write_lock = threading.Lock()
_running = {}
_running_lock = threading.Lock()


def send(out, header, data=b""):
    body = json.dumps(header, separators=(",", ":")).encode()
    with _write_lock:
        out.write(HEADER.pack(len(body), len(data)) + body)
        if data:
            out.write(data)
        out.flush()


def read_exact(stream, size):
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def no_dump():
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except Exception:
        pass


def limiter(limits):
    values = []
    for name, which in _LIMITS.items():
        value = limits.get(name)
        if value is None:
            continue
        value = int(value) * (1024 * 1024 if name in _MIB else 1)
        hard = value + 1 if name == "cpu_seconds" else value
        values.append((which, value, hard))

    def apply():
        for which, soft, hard in values:
            resource.setrlimit(which, (soft, hard))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    return apply


def kill_group(pid):
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def run(req, data):
    argv = req["argv"]
    deadline_s = float(req["timeout"])
    limit = int(req["max_output"])
    cwd = req.get("cwd")
    if cwd and not os.path.isdir(cwd):
        raise FileNotFoundError(2, "the working directory does not exist", cwd)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=req["env"],
            stdin=subprocess.PIPE if data else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limiter(req.get("limits") or {}),
        )
    except OSError as exc:
        # like a shell: 127 for a missing command, 126 for one that cannot run
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        message = f"benchmax sandbox: cannot run {argv[0]}: {exc.strerror or exc}\n".encode()
        return {"exit_code": code, "timed_out": False, "truncated": False, "duration": 0.0, "stdout_len": 0}, message
    with _running_lock:
        _running[req["id"]] = proc.pid
    try:
        out, err, timed_out, truncated = communicate(proc, data, started + deadline_s, limit)
    finally:
        with _running_lock:
            _running.pop(req["id"], None)
    header = {
        "exit_code": proc.returncode,
        "timed_out": timed_out,
        "truncated": truncated,
        "duration": time.monotonic() - started,
        "stdout_len": len(out),
    }
    return header, out + err


def communicate(proc, data, deadline, limit):
    """Feed stdin, drain both pipes up to ``limit`` each, kill the group at the deadline.

    Reading stops shortly after the main process exits even when something it left
    behind still holds the pipes open.
    """
    buffers = {"stdout": bytearray(), "stderr": bytearray()}
    truncated = False
    timed_out = False
    pending = memoryview(data) if data else None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        selector.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
    exited_at = None
    while selector.get_map():
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
            kill_group(proc.pid)
        if exited_at is not None and now - exited_at > 0.5:
            break
        if now >= deadline:
            timed_out = exited_at is None
            break
        for key, _ in selector.select(min(deadline - now, 0.05)):
            if key.data == "stdin":
                try:
                    written = os.write(key.fd, pending[:CHUNK]) if pending else 0
                    pending = pending[written:] if pending else None
                except BrokenPipeError:
                    pending = None
                if not pending:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                continue
            chunk = os.read(key.fd, CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            buffer = buffers[key.data]
            room = limit - len(buffer)
            buffer += chunk[: max(room, 0)]
            if len(chunk) > room:
                truncated = True
        if truncated:
            break
    selector.close()
    kill_group(proc.pid)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None and not stream.closed:
            stream.close()
    return bytes(buffers["stdout"]), bytes(buffers["stderr"]), timed_out, truncated


def file_type(mode):
    import stat

    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


def list_entries(root, recursive):
    entries = []
    if not os.path.isdir(root):
        os.listdir(root)  # raises the right OSError (missing, not a directory)
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            full = os.path.join(directory, name)
            info = os.lstat(full)
            entries.append([os.path.relpath(full, root), file_type(info.st_mode), info.st_size, info.st_mode & 0o7777])
            if len(entries) >= MAX_LIST:
                raise ValueError(f"more than {MAX_LIST} entries under {root}")
        if not recursive:
            break
    entries.sort()
    return entries


def put_tar(path, data):
    import io  # imported on first use: most sandboxes never move a tree, and startup time counts
    import tarfile

    os.makedirs(path, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(path, filter="data")
        else:
            for member in archive.getmembers():
                name = member.name
                if name.startswith("/") or ".." in name.split("/") or not (member.isfile() or member.isdir()):
                    raise ValueError(f"refusing tar member {name!r}")
            archive.extractall(path)


def get_tar(path):
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as archive:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                archive.add(os.path.join(path, name), arcname=name)
        else:
            archive.add(path, arcname=os.path.basename(path))
    return buffer.getvalue()


def kill_all():
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return  # nothing else was running
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [pid for pid in os.listdir("/proc") if pid.isdigit() and int(pid) not in (1, os.getpid())]
        if not any(alive_process(int(pid)) for pid in alive):
            return
        time.sleep(0.01)


def alive_process(pid):
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def handle(out, req, data):
    op = req["op"]
    reply = {"id": req["id"]}
    payload = b""
    try:
        if op == "exec":
            header, payload = run(req, data)
            reply.update(header)
        elif op == "read":
            size = os.stat(req["path"]).st_size
            if os.path.isdir(req["path"]):
                raise IsADirectoryError(21, "Is a directory", req["path"])
            if size > req["max_bytes"]:
                raise ValueError(f"{req['path']} is {size} bytes, more than the {req['max_bytes']} allowed")
            with open(req["path"], "rb") as handle_:
                payload = handle_.read(req["max_bytes"] + 1)
            if len(payload) > req["max_bytes"]:
                raise ValueError(f"{req['path']} is more than the {req['max_bytes']} bytes allowed")
        elif op == "write":
            parent = os.path.dirname(req["path"])
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(req["path"], "wb") as handle_:
                handle_.write(data)
            os.chmod(req["path"], req["mode"])
        elif op == "list":
            reply["entries"] = list_entries(req["path"], req["recursive"])
        elif op == "put_tar":
            put_tar(req["path"], data)
        elif op == "get_tar":
            os.stat(req["path"])
            payload = get_tar(req["path"])
        elif op == "kill_all":
            kill_all()
        elif op == "cancel":
            with _running_lock:
                pid = _running.get(req["target"])
            if pid is not None:
                kill_group(pid)
        else:
            raise ValueError(f"unknown op {op!r}")
    except OSError as exc:
        reply = {"id": req["id"], "error": "os", "errno": exc.errno, "message": exc.strerror or str(exc)}
        reply["path"] = exc.filename if isinstance(exc.filename, str) else req.get("path")
        payload = b""
    except Exception as exc:
        reply = {"id": req["id"], "error": "value", "message": f"{type(exc).__name__}: {exc}"}
        payload = b""
    send(out, reply, payload)


def main():
    no_dump()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    send(out, {"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
    while True:
        head = read_exact(inp, HEADER.size)
        if head is None:
            break
        size, data_size = HEADER.unpack(head)
        req = json.loads(read_exact(inp, size))
        data = read_exact(inp, data_size) if data_size else b""
        threading.Thread(target=handle, args=(out, req, data), daemon=True).start()
    # The host went away: take everything down with us.
    kill_all()


if __name__ == "__main__":
    main()
