"""A JSON-RPC 2.0 connection over a Transport: parsing, concurrent dispatch,
one ordered writer, and correlation of our own requests to the client.

Nothing here knows ACP; methods are looked up through a Dispatcher that the
ACP server provides and may change once `initialize` has chosen a version.
The envelopes are typed here; the payloads are typed by whoever builds them,
with the ACP schema's definitions (the error object and ids are the same in v1 and v2).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

import anyio
from anyio.abc import TaskGroup

from term2.adapters.acp.envelopes import ErrorReply, ResultReply, encode, error_reply, result_reply, valid_id
from term2.adapters.acp.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    ConnectionClosed,
    RpcError,
)
from term2.domain.mended_text import may_hold_lone_surrogates, mend
from term2.ports.transport import LineTooLong, Transport
from term2.support.deferred_log import get_logger

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types.v1 import CancelRequestNotification, RequestId

log = get_logger("term2.rpc")

Handler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[Any], Awaitable[None]]
_NO_ID = object()
Continuation = Callable[[], Coroutine[Any, Any, object]]


class _Request(TypedDict):
    jsonrpc: Literal["2.0"]
    id: int
    method: str
    params: Mapping[str, object]


class _Notification(TypedDict):
    jsonrpc: Literal["2.0"]
    method: str
    params: Mapping[str, object]


Reply = ResultReply | ErrorReply
Message = Reply | _Request | _Notification


class Dispatcher(Protocol):
    def request_handler(self, method: str) -> Handler | None: ...

    def notification_handler(self, method: str) -> NotificationHandler | None: ...

    def is_inline(self, method: str) -> bool:
        """Requests that must finish before the next line is read (e.g. initialize)."""
        ...

    def batches_allowed(self) -> bool: ...

    def batchable(self, method: str) -> bool:
        """Methods whose replies must be ordered against later output are refused in batches."""
        ...


class AfterReply:
    """A handler result whose continuation runs once the reply is on the wire.

    ACP v2 acknowledges a prompt before the turn runs; sending the ack first
    and only then starting the turn keeps the order the spec promises.
    """

    def __init__(self, result: Mapping[str, object], then: Continuation) -> None:
        self.result = result
        self.then = then


@dataclass
class _Pending:
    event: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: RpcError | ConnectionClosed | None = None


class JsonRpcConnection:
    def __init__(self, transport: Transport, dispatcher: Dispatcher) -> None:
        self._transport = transport
        self._dispatcher = dispatcher
        self._ids = itertools.count()
        self._pending: dict[RequestId, _Pending] = {}
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}
        self._closed = False
        self._tg: TaskGroup | None = None

    # -- outgoing ---------------------------------------------------------
    async def notify(self, method: str, params: Mapping[str, object]) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Mapping[str, object]) -> Any:
        """Send a request to the client and wait for its answer.

        Raises RpcError for an error answer and ConnectionClosed when the
        client disappears first; cancelling the caller withdraws the request
        with `$/cancel_request`.
        """
        if self._closed:
            raise ConnectionClosed("client disconnected")
        request_id = next(self._ids)
        pending = _Pending()
        self._pending[request_id] = pending
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            await pending.event.wait()
        except BaseException:
            if not pending.event.is_set() and not self._closed:
                with anyio.CancelScope(shield=True):
                    cancel: CancelRequestNotification = {"requestId": request_id}
                    await self.notify("$/cancel_request", cancel)
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def _send(self, message: Message | list[Reply]) -> None:
        await self._transport.send(encode(message))

    # -- incoming ---------------------------------------------------------
    async def serve(self) -> None:
        """Read until the client closes stdin; in-flight handlers are cancelled after."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                while True:
                    try:
                        line = await self._transport.receive()
                    except LineTooLong as exc:
                        await self._send(error_reply(None, RpcError(INVALID_REQUEST, str(exc))))
                        continue
                    if line is None:
                        break
                    if line.strip():
                        await self._on_line(line, tg)
            finally:
                self._closed = True
                for pending in self._pending.values():
                    pending.error = ConnectionClosed("client disconnected")
                    pending.event.set()
                tg.cancel_scope.cancel()

    async def _on_line(self, line: bytes, tg: TaskGroup) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:
            await self._send(error_reply(None, RpcError(PARSE_ERROR, f"Parse error: {exc}")))
            return
        if may_hold_lone_surrogates(line):
            for member in message if isinstance(message, list) else [message]:
                _mend_all_but_id(member)
        if isinstance(message, list):
            if not self._dispatcher.batches_allowed():
                await self._send(
                    error_reply(None, RpcError(INVALID_REQUEST, "Batches are not supported on this connection"))
                )
            elif not message:
                await self._send(error_reply(None, RpcError(INVALID_REQUEST, "Empty batch")))
            else:
                tg.start_soon(self._run_batch, message)
            return
        reply = await self._on_message(message, tg, batch=None)
        if reply is not None:
            await self._send(reply)

    async def _on_message(self, message: object, tg: TaskGroup, batch: list[Reply] | None) -> Reply | None:
        """Handle one message; return an immediate reply, or None when a task will answer."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            error = RpcError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 object")
            return error_reply(_safe_id(message), error)
        method = message.get("method", _NO_ID)
        if method is _NO_ID:
            if "id" in message and ("result" in message or "error" in message):
                self._on_response(message)
                return None
            return error_reply(_safe_id(message), RpcError(INVALID_REQUEST, "Invalid Request: missing method"))
        if not isinstance(method, str):
            return error_reply(_safe_id(message), RpcError(INVALID_REQUEST, "Invalid Request: method must be a string"))
        params = message.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            if "id" not in message:
                return None
            error = RpcError(INVALID_REQUEST, "Invalid Request: params must be an object")
            return error_reply(_safe_id(message), error)
        if "id" not in message:
            await self._on_notification(method, params)
            return None
        request_id = message["id"]
        if not valid_id(request_id):
            return error_reply(None, RpcError(INVALID_REQUEST, "Invalid Request: id must be a string, int64 or null"))
        handler = self._dispatcher.request_handler(method)
        if handler is None:
            return error_reply(request_id, RpcError(METHOD_NOT_FOUND, f"Method not found: {method}"))
        if batch is None and self._dispatcher.is_inline(method):
            reply, then = await self._invoke(request_id, method, handler, params)
            await self._send(reply)
            if then is not None:
                tg.start_soon(then)
            return None
        if request_id in self._in_flight:
            return error_reply(request_id, RpcError(INVALID_REQUEST, f"Request id {request_id!r} is already in flight"))
        scope = anyio.CancelScope()
        self._in_flight[request_id] = scope
        tg.start_soon(self._run_request, request_id, method, handler, params, scope, batch)
        return None

    async def _run_request(
        self,
        request_id: RequestId,
        method: str,
        handler: Handler,
        params: Any,
        scope: anyio.CancelScope,
        batch: list[Reply] | None,
    ) -> None:
        reply: Reply | None = None
        then: Continuation | None = None
        try:
            with scope:
                reply, then = await self._invoke(request_id, method, handler, params)
        finally:
            self._in_flight.pop(request_id, None)
        if reply is None:  # cancelled through $/cancel_request
            reply = error_reply(request_id, RpcError(REQUEST_CANCELLED, "Request cancelled"))
        if batch is not None:
            batch.append(reply)
            if then is not None:  # unreachable while prompts are refused in batches
                raise RuntimeError(f"{method} returned a continuation inside a batch")
            return
        await self._send(reply)
        if then is not None:
            await then()

    async def _invoke(
        self, request_id: RequestId, method: str, handler: Handler, params: Any
    ) -> tuple[Reply, Continuation | None]:
        try:
            result = await handler(params)
        except RpcError as err:
            return error_reply(request_id, err), None
        except Exception as exc:  # the process keeps serving whatever a handler does
            log.exception("handler failed", method=method)
            return error_reply(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {exc}")), None
        if isinstance(result, AfterReply):
            return result_reply(request_id, result.result), result.then
        return result_reply(request_id, {} if result is None else result), None

    async def _on_notification(self, method: str, params: Any) -> None:
        if method == "$/cancel_request":
            target = params.get("requestId", _NO_ID) if isinstance(params, dict) else _NO_ID
            scope = self._in_flight.get(target) if valid_id(target) else None  # type: ignore[arg-type]
            if scope is not None:
                scope.cancel()
            return
        handler = self._dispatcher.notification_handler(method)
        if handler is None:
            return  # unknown notifications are ignored, as JSON-RPC requires
        try:
            await handler(params)
        except Exception:
            log.exception("notification handler failed", method=method)

    def _on_response(self, message: dict[str, Any]) -> None:
        response_id = message.get("id")
        if not valid_id(response_id):
            return  # e.g. a list or object id: unhashable, and never one of ours
        pending = self._pending.get(response_id)
        if pending is None or pending.event.is_set():
            return  # unknown or duplicate answer: ignore
        error = message.get("error")
        if "error" in message:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            pending.error = RpcError(
                code if isinstance(code, int) else INTERNAL_ERROR,
                text if isinstance(text, str) else "malformed error response",
            )
        else:
            pending.result = message.get("result")
        pending.event.set()

    async def _run_batch(self, members: list[Any]) -> None:
        replies: list[Reply] = []
        async with anyio.create_task_group() as tg:
            for member in members:
                method = member.get("method") if isinstance(member, dict) else None
                # A notification is never answered, not even to refuse it.
                if isinstance(method, str) and "id" in member and not self._dispatcher.batchable(method):
                    replies.append(
                        error_reply(_safe_id(member), RpcError(INVALID_REQUEST, f"{method} cannot be sent in a batch"))
                    )
                    continue
                reply = await self._on_message(member, tg, batch=replies)
                if reply is not None:
                    replies.append(reply)
        if replies:
            await self._send(replies)


def _mend_all_but_id(message: object) -> None:
    """Each lone surrogate a client escaped (`"\\ud800"`) becomes U+FFFD, so no handler, store or log sees one
    (`term2.domain.mended_text`); the id is left exactly as sent, since the reply must carry it back (the
    encoder escapes it again)."""
    if not isinstance(message, dict):
        mend(message)
        return
    sent_id = message.get("id", _NO_ID)
    mend(message)
    if sent_id is not _NO_ID:
        message["id"] = sent_id


def _safe_id(message: object) -> RequestId:
    if isinstance(message, dict):
        value = message.get("id")
        if valid_id(value):
            return value
    return None
