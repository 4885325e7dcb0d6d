"""A TCP relay on 127.0.0.1 that records each connection and the bytes the client sent on it.

Why: whether a request went out on a connection opened before it (and
whether anything was sent on that connection first) is invisible at the HTTP
layer of the fake model server; in front of it, this relay sees connections
as the network does. It can also hang up on the first connections it accepts,
as a server that closes idle connections would, and hold each connection's
first client bytes until `hold_s` after its accept: a stand-in for a real
network's TCP and TLS handshakes (the warm-start benchmark's slow endpoint).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class RelayedConnection:
    index: int
    received: bytearray = field(default_factory=bytearray)
    dropped: bool = False
    accepted: float = field(default_factory=time.monotonic)


class RecordingRelay:
    def __init__(self, target: tuple[str, int], drop_first: int = 0, hold_s: float = 0.0) -> None:
        self._target = target
        self._drop = drop_first
        self._hold_s = hold_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections: list[RelayedConnection] = []
        self._changed = threading.Condition()
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def snapshot(self) -> list[tuple[int, bytes, bool]]:
        with self._changed:
            return [(c.index, bytes(c.received), c.dropped) for c in self.connections]

    def wait_for(self, count: int, timeout: float) -> bool:
        """At least ``count`` connections accepted (and, if dropped, closed): a guard, not a timing."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self.connections) >= count, timeout)

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._changed:
                record = RelayedConnection(len(self.connections))
                if self._drop > 0:
                    self._drop -= 1
                    client.close()
                    record.dropped = True
                self.connections.append(record)
                self._changed.notify_all()
            if not record.dropped:
                upstream = socket.create_connection(self._target)
                threading.Thread(target=self._pump, args=(client, upstream, record), daemon=True).start()
                threading.Thread(target=self._pump, args=(upstream, client, None), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, record: RelayedConnection | None) -> None:
        held = record is not None and self._hold_s > 0
        try:
            while data := source.recv(65536):
                if held and record is not None:
                    time.sleep(max(0.0, record.accepted + self._hold_s - time.monotonic()))
                    held = False
                if record is not None:
                    with self._changed:
                        record.received += data
                        self._changed.notify_all()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._closing = True
        self._listener.close()


@contextmanager
def recording_relay(target: tuple[str, int], drop_first: int = 0, hold_s: float = 0.0) -> Iterator[RecordingRelay]:
    relay = RecordingRelay(target, drop_first, hold_s)
    try:
        yield relay
    finally:
        relay.close()
