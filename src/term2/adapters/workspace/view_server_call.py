"""One search through a kept view's server: the request, and rg's pipes read as a per-call view's are (ADR 0037).

term2 makes the pipes rg writes to and reads them exactly as `ripgrep.run`
reads a per-call view's, under the same bounds (output, time, the caller's
cancel scope, `consume` saying enough), so what a search returns does not
depend on whether a server ran it. A call the server never started rg for
returns None and runs again in a per-call view.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from term2.adapters.workspace import ripgrep
from term2.adapters.workspace.view_server_process import END_LIMIT, Server

REQUEST_LIMIT = 60 * 1024  # a request past this (a huge pattern) runs in a per-call view


@dataclass(slots=True)
class _Call:
    finished: ripgrep.Finished
    read: int = 0
    replied: bytes | None = None


async def search(
    server: Server,
    rg_args: Sequence[str],
    place: ripgrep.Place,
    consume: Callable[[bytes], bool],
    limit: float,
    started: float,
    stdin: int | None = None,
) -> ripgrep.Finished | None:
    """rg through the server; None when it never ran there (the caller runs it in a per-call view).

    `limit` counts from `started` (the call's start, before its server was found or started), so a
    server's start is spent from the walk's time, not added to it. `stdin` (a file term2 opened,
    `place.target` `-`) goes to the server with the pipes and becomes rg's stdin.
    """
    body = b"\0".join([os.fsencode(place.cwd), *(os.fsencode(arg) for arg in (*rg_args, "--", place.target))])
    if len(body) > REQUEST_LIMIT:
        return None
    ident = next(_IDS).to_bytes(8, "little")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        sent = server.send(b"R" + ident + body, (out_w, err_w) if stdin is None else (out_w, err_w, stdin))
    finally:
        os.close(out_w)
        os.close(err_w)
    call = _Call(ripgrep.Finished(None, ""))
    errors = bytearray()
    try:
        if not sent:
            return None
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        with anyio.move_on_after(limit - (time.monotonic() - started)) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_drain, err_r, errors)
                call.finished.stopped = await _feed(out_r, consume, call)
                if call.finished.stopped is not None:
                    server.send(b"K" + ident)
                call.replied = await server.reply(ident)
        if scope.cancelled_caught:
            call.finished.stopped = f"stopped after {limit:g} s"
    finally:
        if call.replied is None and sent:
            with anyio.CancelScope(shield=True):
                server.send(b"K" + ident)
                with anyio.move_on_after(END_LIMIT):
                    call.replied = await server.reply(ident)
                if call.replied is None:  # a server that does not answer a kill is ended, rg with it
                    server.kill()
        os.close(out_r)
        os.close(err_r)
    reply = call.replied
    if reply is None or reply[:1] == b"F":
        if call.read == 0 and call.finished.stopped is None:
            return None  # rg never ran there, or printed nothing before the server went: run it again
        call.finished.stopped = call.finished.stopped or "stopped: the search process ended"
    else:
        call.finished.returncode = struct.unpack("<i", reply[9:13])[0]
    call.finished.stderr = errors.decode("utf-8", "replace")
    return call.finished


_IDS = itertools.count(1)


async def _read(fd: int) -> bytes:
    await anyio.lowlevel.checkpoint_if_cancelled()  # data may be waiting: the caller's cancel comes first
    while True:
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            await anyio.wait_readable(fd)


async def _feed(fd: int, consume: Callable[[bytes], bool], call: _Call) -> str | None:
    while chunk := await _read(fd):
        call.read += len(chunk)
        if not consume(chunk):
            return "enough"
        if call.read > ripgrep.OUTPUT_LIMIT:
            return f"stopped after {ripgrep.OUTPUT_LIMIT // (1024 * 1024)} MiB of output"
    return None


async def _drain(fd: int, into: bytearray) -> None:
    while chunk := await _read(fd):
        if len(into) < ripgrep.STDERR_LIMIT:
            into += chunk[: ripgrep.STDERR_LIMIT - len(into)]
