"""A lenient HTTP server on 127.0.0.1 that records every byte it receives, for the smuggling tests.

It reads the way the loosest real servers do: a line ends at LF (a CR before it is dropped), a blank
line ends a request, `Connection: close` is ignored and every request found is answered on the same
connection, which stays open until the other side ends its own. So whatever a proxy lets through,
a bare LF, a pipelined second request, reaches it as a request of its own, and shows in
`Lenient.received`. Plain sockets and one thread a connection: nothing here is the code under test.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nlenient\n"

ONE = b"GET http://lenient.test/one HTTP/1.1\r\nHost: lenient.test\r\nAccept: */*\r\n\r\n"
SMUGGLED = b"GET http://lenient.test/two HTTP/1.1\r\nHost: evil.test\r\n\r\n"

# Each is refused with a 400 before anything is sent to the server; each would smuggle `evil.test`
# (or a second request) past a lenient server if its bytes were forwarded as they are.
MALFORMED = {
    "bare LF in a value": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: 1\nHost: evil.test\r\n\r\n",
    "bare LF line ends": b"GET http://lenient.test/ HTTP/1.1\nX-A: 1\nHost: evil.test\n\n",
    "bare CR in a value": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: 1\rHost: evil.test\r\n\r\n",
    "obs-fold": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: 1\r\n Host: evil.test\r\n\r\n",
    "NUL in a value": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: a\x00b\r\nHost: evil.test\r\n\r\n",
    "control in a value": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: a\x1bb\r\n\r\n",
    "control in a name": b"GET http://lenient.test/ HTTP/1.1\r\nX\x01A: 1\r\n\r\n",
    "space before the colon": b"GET http://lenient.test/ HTTP/1.1\r\nHost : evil.test\r\n\r\n",
    "two Hosts": b"GET http://lenient.test/ HTTP/1.1\r\nHost: lenient.test\r\nHost: evil.test\r\n\r\n",
    "Transfer-Encoding and Content-Length": (
        b"POST http://lenient.test/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"0\r\n\r\nGET http://lenient.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    ),
    "duplicate Content-Length": (
        b"POST http://lenient.test/ HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n"
        b"GET http://lenient.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    ),
    "Content-Length list": b"POST http://lenient.test/ HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx",
    "other transfer coding": b"POST http://lenient.test/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "chunked in HTTP/1.0": b"POST http://lenient.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "over-long line": b"GET http://lenient.test/ HTTP/1.1\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n",
    "over-long header section": b"GET http://lenient.test/ HTTP/1.1\r\n" + (b"X-A: " + b"a" * 1000 + b"\r\n") * 70,
    "HTTP/2": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "HTTP/0.9": b"GET http://lenient.test/\r\n\r\n",
    "space in the target": b"GET http://lenient.test/a b HTTP/1.1\r\n\r\n",
    "user info": b"GET http://lenient.test@evil.test/ HTTP/1.1\r\n\r\n",
}


@dataclass
class Lenient:
    port: int
    received: list[bytes] = field(default_factory=list)  # one entry a connection: all of its bytes, in order
    lock: threading.Lock = field(default_factory=threading.Lock)

    def connections(self) -> list[bytes]:
        with self.lock:
            return list(self.received)

    def hosts(self) -> list[bytes]:
        """Every Host line the lenient reading finds, across connections."""
        return [
            line.split(b":", 1)[1].strip()
            for data in self.connections()
            for line in data.replace(b"\r", b"").split(b"\n")
            if line.lower().startswith(b"host:")
        ]

    def requests(self) -> list[bytes]:
        """Every request line the lenient reading finds."""
        found = []
        for data in self.connections():
            start = True
            for line in data.replace(b"\r", b"").split(b"\n"):
                if start and line:
                    found.append(line)
                start = not line
        return found


@contextmanager
def lenient_server() -> Iterator[Lenient]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = Lenient(port=int(listener.getsockname()[1]))

    def serve(conn: socket.socket, index: int) -> None:
        with conn:
            pending = b""
            try:
                while data := conn.recv(65536):
                    with server.lock:
                        server.received[index] += data
                    pending = (pending + data).replace(b"\r", b"")
                    while (end := pending.find(b"\n\n")) >= 0:
                        pending = pending[end + 2 :]
                        conn.sendall(ANSWER)
            except OSError:
                pass  # the proxy dropped the connection: what arrived is recorded

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with server.lock:
                server.received.append(b"")
                index = len(server.received) - 1
            threading.Thread(target=serve, args=(conn, index), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
