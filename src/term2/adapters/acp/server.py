"""The ACP agent side: version negotiation and the method table of each version.

`initialize` is answered from this module alone, before the application
behind it has finished loading; every other method waits for the services.
v1 and v2 share the use cases but never each other's wire shapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import structlog
from structlog.contextvars import bind_contextvars

from term2.adapters.acp import params as p
from term2.adapters.acp.approval_bridge import AcpApprover
from term2.adapters.acp.connection import AfterReply, Handler, JsonRpcConnection, NotificationHandler
from term2.adapters.acp.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    SERVER_BUSY,
    RpcError,
)
from term2.adapters.acp.updates import AcpUpdateSink
from term2.adapters.acp.wire_v1 import V1Renderer
from term2.adapters.acp.wire_v2 import V2Renderer
from term2.app.prompting import PromptService
from term2.app.replay import replay
from term2.app.sessions import SessionRegistry, SessionService
from term2.domain.errors import Busy, InvalidInput, NotFound, StoreUnavailable, Term2Error
from term2.domain.session import Session
from term2.domain.turn import StopReason
from term2.ports.updates import StateChanged

log = structlog.get_logger("term2.acp")

V1_METHODS = ("session/new", "session/load", "session/list", "session/resume", "session/close", "session/prompt")
V2_METHODS = ("session/new", "session/list", "session/resume", "session/close", "session/prompt")


@dataclass(frozen=True, slots=True)
class Services:
    sessions: SessionService
    prompts: PromptService
    registry: SessionRegistry


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    title: str
    version: str


def _map_domain_error(exc: Term2Error) -> RpcError:
    if isinstance(exc, Busy):
        return RpcError(SERVER_BUSY, str(exc))
    if isinstance(exc, (InvalidInput, NotFound)):
        return RpcError(INVALID_PARAMS, str(exc))
    if isinstance(exc, StoreUnavailable):
        return RpcError(INTERNAL_ERROR, f"session store unavailable: {exc}")
    return RpcError(INTERNAL_ERROR, str(exc))


def _session_info(session: Session) -> dict[str, Any]:
    info: dict[str, Any] = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "updatedAt": session.updated_at.isoformat(),
    }
    if session.title:
        info["title"] = session.title
    return info


def _refuse_extras(mcp_servers: list[Any] | None, directories: list[Any] | None, method: str) -> None:
    if mcp_servers:
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: term2 does not support MCP servers")
    if directories:
        raise RpcError(
            INVALID_PARAMS, f"Invalid params for {method}: term2 does not support additionalDirectories"
        )


class AcpServer:
    def __init__(
        self,
        info: AgentInfo,
        v2_enabled: bool,
        services: Callable[[], Awaitable[Services]],
        on_session: Callable[[], None] | None = None,
    ) -> None:
        self._info = info
        self._v2_enabled = v2_enabled
        self._services = services
        self._on_session = on_session or (lambda: None)
        self._connection: JsonRpcConnection | None = None
        self.version: int | None = None
        self._sink: AcpUpdateSink | None = None
        self._approver: AcpApprover | None = None

    def attach(self, connection: JsonRpcConnection) -> None:
        self._connection = connection

    # -- Dispatcher -------------------------------------------------------
    def is_inline(self, method: str) -> bool:
        return method == "initialize"

    def batches_allowed(self) -> bool:
        return self.version == 2

    def batchable(self, method: str) -> bool:
        return method not in ("initialize", "session/prompt")

    def request_handler(self, method: str) -> Handler | None:
        if method == "initialize":
            return self._traced(self._initialize)
        if self.version is None:
            if method in V1_METHODS:
                return self._not_initialized
            return None
        table: dict[str, Handler] = {
            "session/new": self._new,
            "session/list": self._list,
            "session/resume": self._resume,
            "session/close": self._close,
            "session/prompt": self._prompt,
        }
        if self.version == 1:
            table["session/load"] = self._load
        handler = table.get(method)
        return self._traced(handler) if handler else None

    def notification_handler(self, method: str) -> NotificationHandler | None:
        if method == "session/cancel" and self.version is not None:
            return self._cancel
        return None

    # -- plumbing ---------------------------------------------------------
    def _traced(self, handler: Handler) -> Handler:
        async def run(params: Any) -> Any:
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
                bind_contextvars(traceparent=meta["traceparent"])
            try:
                return await handler(params)
            except Term2Error as exc:
                raise _map_domain_error(exc) from None

        return run

    async def _not_initialized(self, params: Any) -> Any:
        raise RpcError(INVALID_REQUEST, "Not initialized: send initialize first")

    @property
    def sink(self) -> AcpUpdateSink:
        assert self._sink is not None
        return self._sink

    # -- initialize -------------------------------------------------------
    async def _initialize(self, params: Any) -> dict[str, Any]:
        if self.version is not None:
            raise RpcError(INVALID_REQUEST, "initialize was already called on this connection")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(requested, int) or isinstance(requested, bool):
            raise RpcError(INVALID_PARAMS, "Invalid params for initialize: protocolVersion must be an integer")
        if requested < 1:
            raise RpcError(
                INVALID_PARAMS, f"Unsupported protocol version {requested}: term2 speaks ACP 1 and 2"
            )
        version = 2 if requested >= 2 and self._v2_enabled else 1
        self._activate(version)
        info = {"name": self._info.name, "title": self._info.title, "version": self._info.version}
        if version == 2:
            return {"protocolVersion": 2, "info": info, "capabilities": {"session": {}}}
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": info,
        }

    def _activate(self, version: int) -> None:
        assert self._connection is not None
        self.version = version
        self._sink = AcpUpdateSink(self._connection, V2Renderer() if version == 2 else V1Renderer())

    async def _approver_for(self, services: Services) -> AcpApprover:
        if self._approver is None:
            assert self._connection is not None and self.version is not None
            self._approver = AcpApprover(self._connection, self.version, self.sink, services.registry)
        return self._approver

    # -- sessions ---------------------------------------------------------
    async def _new(self, params: Any) -> dict[str, Any]:
        args = p.parse(p.NewSession, params, "session/new")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/new")
        services = await self._services()
        opened = await services.sessions.new(args.cwd)
        self._on_session()
        return {"sessionId": opened.session.session_id}

    async def _list(self, params: Any) -> dict[str, Any]:
        args = p.parse(p.ListSessions, params, "session/list")
        services = await self._services()
        page = await services.sessions.list(args.cwd, args.cursor)
        result: dict[str, Any] = {"sessions": [_session_info(s) for s in page.sessions]}
        if page.next_cursor is not None:
            result["nextCursor"] = page.next_cursor
        return result

    async def _resume(self, params: Any) -> dict[str, Any]:
        args = p.parse(p.ResumeSession, params, "session/resume")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/resume")
        replay_from = args.replay_from if self.version == 2 else None
        if replay_from is not None and replay_from.type != "start":
            raise RpcError(
                INVALID_PARAMS, f"Invalid params for session/resume: unsupported replayFrom type {replay_from.type!r}"
            )
        services = await self._services()
        opened = await services.sessions.reopen(args.session_id, args.cwd)
        self._on_session()
        if replay_from is not None:
            await self._replay(services, opened.session.session_id)
        return {}

    async def _load(self, params: Any) -> dict[str, Any]:
        args = p.parse(p.ResumeSession, params, "session/load")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/load")
        services = await self._services()
        opened = await services.sessions.reopen(args.session_id, args.cwd)
        self._on_session()
        await self._replay(services, opened.session.session_id)
        return {}

    async def _replay(self, services: Services, session_id: str) -> None:
        async for event in replay(services.sessions.history(session_id)):
            await self.sink.replay(session_id, event)

    async def _close(self, params: Any) -> dict[str, Any]:
        args = p.parse(p.SessionRef, params, "session/close")
        services = await self._services()
        if not await services.sessions.close(args.session_id):
            raise RpcError(INTERNAL_ERROR, "the session's active work did not settle; the session was closed anyway")
        return {}

    # -- prompts ----------------------------------------------------------
    async def _prompt(self, params: Any) -> Any:
        args = p.parse(p.Prompt, params, "session/prompt")
        blocks = p.prompt_blocks(args.prompt)
        services = await self._services()
        approver = await self._approver_for(services)
        opened = services.prompts.admit(args.session_id)
        run = lambda: services.prompts.run(opened, blocks, self.sink, approver)  # noqa: E731
        if self.version == 2:
            try:
                await self.sink.send(args.session_id, StateChanged("running"))
            except BaseException:
                services.prompts.release(opened)
                raise
            return AfterReply({}, run)
        outcome = await run()
        if outcome.stop_reason is StopReason.ERROR:
            raise RpcError(INTERNAL_ERROR, f"The turn failed: {outcome.error}")
        return {"stopReason": outcome.stop_reason.value}

    async def _cancel(self, params: Any) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
            return
        services = await self._services()
        services.prompts.cancel(params["sessionId"])
