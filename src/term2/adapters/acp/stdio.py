"""stdio transport with a guarded stdout.

At startup the protocol takes a private duplicate of fd 1 and fd 1 is pointed
at stderr, so a stray print() from any library, C extension or child process
lands in the log instead of corrupting the JSON-RPC stream.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from typing import BinaryIO

import anyio
import anyio.to_thread

from term2.ports.transport import LineTooLong

MAX_LINE_BYTES = 64 * 1024 * 1024
# A client that stops reading must slow term2 down, not make it buffer without end.
MAX_PENDING_BYTES = 16 * 1024 * 1024
BACKPRESSURE_WAIT_S = 30.0


def guard_stdout() -> int:
    """Return a private fd for protocol output and make fd 1 an alias of stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.set_inheritable(protocol_fd, False)
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")
    return protocol_fd


class _LineReader:
    """Blocking line reader with a size cap that discards the rest of an oversized line."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self._stream = stream
        self._limit = limit

    def read_line(self) -> bytes | LineTooLong | None:
        return self.finish(self._stream.readline(self._limit + 1))

    def finish(self, line: bytes) -> bytes | LineTooLong | None:
        """Interpret what one `readline(limit + 1)` returned."""
        if not line:
            return None
        if line.endswith(b"\n"):
            return line[:-1].rstrip(b"\r")
        if len(line) <= self._limit:
            return line  # final line without newline
        while True:  # skip the remainder of the oversized line
            rest = self._stream.readline(1 << 20)
            if not rest or rest.endswith(b"\n"):
                return LineTooLong(f"message exceeds {self._limit} bytes")


class _Writer(threading.Thread):
    """One thread owns the protocol fd, so writes never interleave and a slow
    client never blocks the event loop."""

    def __init__(self, fd: int) -> None:
        super().__init__(name="term2-stdout-writer", daemon=True)
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._pending = 0  # bytes queued but not yet written
        self._lock = threading.Lock()
        self.broken = threading.Event()
        self.drained = threading.Event()

    @property
    def pending(self) -> int:
        return self._pending

    def put(self, data: bytes | None) -> None:
        if data is not None:
            with self._lock:
                self._pending += len(data)
        self._queue.put(data)

    def run(self) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                chunks = [item]
                while True:  # coalesce what is already queued into one write
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        self._write(b"".join(chunks))
                        return
                    chunks.append(nxt)
                self._write(b"".join(chunks))
        except OSError:
            self.broken.set()
        finally:
            self.drained.set()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
            with self._lock:
                self._pending -= written


class StdioTransport:
    def __init__(self, stdin: BinaryIO, out_fd: int, limit: int = MAX_LINE_BYTES, pending: bytes | None = None) -> None:
        self._reader = _LineReader(stdin, limit)
        # A first line the launcher read (and did not answer) before this transport existed.
        self._pending_line = pending
        self._writer = _Writer(out_fd)
        self._writer.start()
        self._closed = False
        self._eof = False

    async def receive(self) -> bytes | None:
        if self._pending_line is not None:
            line, self._pending_line = self._pending_line, None
            result = self._reader.finish(line)
        else:
            result = await anyio.to_thread.run_sync(self._reader.read_line, abandon_on_cancel=True)
        if isinstance(result, LineTooLong):
            raise result
        if result is None:
            self._eof = True
        return result

    async def send(self, line: bytes) -> None:
        # Backpressure: wait while the client is not reading. Bounded, because the last
        # updates of a turn are sent from shielded scopes that must not hang shutdown.
        with anyio.move_on_after(BACKPRESSURE_WAIT_S):
            while self._writer.pending > MAX_PENDING_BYTES and not (self._eof or self._writer.broken.is_set()):
                await anyio.sleep(0.01)
        if self._closed or self._writer.broken.is_set():
            return
        self._writer.put(line + b"\n")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.put(None)
        await anyio.to_thread.run_sync(self._writer.drained.wait, 2.0, abandon_on_cancel=True)
