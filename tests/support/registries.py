"""Local fake registries on 127.0.0.1 for the network-by-approval tests, reached through `[network.resolve]`.

One threaded HTTP server answers: ``/hello`` (a greeting), ``/redirect`` (302 to ``http://evil.test/steal``),
``/simple/demo/`` (a PEP 503 index page) and ``/files/demo-1.0-py3-none-any.whl`` (a minimal wheel);
every request is recorded, so a test can prove that a host was never reached.
"""

from __future__ import annotations

import io
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GREETING = b"hello from the fake registry\n"
WHEEL = "demo-1.0-py3-none-any.whl"


def _wheel() -> bytes:
    metadata = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
    wheel = "Wheel-Version: 1.0\nGenerator: term2-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files = {"demo/__init__.py": "", "demo-1.0.dist-info/METADATA": metadata, "demo-1.0.dist-info/WHEEL": wheel}
    record = "".join(f"{name},,\n" for name in files) + "demo-1.0.dist-info/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in {**files, "demo-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return buffer.getvalue()


@dataclass
class Registry:
    port: int
    requests: list[tuple[str, str]] = field(default_factory=list)  # (Host header, path)


@contextmanager
def fake_registry() -> Iterator[Registry]:
    wheel = _wheel()
    registry = Registry(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            registry.requests.append((self.headers.get("Host", ""), self.path))
            if self.path == "/redirect":
                self._send(302, b"", [("Location", "http://evil.test/steal")])
            elif self.path.startswith("/simple/demo"):
                page = f'<html><body><a href="/files/{WHEEL}">{WHEEL}</a></body></html>'.encode()
                self._send(200, page, [("Content-Type", "text/html")])
            elif self.path == f"/files/{WHEEL}":
                self._send(200, wheel, [("Content-Type", "application/octet-stream")])
            elif self.path == "/hello":
                self._send(200, GREETING, [("Content-Type", "text/plain")])
            else:
                self._send(404, b"not here\n", [])

        def _send(self, code: int, body: bytes, headers: list[tuple[str, str]]) -> None:
            self.send_response(code)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    registry.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
