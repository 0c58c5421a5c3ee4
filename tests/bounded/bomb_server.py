"""A real HTTP server on loopback answering each route with fixed bytes: gzip bombs among them."""

from __future__ import annotations

import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

MiB = 1024 * 1024

Answer = tuple[int, bytes, dict[str, str]]


def gzip_zeros(size: int) -> bytes:
    """``size`` zero bytes gzipped, built a MiB at a time (about a thousandth of ``size``)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join([*(packer.compress(block) for _ in range(size // MiB)), packer.flush()])


def bomb(size: int) -> Answer:
    """A 200 whose body is ``size`` bytes once gunzipped, sent as ``Content-Encoding: gzip`` JSON."""
    return 200, gzip_zeros(size), {"Content-Encoding": "gzip", "Content-Type": "application/json"}


class BombServer:
    """``answers`` maps ``"METHOD /path"`` to what that request gets; anything else is a 404."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        self.answers = answers
        self.seen: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                route = f"{self.command} {self.path.split('?')[0]}"
                server.seen.append(route)
                status, body, headers = server.answers.get(route, (404, b'{"error": "no route"}', {}))
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up on the body: what a bounded reader does

            do_GET = do_POST = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="bomb-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> BombServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(10)
