"""A kept view's server process, from term2's side: started, talked to over its socket, ended (ADR 0037).

The server's process is started with `posix_spawn` and waited for through a
pidfd, not as an asyncio child: it outlives the event loop that started it
(tests run one loop per test) and is ended on `aclose`, after an idle while
by itself, on EOF of its socket, and with term2 (`--die-with-parent`). What
runs inside the view is `view_server_main.py`; which view to keep, and when
to end one, is `view_server.py`'s.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from term2.adapters.workspace import ripgrep

JAIL = ripgrep.JAIL
IDLE_SECONDS = 120.0  # a server with nothing to do ends itself after this long
START_LIMIT = 5.0  # seconds a server may take to say it is ready
END_LIMIT = 2.0  # seconds a server may take to end once its socket is closed, before SIGKILL
MESSAGE = 1 << 16
SERVER_SOURCE = ripgrep.VIEW_PROGRAM
# Once a view is made, a pid namespace costs nothing a call: ending the server then ends every rg.
_NAMESPACES = ("--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts")


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


def end_now(servers: list[Server]) -> None:
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


async def start(scope: str, rg: str, excludes: str | None, bwrap: str, key: tuple[object, ...]) -> Server | None:
    """A server that said it is ready, or None: the caller then searches in a per-call view, never unconfined."""
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
