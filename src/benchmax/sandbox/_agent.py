"""The supervisor that runs inside a local sandbox, as its first process.

Started by bubblewrap as ``python3 -I -S -c <this file> CHANNEL LOG [FORWARD PORTS]`` (the source
travels in argv, so nothing of benchmax needs to be visible inside). It speaks
framed JSON with the host over the socket on descriptor CHANNEL, one thread per
request: run a command with limits, read/write/list files, move tar streams,
kill leftover processes; its own stderr goes to descriptor LOG. With FORWARD (a
socket to the host) and PORTS (comma-separated), it listens on ``127.0.0.1`` at each
port, in the sandbox's own network namespace, and hands every accepted connection's
descriptor to the host with one byte naming the port's index; the host joins it to the
host port it forwards to (``_forward.py``) and closes what is over its caps. It imports only
the standard library and runs on Python 3.8+, so a prepared rootfs only needs a
``python3`` (with ``ctypes``).

Commands run as the same user as every process of the sandbox, so whatever holds
the channel must be out of their reach (a probe showed it: through ``/proc/1/fd`` a command
forged a passing result and ran a command without limits). The channel is not
stdin/stdout, which bubblewrap's init (pid 1, dumpable) keeps: it reaches this
process only, on descriptors bubblewrap's init closes and children never inherit;
and this process makes itself non-dumpable before anything else, which keeps
commands from opening ``/proc/<agent>/fd`` or tracing it. If it cannot, it refuses
to start. A command can still kill the agent; the host then sees the sandbox end.

Frame: 8-byte header ``!II`` (JSON length, payload length), the JSON object,
the payload bytes. A reply's JSON is at most MAX_JSON bytes (the host refuses more).
"""

import contextlib
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

HEADER = struct.Struct("!II")
CHUNK = 65536
MAX_LIST = 100000
MAX_JSON = 64 * 1024 * 1024
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
    if len(body) > MAX_JSON:
        message = f"the reply is {len(body)} bytes of JSON, more than the {MAX_JSON} the host accepts"
        body = json.dumps({"id": header.get("id"), "error": "value", "message": message}).encode()
        data = b""
    with _write_lock:
        out.sendall(HEADER.pack(len(body), len(data)) + body)
        if data:
            out.sendall(data)


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
    """Without this a command could open our descriptors under /proc: refuse to run instead."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0 or libc.prctl(3, 0, 0, 0, 0) != 0:  # PR_SET/GET_DUMPABLE
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    except Exception as exc:
        sys.stderr.write(
            f"benchmax sandbox: the supervisor cannot make itself non-dumpable ({type(exc).__name__}: {exc}); "
            "commands could then forge its answers, so it does not start (a rootfs's python3 needs ctypes)\n"
        )
        sys.exit(1)


def limiter(limits):
    values = []
    for name, which in _LIMITS.items():
        value = limits[name]  # every limit is named, None for none: a request without them runs nothing
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
            preexec_fn=limiter(req["limits"]),
        )
    except OSError as exc:
        # like a shell: 127 for a missing command, 126 for one that cannot run
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        message = f"benchmax sandbox: cannot run {argv[0][:1000]}: {exc.strerror or exc}\n".encode()
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
    behind still holds the pipes open. A process that closes both pipes before it
    exits is waited for (up to the deadline), not killed: its exit status is its own.
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
    if not (timed_out or truncated) and proc.poll() is None:
        try:
            proc.wait(max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            timed_out = True
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


def get_tar(path, max_bytes):
    import io
    import tarfile

    class Bounded(io.BytesIO):
        def write(self, data):
            if self.tell() + len(data) > max_bytes:
                raise ValueError(f"the archive of {path} is more than the {max_bytes} bytes allowed")
            return super().write(data)

    buffer = Bounded()
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
            payload = get_tar(req["path"], req["max_bytes"])
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


def listen_forwards(forward_fd, ports):
    """Listen on every forwarded port before the host hears "ready", so commands can connect at once."""
    os.set_inheritable(forward_fd, False)
    out = socket.socket(fileno=forward_fd)
    lock = threading.Lock()
    for index, port in enumerate(ports):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # never SO_REUSEPORT: nothing may share it
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as exc:
            sys.stderr.write(f"benchmax sandbox: cannot listen on 127.0.0.1:{port} for its forward: {exc}\n")
            sys.exit(1)
        listener.listen(128)
        threading.Thread(target=hand_over, args=(listener, bytes([index]), out, lock), daemon=True).start()


def hand_over(listener, tag, out, lock):
    """Pass each accepted connection to the host and drop our copy: the host relays it, not us."""
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            time.sleep(0.05)  # out of descriptors, or a connection reset before it was accepted
            continue
        try:
            with lock:
                out.sendmsg([tag], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", conn.fileno()))])
        except OSError:
            return  # the host is gone; the main loop takes the sandbox down
        finally:
            conn.close()


def main():
    no_dump()
    channel_fd, log_fd = int(sys.argv[1]), int(sys.argv[2])
    os.dup2(log_fd, 2)
    os.close(log_fd)
    os.set_inheritable(channel_fd, False)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if len(sys.argv) > 4:
        listen_forwards(int(sys.argv[3]), [int(port) for port in sys.argv[4].split(",")])
    out = socket.socket(fileno=channel_fd)
    inp = out.makefile("rb")
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
