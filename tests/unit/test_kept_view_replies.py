"""Several searches share one kept view's socket (ADR 0037): each gets its own reply, whoever reads it.

The server answers in the order its rg processes end, not in the order
they were asked for; the search reading the socket when another's answer
comes must hand it over, or that search waits forever.
"""

from __future__ import annotations

import os
import select
import socket
import struct

import anyio
import pytest

from term2.adapters.workspace.view_server_process import Server

pytestmark = pytest.mark.anyio


async def test_each_search_gets_its_own_reply_whoever_reads_it() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    server = Server(("key",), os.getpid(), os.pidfd_open(os.getpid()), ours)
    first, second = (1).to_bytes(8, "little"), (2).to_bytes(8, "little")
    got: dict[bytes, bytes | None] = {}

    async def wait(ident: bytes) -> None:
        got[ident] = await server.reply(ident)

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait, first)
                await anyio.sleep(0.05)  # the first search is reading the socket
                tasks.start_soon(wait, second)
                await anyio.sleep(0.05)
                theirs.send(b"X" + second + struct.pack("<i", 0))  # the second search's rg ended first
                theirs.send(b"F" + first + b"could not start")
        assert got == {first: b"F" + first + b"could not start", second: b"X" + second + struct.pack("<i", 0)}
        theirs.close()
        with anyio.fail_after(60):
            assert await server.reply(first) is None  # the server is gone: no reply will come
        assert server.dead
    finally:
        theirs.close()
        ours.close()
        os.close(server.pidfd)


async def test_a_search_waiting_when_the_socket_is_closed_under_it_sees_the_server_gone() -> None:
    """`aclose` ends a server while a search waits for its reply: that search gets no reply, not an error."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    server = Server(("key",), os.getpid(), os.pidfd_open(os.getpid()), ours)
    got: list[bytes | None] = []

    async def wait() -> None:
        got.append(await server.reply((1).to_bytes(8, "little")))

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(wait)
                await anyio.sleep(0.05)
                anyio.notify_closing(ours)  # as Server.end closes it
                ours.close()
        assert got == [None] and server.dead
    finally:
        theirs.close()
        ours.close()
        os.close(server.pidfd)


async def test_a_server_killed_after_it_was_ended_signals_no_other_process() -> None:
    """`aclose` ends a server while a search on it is still unwinding; that search then kills the server,
    which never answered. By then `end` has closed the server's pidfd, and its number may name another:
    a pidfd term2 holds for another of its children (the loop's child watcher uses them)."""
    sleeper = ["/bin/sleep", "30"]
    first = os.posix_spawn(sleeper[0], sleeper, {})
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours.setblocking(False)
    server = Server(("key",), first, os.pidfd_open(first), ours)
    number = server.pidfd
    server.kill()
    with anyio.fail_after(60):
        await server.end()  # reaps it and closes its pidfd
    other = os.posix_spawn(sleeper[0], sleeper, {})
    reused = os.pidfd_open(other)
    try:
        if reused != number:
            os.dup2(reused, number)  # the lowest free number is reused; made certain here
        server.kill()  # the unwinding search
        ended, _, _ = select.select([reused], [], [], 0.5)  # a SIGKILL sent ends it well within this
        assert not ended, "another process was killed through a closed pidfd"
    finally:
        theirs.close()
        os.kill(other, 9)
        os.waitpid(other, 0)
        os.close(reused)
        if reused != number:
            os.close(number)
