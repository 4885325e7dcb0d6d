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

The server's process is started with `posix_spawn` and waited for through a
pidfd, not as an asyncio child: it outlives the event loop that started it
(tests run one loop per test) and is ended on `aclose`, after an idle while
by itself, on EOF of its socket, and with term2 (`--die-with-parent`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import socket
import stat
import struct
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from term2.adapters.workspace import ripgrep
from term2.ports.workspace_search import TIME_LIMIT

JAIL = ripgrep.JAIL
IDLE_SECONDS = 120.0  # a server with nothing to do ends itself after this long
START_LIMIT = 5.0  # seconds a server may take to say it is ready
END_LIMIT = 2.0  # seconds a server may take to end once its socket is closed, before SIGKILL
KEPT = 4  # servers kept at most (least recently used ended first)
REQUEST_LIMIT = 60 * 1024  # a request past this (a huge pattern) runs in a per-call view
MESSAGE = 1 << 16
SERVER_SOURCE = ripgrep.VIEW_PROGRAM
# Once a view is made, a pid namespace costs nothing a call: ending the server then ends every rg.
_NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts")

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


def server_args(scope: str, rg: str, excludes: str | None, bwrap: str, fd: int) -> list[str]:
    """The kept view: the server in its own namespaces (`ripgrep.jail_args`), told its socket and idle time."""
    args = ripgrep.jail_args(scope, rg, excludes, bwrap, SERVER_SOURCE.read_text(), _NAMESPACES)
    return [*args, str(fd), JAIL, str(int(IDLE_SECONDS * 1000))]


@dataclass(eq=False)
class Server:
    """One kept view's server: its process, its socket, and the replies not yet taken."""

    key: tuple[object, ...]
    pid: int
    pidfd: int
    sock: socket.socket
    used: float = field(default_factory=time.monotonic)
    calls: int = 0
    dead: bool = False
    retired: bool = False
    _inbox: dict[bytes, bytes] = field(default_factory=dict)
    _reading: bool = False
    _wake: anyio.Event | None = None

    def send(self, data: bytes, fds: Sequence[int] = ()) -> bool:
        """One message, or False: the server is gone, or its socket's buffer is full (a request then
        runs in a per-call view; a kill not sent ends the whole server once its reply is overdue)."""
        if self.dead:
            return False
        try:
            socket.send_fds(self.sock, [data], list(fds)) if fds else self.sock.send(data)
        except BlockingIOError:
            return False
        except OSError:
            self.dead = True
            return False
        return True

    async def receive(self) -> bytes | None:
        while not self.dead:
            try:
                data = self.sock.recv(MESSAGE)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.sock)
                except (anyio.ClosedResourceError, ValueError, OSError):  # closed under it (`end`)
                    break
                continue
            except OSError:
                break
            if data:
                return data
            break
        self.dead = True
        return None

    async def reply(self, ident: bytes) -> bytes | None:
        """The server's answer to request `ident` (`X` status, `F` why), or None once the server is gone.

        Several calls share the socket: whichever waits first reads one
        message and hands it to its addressee; the others wait for that.
        """
        while True:
            if ident in self._inbox:
                return self._inbox.pop(ident)
            if self.dead:
                return None
            if self._reading:
                if self._wake is None:
                    self._wake = anyio.Event()
                await self._wake.wait()
                continue
            self._reading = True
            try:
                message = await self.receive()
                if message is not None and message[:1] in (b"X", b"F"):
                    self._inbox[message[1:9]] = message
            finally:
                self._reading = False
                wake, self._wake = self._wake, None
                if wake is not None:
                    wake.set()

    def alive(self) -> bool:
        """False once its process ended (an idle server ends itself): its pidfd turns readable."""
        if not self.dead:
            poller = select.poll()  # not select(): term2 may hold over 1,024 descriptors
            poller.register(self.pidfd, select.POLLIN)
            if poller.poll(0):
                self.dead = True
        return not self.dead

    def kill(self) -> None:
        """End the server at once; its pid namespace takes every rg with it.

        Once `end` closed the pidfd its number may name another process's
        (a search still unwinding after `aclose` calls this): then nothing is sent.
        """
        self.dead = True
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    async def end(self) -> None:
        """Close its socket (it kills its rg and leaves), wait a little, then SIGKILL; reap it."""
        self.dead = True
        if self.pidfd < 0:
            return  # ended already
        if self.sock.fileno() >= 0:
            anyio.notify_closing(self.sock)
            self.sock.close()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(END_LIMIT):
                await anyio.wait_readable(self.pidfd)
            if not _reaped(self.pid):
                self.kill()
                await anyio.wait_readable(self.pidfd)
                _reaped(self.pid)
        pidfd, self.pidfd = self.pidfd, -1
        os.close(pidfd)


def _reaped(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def _end_now(servers: list[Server]) -> None:
    """When the pool is dropped unclosed: SIGKILL and reap, without an event loop."""
    for server in servers:
        server.sock.close()
        if server.pidfd < 0:
            continue
        server.kill()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(server.pid, 0)
        os.close(server.pidfd)
        server.pidfd = -1
    servers.clear()


async def _start(scope: str, rg: str, excludes: str | None, bwrap: str, key: tuple[object, ...]) -> Server | None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    fd = 3
    if theirs.fileno() == fd:  # a dup2 onto itself would keep close-on-exec
        moved = theirs.dup()
        theirs.close()
        theirs = moved
    try:
        args = server_args(scope, rg, excludes, bwrap, fd)
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            actions = [(os.POSIX_SPAWN_DUP2, null, n) for n in (0, 1, 2)]  # never term2's stdout (JSON-RPC)
            actions.append((os.POSIX_SPAWN_DUP2, theirs.fileno(), fd))  # a dup2 clears close-on-exec
            pid = os.posix_spawn(args[0], args, {"PATH": "/usr/bin:/bin"}, file_actions=actions, setsid=True)
        finally:
            os.close(null)
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    ours.setblocking(False)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        ours.close()
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    server = Server(key, pid, pidfd, ours)
    hello = None
    try:
        with anyio.move_on_after(START_LIMIT):
            hello = await server.receive()
    finally:
        if hello != b"H":  # no hello in time, a failed chroot, or the caller cancelled while it started
            server.kill()  # it serves nothing yet: nothing to let finish
            await server.end()
    return server if hello == b"H" else None


@dataclass(slots=True)
class _Call:
    finished: ripgrep.Finished
    read: int = 0
    replied: bytes | None = None


async def _search(
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
        self._finalizer = weakref.finalize(self, _end_now, self.servers)

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
                finished = await _search(server, rg_args, place, consume, time_limit, started, stdin)
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
            started = await _start(scope, rg, excludes, bwrap, key)
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
