"""The ACP agent side: version negotiation and dispatch to the session methods.

`initialize` is answered from this light module alone, before the application
behind it has finished loading; every other method waits for the services.
v1 and v2 share the use cases but never each other's wire shapes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from term2.adapters.acp.connection import Handler, JsonRpcConnection, NotificationHandler
from term2.adapters.acp.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, SERVER_BUSY, RpcError
from term2.adapters.acp.negotiation import ClientCaps, client_caps, negotiate
from term2.domain.errors import Busy, InvalidInput, NotFound, StoreUnavailable, Term2Error
from term2.support.deferred_log import bind_contextvars, get_logger

if TYPE_CHECKING:
    from term2.adapters.acp.session_methods import SessionMethods
    from term2.adapters.acp.wire_types import v1, v2

SESSION_METHODS = frozenset(
    {
        "session/new",
        "session/load",
        "session/list",
        "session/resume",
        "session/close",
        "session/delete",
        "session/prompt",
        "session/set_config_option",
        "session/set_mode",
        "authenticate",
        "logout",
    }
)
V2_ONLY: frozenset[str] = frozenset()
# v2's page has no pickers, no modes (ADR 0043, 0044), no delete (ADR 0046) and no auth methods (ADR 0047)
V1_ONLY = frozenset(
    {"session/load", "session/set_config_option", "session/set_mode", "session/delete", "authenticate", "logout"}
)

log = get_logger("term2.acp")

# Builds the session methods once the application is ready (see term2.app.entrypoints.serve).
# (connection, negotiated version, what the client said it can do)
MethodsFactory = Callable[[JsonRpcConnection, int, ClientCaps], Awaitable["SessionMethods"]]


@dataclass(frozen=True, slots=True)
class AgentInfo:
    name: str
    title: str
    version: str


def map_domain_error(exc: Term2Error) -> RpcError:
    if isinstance(exc, Busy):
        return RpcError(SERVER_BUSY, str(exc))
    if isinstance(exc, (InvalidInput, NotFound)):
        return RpcError(INVALID_PARAMS, str(exc))
    if isinstance(exc, StoreUnavailable):
        return RpcError(INTERNAL_ERROR, f"session store unavailable: {exc}")
    return RpcError(INTERNAL_ERROR, str(exc))


class AcpServer:
    def __init__(self, info: AgentInfo, v2_enabled: bool, methods: MethodsFactory, images: bool = False) -> None:
        self._info = info
        self._images = images  # the launcher's model takes images: v1 advertises `promptCapabilities.image`
        self._v2_enabled = v2_enabled
        self._methods_factory = methods
        self._connection: JsonRpcConnection | None = None
        self._methods: SessionMethods | None = None
        self._making: anyio.Lock | None = None
        self.version: int | None = None
        self.client = ClientCaps()

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
            return self._traced(self._initialize, method)
        if method not in SESSION_METHODS:
            return None
        if self.version is None:
            return self._not_initialized
        if (self.version == 2 and method in V1_ONLY) or (self.version == 1 and method in V2_ONLY):
            return None
        return self._traced(self._delegate(method), method)

    def notification_handler(self, method: str) -> NotificationHandler | None:
        if method == "session/cancel" and self.version is not None:
            return self._cancel
        return None

    # -- plumbing ---------------------------------------------------------
    def _traced(self, handler: Handler, method: str) -> Handler:
        """Bind a W3C traceparent from `_meta` into this request's log context."""

        async def run(params: Any) -> Any:
            meta = params.get("_meta") if isinstance(params, dict) else None
            if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
                bind_contextvars(traceparent=meta["traceparent"])
            log.debug("request", method=method)
            try:
                return await handler(params)
            except Term2Error as exc:
                raise map_domain_error(exc) from None

        return run

    def _delegate(self, method: str) -> Handler:
        async def call(params: Any) -> Any:
            methods = await self._session_methods()
            return await methods.table()[method](params)

        return call

    async def _session_methods(self) -> SessionMethods:
        """Made once per connection, however many requests arrive while the application loads."""
        if self._methods is None:
            if self._making is None:
                self._making = anyio.Lock()  # made here: inside the event loop
            async with self._making:
                if self._methods is None:
                    assert self._connection is not None and self.version is not None
                    self._methods = await self._methods_factory(self._connection, self.version, self.client)
        return self._methods

    async def _not_initialized(self, params: Any) -> Any:
        raise RpcError(INVALID_REQUEST, "Not initialized: send initialize first")

    async def _cancel(self, params: Any) -> None:
        methods = await self._session_methods()
        await methods.cancel(params)

    # -- initialize -------------------------------------------------------
    @property
    def info(self) -> dict[str, str]:
        return {"name": self._info.name, "title": self._info.title, "version": self._info.version}

    def initialized(self, version: int, client: ClientCaps | None = None) -> None:
        """Adopt a version negotiated before the server existed (the launcher's early answer)."""
        self.version = version
        self.client = client or ClientCaps()

    async def _initialize(self, params: Any) -> v1.InitializeResponse | v2.InitializeResponse:
        if self.version is not None:
            raise RpcError(INVALID_REQUEST, "initialize was already called on this connection")
        self.version, result = negotiate(params, self._v2_enabled, self.info, self._images)
        self.client = client_caps(params, self.version)
        log.info("protocol negotiated", protocol_version=self.version)  # the log file's start, completed
        return result
