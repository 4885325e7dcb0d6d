"""Search views kept between calls: one small server per view starts rg for each search (ADR 0037).

A per-call view costs `sh` (the memory limit), bubblewrap and rg's own start:
~6-7 ms where rg alone needs 3.5, past issue 20's 2x on small visible trees.
Here the view is made once: `view_server_main.py` runs in it under the host's
interpreter, `chroot`s into the part holding only what a per-call view holds,
and forks and execs the static rg for each request (fork of a small process
and exec of a static binary: well under a millisecond). rg's output comes back
through pipes term2 made and reads exactly as `ripgrep.run` reads a per-call
view's, under the same bounds.

A server serves one view: the scope, and the ignore files above it as they
were when it started. Any change to what the view was made of (an ignore file
above the scope edited, made or removed, a new repository top, the global
excludes file, the scope folder itself, rg, term2's mount table) ends it and
the next call starts another. A server that cannot start, or ends under a
call before rg started, sends that call to a per-call view: never unconfined.
Missing rg or bwrap still fails closed with the port's error.

The server's process (`view_server_process.py`) and one search through it
(`view_server_call.py`) are beside this module; this one holds which views
are kept and when one is ended.
"""

from __future__ import annotations

import os
import select
import stat
import time
import weakref
from collections.abc import Callable, Sequence

import anyio

from term2.adapters.workspace import ripgrep
from term2.adapters.workspace.view_server_call import search
from term2.adapters.workspace.view_server_process import Server, end_now, start
from term2.ports.workspace_search import TIME_LIMIT

KEPT = 4  # servers kept at most (least recently used ended first)

Stamp = tuple[int, int, int, int] | None


def _stamp(path: str, follow: bool = False) -> Stamp:
    try:
        info = os.stat(path, follow_symlinks=follow)
    except OSError:
        return None
    return (stat.S_IFMT(info.st_mode), info.st_ino, info.st_size, info.st_mtime_ns)


def view_key(scope: str, rg: str, excludes: str | None) -> tuple[object, ...] | None:
    """Everything a kept view was made of, as it is now; None when the scope is not a folder (not kept).

    Compared at each call: a server whose key differs shows an older view
    (bind mounts hold the inode they were made on) and is ended.
    """
    scope_stamp = _stamp(scope, follow=True)
    if scope_stamp is None or scope_stamp[0] != stat.S_IFDIR:
        return None
    info = os.stat(scope)
    files, git = ripgrep.ignore_files_above(scope)
    return (
        scope, info.st_dev, info.st_ino, rg, _stamp(rg, follow=True), excludes,
        None if excludes is None else _stamp(excludes, follow=True),
        git, tuple((path, _stamp(path)) for path in files),
    )  # fmt: skip


class _MountTable:
    """Whether term2's mount table changed (POLLPRI on /proc/self/mountinfo): a kept view holds the
    mounts below the workspace as they were when it was made, a per-call view as they are."""

    def __init__(self) -> None:
        self._fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        self._poll = select.poll()
        self._poll.register(self._fd, select.POLLPRI | select.POLLERR)
        self._mask = select.POLLPRI | select.POLLERR
        self.changed()

    def changed(self) -> bool:
        return any(mask & self._mask for _fd, mask in self._poll.poll(0))

    def close(self) -> None:
        os.close(self._fd)


class KeptViews:
    """A few kept views (ADR 0037), each with its server; a call they cannot serve goes to a per-call view."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self.servers: list[Server] = []  # least recently used first
        self._lock: anyio.Lock | None = None
        self._failed_until = 0.0
        self._mounts: _MountTable | None = None
        self._closed = False
        self._finalizer = weakref.finalize(self, end_now, self.servers)

    async def run(
        self,
        rg_args: Sequence[str],
        place: ripgrep.Place,
        root: str,
        consume: Callable[[bytes], bool],
        *,
        time_limit: float = TIME_LIMIT,
        rg: str | None = None,
        bwrap: str = ripgrep.BWRAP,
        stdin: int | None = None,
    ) -> ripgrep.Finished:
        """What `ripgrep.run` does, through a kept view when one can serve the call."""
        started = time.monotonic()
        rg = ripgrep.rg_binary() if rg is None else rg
        ripgrep.check_binaries(rg, bwrap)
        server = await self._server(ripgrep.view_scope(place.top, root), rg, bwrap)
        if server is not None:
            server.calls += 1
            try:
                finished = await search(server, rg_args, place, consume, time_limit, started, stdin)
            finally:
                server.calls -= 1
                server.used = time.monotonic()
                if server.dead or (server.retired and server.calls == 0):
                    await self._drop(server)
            if finished is not None:
                return finished
        return await ripgrep.run(
            rg_args, place, root, consume, time_limit=time_limit, rg=rg, bwrap=bwrap, started=started, stdin=stdin
        )

    async def _server(self, scope: str, rg: str, bwrap: str) -> Server | None:
        if self._closed or time.monotonic() < self._failed_until:
            return None
        excludes = await ripgrep.global_excludes()
        if self._closed:  # closed while git was asked: nothing is opened or started after `aclose`
            return None
        if self._mounts is None:
            try:
                self._mounts = _MountTable()
            except OSError:
                return None  # no /proc: a changed mount could not be noticed, so nothing is kept
        if self._mounts.changed():
            for server in list(self.servers):
                await self._retire(server)
        key = view_key(scope, rg, excludes)
        if key is None:
            return None
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            for server in list(self.servers):
                if server.key == key and not server.retired and server.alive():
                    self.servers.remove(server)
                    self.servers.append(server)
                    return server
                if server.dead or server.key[0] == scope:
                    await self._retire(server)  # what this view was made of changed: its server is ended
            started = await start(scope, rg, excludes, bwrap, key)
            if started is not None and self._closed:  # `aclose` ran while it started: it would outlive it
                started.kill()
                await started.end()
                return None
            if started is None:
                self._failed_until = time.monotonic() + 60.0  # per-call views meanwhile, not a start each call
                return None
            self.servers.append(started)
            idle = [s for s in self.servers if s.calls == 0 and s is not started]
            for old in idle[: max(0, len(self.servers) - self.kept)]:
                await self._retire(old)
            return started

    async def _retire(self, server: Server) -> None:
        server.retired = True
        if server.calls == 0 or server.dead:
            await self._drop(server)

    async def _drop(self, server: Server) -> None:
        if server in self.servers:
            self.servers.remove(server)
            await server.end()

    async def aclose(self) -> None:
        """End every server (and the rg each runs); later calls use per-call views."""
        self._closed = True
        while self.servers:
            server = self.servers.pop()
            if server.calls:
                server.kill()
            await server.end()
        if self._mounts is not None:
            self._mounts.close()
            self._mounts = None
