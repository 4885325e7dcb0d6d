"""A stdio MCP server's transport: the launcher's process, its pipes as the SDK session's streams.

Why not the SDK's `stdio_client`: it joined every chunk of stdout onto the whole unfinished line, so
one line without a newline cost quadratic time (1.8 s of CPU at 16 MiB, 8 s at 32 MiB, for one line
a server may never end), with no bound on its length; and it stopped the server by signalling its
process group, which a helper that called `setsid` leaves. Here:
- stdout is cut into lines in linear time (each chunk is searched once, the pieces of a line joined
  once), holding at most `MAX_LINE` bytes of one: a longer line is the server's failure
  (`McpError`, kind ``protocol``), which ends the connection, stops the server and is reported like
  any server failure; term2 never stalls on it;
- stderr goes to term2's log a line at a time, each line cut at `MAX_LOG_LINE` bytes and the whole
  at `MAX_LOG` bytes (then drained unlogged), never to stdout, which is the ACP protocol;
- the server runs under `launcher.py` (a child subreaper with a parent-death signal), which ends it
  and every process it started, detached or not, when it exits, when term2 stops it, and when term2
  dies. Leaving the context closes the server's stdin, gives it `STDIN_GRACE_S` to exit, then asks
  the launcher to stop (SIGTERM: the server gets SIGTERM, then everything is killed), and only a
  launcher that is itself stuck gets SIGKILL (logged: its orphans would outlive it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import anyio
import anyio.lowlevel
import mcp.types as types
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from term2.ports.mcp import McpError, StdioServer
from term2.support.deferred_log import get_logger

log = get_logger("term2.mcp")

LAUNCHER = str(Path(__file__).with_name("launcher.py"))
MAX_LINE = 16 * 1024 * 1024  # bytes of one message from a server; a longer line is its failure
MAX_LOG_LINE = 4000  # bytes of one stderr line kept in term2's log
MAX_LOG = 1024 * 1024  # bytes of a server's stderr logged in all; the rest is read and dropped
STDIN_GRACE_S = 2.0  # for the server to exit once its stdin is closed (MCP's stdio shutdown)
STOP_WAIT_S = 5.0  # for the launcher to stop the server (its grace is 2 s) and end every process
KILL_WAIT_S = 2.0  # for the kernel to end a launcher killed as a last resort

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class LineTooLong(Exception):
    pass


class Lines:
    """A byte stream cut into lines in linear time, holding at most `limit` bytes of an unfinished one.

    Past the limit, `feed` raises LineTooLong, or with ``cut`` gives the line's first `limit` bytes
    once and drops the rest of it (for a log, where a long line is not an error).
    """

    def __init__(self, limit: int, *, cut: bool = False) -> None:
        self._limit = limit
        self._cut = cut
        self._pieces: list[bytes] = []
        self._size = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece, start = chunk[start:end], end + 1
            if self._skipping:
                self._skipping = False
                continue
            if self._size + len(piece) > self._limit:
                yield from self._overflow(piece)
                self._skipping = False
                continue
            line = b"".join((*self._pieces, piece)) if self._pieces else piece
            self._pieces, self._size = [], 0
            yield line
        rest = chunk[start:]
        if self._skipping or not rest:
            return
        if self._size + len(rest) > self._limit:
            yield from self._overflow(rest)
            return
        self._pieces.append(rest)
        self._size += len(rest)

    def _overflow(self, piece: bytes) -> Iterator[bytes]:
        if not self._cut:
            raise LineTooLong
        head = b"".join((*self._pieces, piece))[: self._limit]
        self._pieces, self._size, self._skipping = [], 0, True
        yield head + b" [... cut]"


def _parse(line: bytes) -> SessionMessage | Exception:
    """One message, or the parse error as a value: the session surfaces it (sdk_client mends lone surrogates)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


@asynccontextmanager
async def stdio_transport(server: StdioServer, cwd: str) -> AsyncIterator[Streams]:
    """Start `server` under the launcher in `cwd`; raises OSError or ValueError when it cannot be spawned."""
    process = await anyio.open_process(
        [sys.executable, "-I", "-S", LAUNCHER, str(os.getpid()), "--", server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=get_default_environment() | dict(server.env),
        start_new_session=True,  # a terminal's Ctrl-C goes to term2, which stops its servers itself
    )
    # No await until the task group is entered: a cancellation in the gap would leak the process.
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_stdout, process, incoming_send, server.name)
            tg.start_soon(_write_stdin, process, outgoing_receive, incoming_send)
            tg.start_soon(_log_stderr, process, server.name)
            try:
                yield incoming, outgoing
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process, server.name)
                tg.cancel_scope.cancel()
    finally:
        for stream in (incoming, outgoing, incoming_send, outgoing_receive):
            stream.close()


async def _read_stdout(process: Process, out: MemoryObjectSendStream[SessionMessage | Exception], name: str) -> None:
    """Messages to the session; a line past `MAX_LINE` is said in band as the McpError, then the stream ends."""
    assert process.stdout is not None
    lines = Lines(MAX_LINE)
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
        async with out:  # the session is gone, or the pipe with it: the connection ends either way
            try:
                async for chunk in process.stdout:
                    for line in lines.feed(chunk):
                        if line.strip():
                            await out.send(_parse(line))
            except LineTooLong:
                log.warning("MCP server sent an overlong line; stopping it", server=name, limit=MAX_LINE)
                await out.send(McpError("protocol", f"sent a message longer than {MAX_LINE // (1024 * 1024)} MiB"))


async def _write_stdin(
    process: Process,
    messages: MemoryObjectReceiveStream[SessionMessage],
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with messages:
            async for message in messages:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError, UnicodeEncodeError):
        incoming.close()  # a server that stopped reading: the session sees the connection end, no call waits


async def _log_stderr(process: Process, name: str) -> None:
    assert process.stderr is not None
    await _log_lines(process.stderr, name)


async def _log_lines(stream: ByteReceiveStream, name: str) -> None:
    lines, logged = Lines(MAX_LOG_LINE, cut=True), 0
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
        async for chunk in stream:
            for line in lines.feed(chunk):
                if logged >= MAX_LOG:
                    continue
                logged += len(line)
                log.info("MCP server stderr", server=name, line=line.decode(errors="replace"))
                if logged >= MAX_LOG:
                    log.warning("MCP server's stderr is no longer logged", server=name, logged=logged)


async def _stop(process: Process, name: str) -> None:
    """Close stdin, then ask the launcher to stop, then (stuck only) kill it; every wait bounded."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    for wait, act in ((STDIN_GRACE_S, process.terminate), (STOP_WAIT_S, process.kill), (KILL_WAIT_S, None)):
        with anyio.move_on_after(wait):
            await process.wait()
            break
        if act is None:
            log.error("MCP server launcher did not end", server=name, pid=process.pid)
            break
        if act is process.kill:
            log.error("MCP server launcher did not stop in time; killing it", server=name, pid=process.pid)
        with suppress(ProcessLookupError):
            act()
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await pipe.aclose()
    await anyio.lowlevel.checkpoint()
