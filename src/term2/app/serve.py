"""`term2 acp`: wire the stdio connection, serve until EOF or a signal, shut down in bounded time.

The protocol server answers `initialize` as soon as the process is up; the
application behind it (store, tools, the DI container) is built in a worker
thread meanwhile, and litellm is imported only once a session exists.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping

import anyio
import anyio.to_thread

from term2 import __version__
from term2.adapters.acp.connection import JsonRpcConnection
from term2.adapters.acp.server import AcpServer, AgentInfo, Services
from term2.adapters.acp.stdio import StdioTransport, guard_stdout
from term2.app.config import Settings

SHUTDOWN_GRACE_S = 2.0


class _Application:
    """Builds the services once, off the event loop, and closes them at the end."""

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self._settings = settings
        self._env = env
        self._ready = anyio.Event()
        self._services: Services | None = None
        self._error: BaseException | None = None
        self._container: object | None = None
        self._preloading = False

    async def build(self) -> None:
        try:
            self._container, self._services = await anyio.to_thread.run_sync(self._build_sync)
        except BaseException as exc:  # reported to every request that needs the services
            self._error = exc
            raise
        finally:
            self._ready.set()

    def _build_sync(self) -> tuple[object, Services]:
        from term2.app.container import build_container, services_of

        container = build_container(self._settings, self._env)
        return container, services_of(container)

    async def services(self) -> Services:
        await self._ready.wait()
        if self._services is None:
            from term2.adapters.acp.errors import INTERNAL_ERROR, RpcError

            raise RpcError(INTERNAL_ERROR, f"term2 failed to start: {self._error}")
        return self._services

    def preload_llm(self, tg: anyio.abc.TaskGroup) -> None:
        if not self._preloading and self._container is not None:
            self._preloading = True
            from term2.app.container import preload_llm

            tg.start_soon(preload_llm, self._container)

    async def aclose(self) -> None:
        if self._container is not None:
            from term2.app.container import shutdown

            await shutdown(self._container)


async def _serve(settings: Settings, env: Mapping[str, str], protocol_fd: int) -> None:
    transport = StdioTransport(sys.stdin.buffer, protocol_fd)
    app = _Application(settings, env)
    async with anyio.create_task_group() as tg:
        server = AcpServer(
            AgentInfo("term2", "term2", __version__),
            v2_enabled=settings.acp_v2,
            services=app.services,
            on_session=lambda: app.preload_llm(tg),
        )
        connection = JsonRpcConnection(transport, server)
        server.attach(connection)
        tg.start_soon(_build_quietly, app)
        tg.start_soon(_watch_signals, tg.cancel_scope)
        await connection.serve()
        tg.cancel_scope.cancel()
    with anyio.move_on_after(SHUTDOWN_GRACE_S, shield=True):
        await app.aclose()
        await transport.aclose()


async def _build_quietly(app: _Application) -> None:
    import structlog

    try:
        await app.build()
    except Exception:
        structlog.get_logger("term2").exception("startup failed")


async def _watch_signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


def run_acp(settings: Settings, env: Mapping[str, str]) -> int:
    protocol_fd = guard_stdout()
    anyio.run(_serve, settings, env, protocol_fd, backend="asyncio")
    return 0


def exit_now(code: int) -> None:
    """Skip interpreter teardown (about a second once litellm is loaded); all output is flushed."""
    sys.stderr.flush()
    os._exit(code)
