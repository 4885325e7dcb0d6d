"""A search's caller that is cancelled gets no more of rg's output, however much of it is already buffered.

Both feeds (a per-call view's, ripgrep._feed; a kept view's, view_server_call._feed) read rg's
output chunk by chunk and hand each chunk to the caller's consumer. A read of data that is
already there does not yield to the event loop, so before the feeds checked for a cancel
between chunks, a caller cancelled in its consumer was fed every chunk already buffered (and
the walk ran to its end when rg was faster than the caller): the contract suite's
`test_a_cancelled_walk_ends_early...` failed under load. Here the whole output is buffered
before the first chunk is consumed, deterministically: a pipe written and closed before the
feed starts; a process that has exited, its output read into the stream's buffer.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import anyio
import anyio.lowlevel
import pytest

from term2.adapters.workspace import ripgrep, view_server_call

pytestmark = pytest.mark.anyio

CHUNK = 65536  # the most one read returns, in both feeds
OUTPUT = 4 * CHUNK  # four chunks at least, all buffered before the first is consumed


def _cancelling(scope: anyio.CancelScope, seen: list[bytes]) -> object:
    def consume(chunk: bytes) -> bool:
        seen.append(chunk)
        scope.cancel()
        return True

    return consume


async def test_a_kept_views_feed_stops_at_the_first_chunk_after_a_cancel() -> None:
    read_fd, write_fd = os.pipe()
    try:
        fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, 2 * OUTPUT)  # the whole output fits: nothing is read yet
        assert os.write(write_fd, b"p\n" * (OUTPUT // 2)) == OUTPUT
        os.close(write_fd)
        write_fd = -1
        os.set_blocking(read_fd, False)
        seen: list[bytes] = []
        call = view_server_call._Call(ripgrep.Finished(None, ""))
        with anyio.CancelScope() as scope:
            await view_server_call._feed(read_fd, _cancelling(scope, seen), call)  # type: ignore[arg-type]
            pytest.fail("the feed went on to the end of the output after its caller was cancelled")
        assert scope.cancelled_caught and len(seen) == 1
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


async def test_a_per_call_views_feed_stops_at_the_first_chunk_after_a_cancel() -> None:
    writer = f"import sys; sys.stdout.buffer.write(b'p\\n' * {OUTPUT // 4})"  # half of OUTPUT: the process can exit
    process = await anyio.open_process([sys.executable, "-c", writer], stdin=subprocess.DEVNULL)
    try:
        await process.wait()
        stream = process.stdout._stream  # type: ignore[union-attr]  # asyncio's StreamReader behind anyio's
        while not stream.at_eof() and len(stream._buffer) < OUTPUT // 2:  # until it all sits in the buffer
            await anyio.lowlevel.checkpoint()
        seen: list[bytes] = []
        with anyio.CancelScope() as scope:
            await ripgrep._feed(process, _cancelling(scope, seen))  # type: ignore[arg-type]
            pytest.fail("the feed went on to the end of the output after its caller was cancelled")
        assert scope.cancelled_caught and len(seen) == 1
    finally:
        await process.aclose()
