"""`term2 acp`: wire the stdio connection, serve until EOF or a signal, shut down in bounded time.

The protocol server answers `initialize` as soon as the process is up; the
application behind it is built in a worker thread meanwhile, in two steps.
First the session use case (the DI container, the store, parameter checks):
from then on `session/new`, `session/list` and `session/close` are answered,
and wait for nothing more. Then at once, without waiting for a session (ADR
0048), what a turn needs (the prompt use case, tools, sandbox, the model's
adapter, the wire renderers) and, for a natively served model, its HTTP
client and TLS context: `session/prompt` and replays wait for the turn part.
Editors open a session as the thread opens and users type for seconds after
that, so the warming is done by the time the first prompt comes. Once a
session exists, a connection to the model's endpoint is opened ahead, so the
first request does not pay the handshakes. litellm is imported only once a
session exists, and only for a model that no native wire serves.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from term2 import __version__
from term2.adapters.acp.connection import JsonRpcConnection
from term2.adapters.acp.errors import INTERNAL_ERROR, RpcError
from term2.adapters.acp.negotiation import ClientCaps
from term2.adapters.acp.server import AcpServer, AgentInfo
from term2.adapters.acp.stdio import StdioTransport
from term2.app.config import Settings
from term2.app.entrypoints.child_watcher import use_pidfds
from term2.app.entrypoints.lean_imports import import_lean
from term2.support import deferred_log

if TYPE_CHECKING:
    from term2.adapters.acp.session_methods import SessionMethods
    from term2.adapters.acp.turns import Turns
    from term2.app.entrypoints.container import Application
    from term2.app.prompting import PromptService

SHUTDOWN_GRACE_S = 2.0
# A session request that came with `initialize` is answered before the turn part starts loading (the
# two would share one interpreter); this bounds the wait if that request opens no session (a list).
FIRST_SESSION_FIRST_S = 2.0


class _Startup:
    """Builds the application once, off the event loop, in two steps, and closes it at the end."""

    def __init__(self, settings: Settings, env: Mapping[str, str], tg: TaskGroup) -> None:
        self._settings = settings
        self._env = env
        self._tg = tg
        self._sessions_ready = anyio.Event()
        self._turns_ready = anyio.Event()
        self._warmed = anyio.Event()  # the turn part and, for a native wire, the model's HTTP client
        self._app: Application | None = None
        self._prompts: PromptService | None = None
        self._error: BaseException | None = None
        self._keeping = False
        self._session_asked = False  # a session request waits (or waited) for the session part
        self._session_opened = anyio.Event()
        self._after_turn_warmed = False

    async def build(self) -> None:
        # Abandoned on shutdown: an import cannot be interrupted, and exit must not wait for it.
        try:
            self._app = await anyio.to_thread.run_sync(self._build_sessions, abandon_on_cancel=True)
            await self._tg.start(self._app.background)  # MCP servers' supervisors, before any session exists
        except Exception as exc:
            self._failed_with(exc)
        finally:
            _collect_from_now()
            self._sessions_ready.set()
        try:
            if self._app is not None:
                if self._session_asked:  # answer it first: it has the interpreter to itself
                    with anyio.move_on_after(FIRST_SESSION_FIRST_S):
                        await self._session_opened.wait()
                await anyio.to_thread.run_sync(_import_turn_modules, abandon_on_cancel=True)
                self._prompts = await anyio.to_thread.run_sync(self._app.prompts, abandon_on_cancel=True)
        except Exception as exc:
            self._failed_with(exc)
        finally:
            self._turns_ready.set()
        try:
            if self._app is not None and self._prompts is not None and self._app.native_wire():
                await self._app.preload()  # litellm's import waits for a session (`_after_session`)
        finally:
            self._warmed.set()

    def _failed_with(self, exc: Exception) -> None:
        """Kept for every request that needs what failed (it is told why), and logged once."""
        self._error = exc
        deferred_log.get_logger("term2").exception("startup failed")

    def _build_sessions(self) -> Application:
        _import_dependency_injector()
        # Loaded here, off the event loop: these are what the first session request needs.
        from term2.adapters.acp import session_methods  # noqa: F401
        from term2.app.entrypoints.container import build_application

        return build_application(self._settings, self._env)

    def _failed(self) -> RpcError:
        return RpcError(INTERNAL_ERROR, f"term2 failed to start: {self._error}")

    async def methods(self, connection: JsonRpcConnection, version: int, client: ClientCaps) -> SessionMethods:
        """The session methods for the negotiated version, once sessions can be served."""
        self._session_asked = True
        await self._sessions_ready.wait()
        if self._app is None:
            raise self._failed()
        from term2.adapters.acp.session_methods import SessionMethods

        turns: Turns | None = None
        making = anyio.Lock()  # one sink and one approver per connection, however many ask at once

        async def get_turns() -> Turns:
            nonlocal turns
            async with making:
                if turns is None:
                    turns = await self._turns(connection, version, client)
            return turns

        return SessionMethods(
            self._app.sessions,
            version,
            get_turns,
            on_session=self._on_session,
            on_turn_end=self._on_turn_end,
            config=self._app.config,
            notify=connection.notify,
            auth=self._app.auth,
        )

    async def _turns(self, connection: JsonRpcConnection, version: int, client: ClientCaps) -> Turns:
        await self._turns_ready.wait()
        if self._prompts is None:
            raise self._failed()
        from term2.adapters.acp.approval_bridge import AcpApprover
        from term2.adapters.acp.client_files import AcpClientFiles
        from term2.adapters.acp.turns import Turns
        from term2.adapters.acp.updates import AcpUpdateSink
        from term2.adapters.acp.wire_v1 import V1Renderer
        from term2.adapters.acp.wire_v2 import V2Renderer

        renderer = (
            V2Renderer()
            if version == 2
            else V1Renderer(
                compaction=client.compaction, display_terminals=client.terminal_output, notices=client.notices
            )
        )
        sink = AcpUpdateSink(connection, renderer)
        files = AcpClientFiles(connection, client) if client.fs_read or client.fs_write else None
        return Turns(self._prompts, sink, AcpApprover(connection, version, sink), files)

    def _on_session(self) -> None:
        """A session was opened: prepare the model's adapter if not yet done, and keep its connection open."""
        self._session_opened.set()
        if not self._keeping:
            self._keeping = True
            self._tg.start_soon(self._after_session)

    def _on_turn_end(self) -> None:
        """A turn is over: make what the first answer did not wait for while the user reads it (ADR 0053):
        the history's reading schema (pydantic's import and the schema, ~55 ms), which the next turn's read
        of what this one recorded needs, and the sandbox, which a command needs."""
        if not self._after_turn_warmed:
            self._after_turn_warmed = True
            self._tg.start_soon(self._warm_after_turn)

    async def _warm_after_turn(self) -> None:
        from term2.adapters.store import codec

        warms = [codec.warm] if self._app is None else [codec.warm, self._app.warm_after_turn]
        for warm in warms:
            try:
                await anyio.to_thread.run_sync(warm, abandon_on_cancel=True)
            except Exception:  # what needs it makes it itself, and says why if it cannot
                deferred_log.get_logger("term2").warning("warm-up after the first turn failed", exc_info=True)

    async def _after_session(self) -> None:
        """Runs until the kept connection's idle window ends; the next session starts it again."""
        try:
            await self._warmed.wait()
            if self._app is not None and self._prompts is not None:
                await self._app.preload()  # done already for a native wire; litellm's import otherwise
                await self._app.keep_connected()
        finally:
            self._keeping = False

    async def aclose(self) -> None:
        if self._app is not None:
            await self._app.shutdown()


def _collect_from_now() -> None:
    """`term2 acp` starts with the garbage collector off (`term2.__main__`): what start-up made so far lives
    as long as the process, so it is frozen out of every later collection, and collecting starts again
    before the first session is answered (ADR 0052)."""
    gc.freeze()
    gc.enable()


def _import_turn_modules() -> None:
    """The wire renderers and the approval bridge, which a connection's first prompt or replay
    builds, and httpx without its command-line client (see `lean_imports`) before an adapter imports it.
    Not the history's reading schema nor the sandbox: a turn only writes history and may run no command;
    both are made once the first turn is over (`_Startup._on_turn_end`, ADR 0053)."""
    deferred_log.load()  # structlog, and start-up's lines kept until the first session was answered (ADR 0053)
    import_lean("httpx")
    from term2.adapters.acp import approval_bridge, updates, wire_v1, wire_v2  # noqa: F401


def _import_dependency_injector() -> None:
    """The application's libraries, without their optional parts (see `lean_imports`)."""
    for module in ("dependency_injector.providers", "dependency_injector.containers"):
        import_lean(module)


async def _serve(
    settings: Settings,
    env: Mapping[str, str],
    protocol_fd: int,
    pending: bytes | None,
    version: int | None,
    client: ClientCaps | None,
    images: bool,
) -> None:
    use_pidfds()
    transport = StdioTransport(sys.stdin.buffer, protocol_fd, pending=pending)
    async with anyio.create_task_group() as tg:
        app = _Startup(settings, env, tg)
        info = AgentInfo("term2", "term2", __version__)
        server = AcpServer(info, settings.acp_v2, app.methods, images=images)
        if version is not None:
            server.initialized(version, client)
        connection = JsonRpcConnection(transport, server)
        server.attach(connection)
        tg.start_soon(app.build)
        tg.start_soon(_watch_signals, tg.cancel_scope)
        await connection.serve()
        tg.cancel_scope.cancel()
    with anyio.move_on_after(SHUTDOWN_GRACE_S, shield=True):
        await app.aclose()
        await transport.aclose()
    exit_now(0)


async def _watch_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


def run_acp(
    settings: Settings,
    env: Mapping[str, str],
    protocol_fd: int,
    pending: bytes | None = None,
    version: int | None = None,
    client: ClientCaps | None = None,
    *,
    images: bool,
) -> None:
    """Serve on `protocol_fd` (see `guard_stdout`); `pending` is a first line already read
    from stdin, `version` one already negotiated by the launcher's early answer (and
    `client` what that client said it can do); `images`, whether the model takes images, as
    the launcher found it for `initialize` (a second catalog lookup would delay the first session)."""
    anyio.run(_serve, settings, env, protocol_fd, pending, version, client, images, backend="asyncio")


def exit_now(code: int) -> None:
    """Leave without interpreter teardown (about a second once litellm is loaded) and
    without waiting for a worker thread still importing; all output is flushed by now, and the log
    lines start-up kept are written if nothing loaded structlog yet."""
    try:
        deferred_log.load()
    except Exception:  # nothing about the log may keep the process from leaving
        pass
    sys.stderr.flush()
    os._exit(code)
