"""JsonRpcConnection driven over an in-memory transport pair with a table dispatcher (tests/fakes)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from term2.adapters.acp.connection import AfterReply, JsonRpcConnection
from term2.adapters.acp.errors import ConnectionClosed, RpcError
from term2.adapters.acp.memory_transport import MemoryTransport
from term2.ports.transport import LineTooLong
from tests.fakes.dispatchers import TableDispatcher

pytestmark = pytest.mark.anyio


async def echo(params: Any) -> Any:
    return {"echo": params}


class Client:
    """The peer's end: raw lines in, decoded JSON out."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport

    async def send(self, message: Any) -> None:
        await self.transport.send(message if isinstance(message, bytes) else json.dumps(message).encode())

    async def call(self, method: str, params: Any = None, id_: Any = 1) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    async def recv(self) -> Any:
        line = await self.transport.receive()
        assert line is not None, "connection closed its output"
        return json.loads(line)


@asynccontextmanager
async def running(
    dispatcher: TableDispatcher, transport_wrapper: Callable[[MemoryTransport], Any] | None = None
) -> AsyncIterator[tuple[JsonRpcConnection, Client, anyio.abc.TaskGroup]]:
    server_end, client_end = MemoryTransport.pair()
    transport = transport_wrapper(server_end) if transport_wrapper else server_end
    connection = JsonRpcConnection(transport, dispatcher)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            client = Client(client_end)
            try:
                yield connection, client, tg
            finally:
                await client_end.aclose()  # EOF: serve() returns


# -- requests -------------------------------------------------------------------------


async def test_request_gets_its_result_and_none_becomes_empty_object() -> None:
    async def nothing(params: Any) -> None:
        return None

    async with running(TableDispatcher({"echo": echo, "nothing": nothing})) as (_, client, _tg):
        await client.call("echo", {"a": 1}, id_=1)
        assert await client.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"echo": {"a": 1}}}
        await client.call("nothing", id_=2)
        assert await client.recv() == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_requests_run_concurrently() -> None:
    release = anyio.Event()

    async def slow(params: Any) -> Any:
        await release.wait()
        return "slow"

    async with running(TableDispatcher({"slow": slow, "echo": echo})) as (_, client, _tg):
        await client.call("slow", id_=1)
        await client.call("echo", [1], id_=2)
        assert await client.recv() == {"jsonrpc": "2.0", "id": 2, "result": {"echo": [1]}}
        release.set()
        assert await client.recv() == {"jsonrpc": "2.0", "id": 1, "result": "slow"}


@pytest.mark.parametrize("request_id", [0, "abc", None, -5, ""])
async def test_ids_are_echoed_exactly(request_id: Any) -> None:
    async with running(TableDispatcher({"echo": echo})) as (_, client, _tg):
        await client.call("echo", {}, id_=request_id)
        reply = await client.recv()
    assert "id" in reply and reply["id"] == request_id and type(reply["id"]) is type(request_id)
    assert reply["result"] == {"echo": {}}


async def test_inline_request_finishes_before_the_next_line_is_read() -> None:
    release = anyio.Event()
    calls: list[str] = []

    async def init(params: Any) -> Any:
        calls.append("init")
        await release.wait()
        return {"v": 1}

    async def ping(params: Any) -> Any:
        calls.append("ping")
        return {}

    dispatcher = TableDispatcher({"initialize": init, "ping": ping}, inline=frozenset({"initialize"}))
    async with running(dispatcher) as (_, client, _tg):
        await client.call("initialize", id_=0)
        await client.call("ping", id_=1)
        await anyio.wait_all_tasks_blocked()
        assert calls == ["init"]
        release.set()
        assert [(await client.recv())["id"] for _ in range(2)] == [0, 1]
    assert calls == ["init", "ping"]


async def test_duplicate_in_flight_id_is_refused() -> None:
    release = anyio.Event()

    async def slow(params: Any) -> Any:
        await release.wait()
        return "first"

    async with running(TableDispatcher({"slow": slow})) as (_, client, _tg):
        await client.call("slow", id_=7)
        await client.call("slow", id_=7)
        duplicate = await client.recv()
        assert duplicate["id"] == 7 and duplicate["error"]["code"] == -32600
        release.set()
        assert await client.recv() == {"jsonrpc": "2.0", "id": 7, "result": "first"}


# -- protocol errors ----------------------------------------------------------------


async def test_parse_error() -> None:
    async with running(TableDispatcher()) as (_, client, _tg):
        await client.send(b"{not json")
        reply = await client.recv()
    assert reply["id"] is None and reply["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("message", "reply_id"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "echo"}, 1),
        ({"id": 2, "method": "echo"}, 2),
        ({"jsonrpc": "2.0", "id": 3}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": "echo", "params": "scalar"}, 5),
        ({"jsonrpc": "2.0", "id": True, "method": "echo"}, None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "echo"}, None),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "echo"}, None),
        (7, None),
        ("text", None),
        ([{"jsonrpc": "2.0", "id": 1, "method": "echo"}], None),  # batches not allowed here
    ],
)
async def test_invalid_requests(message: Any, reply_id: Any) -> None:
    async with running(TableDispatcher({"echo": echo})) as (_, client, _tg):
        await client.send(message)
        reply = await client.recv()
    assert reply["jsonrpc"] == "2.0"
    assert reply["id"] == reply_id
    assert reply["error"]["code"] == -32600


async def test_method_not_found() -> None:
    async with running(TableDispatcher()) as (_, client, _tg):
        await client.call("no/such", id_=9)
        reply = await client.recv()
    assert reply["id"] == 9 and reply["error"]["code"] == -32601
    assert "no/such" in reply["error"]["message"]


async def test_oversized_line_is_answered_and_serving_continues() -> None:
    class TooLongOnce:
        def __init__(self, inner: MemoryTransport) -> None:
            self.inner, self.raised = inner, False

        async def receive(self) -> bytes | None:
            if not self.raised:
                self.raised = True
                raise LineTooLong("message exceeds 16 bytes")
            return await self.inner.receive()

        async def send(self, line: bytes) -> None:
            await self.inner.send(line)

        async def aclose(self) -> None:
            await self.inner.aclose()

    async with running(TableDispatcher({"echo": echo}), TooLongOnce) as (_, client, _tg):
        first = await client.recv()
        assert first["id"] is None and first["error"]["code"] == -32600
        assert "exceeds" in first["error"]["message"]
        await client.call("echo", [1], id_=1)
        assert (await client.recv())["result"] == {"echo": [1]}


async def test_notifications_get_no_reply_and_unknown_ones_are_ignored() -> None:
    seen: list[Any] = []

    async def note(params: Any) -> None:
        seen.append(params)

    async def broken(params: Any) -> None:
        raise ValueError("boom")

    dispatcher = TableDispatcher({"echo": echo}, notifications={"note": note, "broken": broken})
    with capture_logs() as logs:
        async with running(dispatcher) as (_, client, _tg):
            await client.notify("note", {"n": 1})
            await client.notify("unknown/thing", {})
            await client.notify("broken", {})
            await client.send({"jsonrpc": "2.0", "method": "note", "params": 3})  # bad params, no id: dropped
            await client.call("echo", ["after"], id_=1)
            assert await client.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"echo": ["after"]}}
    assert seen == [{"n": 1}]
    assert [(e["event"], e["method"]) for e in logs] == [("notification handler failed", "broken")]


# -- handler failures ---------------------------------------------------------------


async def test_handler_rpc_error_keeps_its_code_message_and_data() -> None:
    async def refuse(params: Any) -> Any:
        raise RpcError(-32602, "bad params", data={"field": "cwd"})

    async with running(TableDispatcher({"refuse": refuse})) as (_, client, _tg):
        await client.call("refuse", id_=3)
        reply = await client.recv()
    assert reply == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "bad params", "data": {"field": "cwd"}},
    }


async def test_handler_crash_is_an_internal_error_and_serving_continues() -> None:
    async def crash(params: Any) -> Any:
        raise ValueError("kaput")

    with capture_logs() as logs:
        async with running(TableDispatcher({"crash": crash, "echo": echo})) as (_, client, _tg):
            await client.call("crash", id_=1)
            reply = await client.recv()
            assert reply["id"] == 1 and reply["error"]["code"] == -32603
            assert "kaput" in reply["error"]["message"]
            await client.call("echo", None, id_=2)
            assert (await client.recv())["id"] == 2
    assert [(e["event"], e["method"]) for e in logs] == [("handler failed", "crash")]


# -- cancellation -------------------------------------------------------------------


async def test_cancel_request_cancels_an_in_flight_handler() -> None:
    started, cancelled = anyio.Event(), anyio.Event()

    async def forever(params: Any) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    async with running(TableDispatcher({"forever": forever, "echo": echo})) as (_, client, _tg):
        await client.call("forever", id_="job")
        await started.wait()
        await client.notify("$/cancel_request", {"requestId": "other"})  # unknown id: ignored
        await client.notify("$/cancel_request", {"requestId": "job"})
        reply = await client.recv()
        assert reply["id"] == "job" and reply["error"]["code"] == -32800
        assert cancelled.is_set()
        await client.call("echo", [1], id_="job")  # the id is free again
        assert (await client.recv())["result"] == {"echo": [1]}


# -- requests to the peer -----------------------------------------------------------


async def test_outgoing_request_is_correlated_by_id_and_stray_answers_ignored() -> None:
    async with running(TableDispatcher()) as (connection, client, tg):
        results: list[Any] = []

        async def ask() -> None:
            results.append(await connection.request("fs/read_text_file", {"path": "/w/a"}))

        tg.start_soon(ask)
        sent = await client.recv()
        assert sent["method"] == "fs/read_text_file" and sent["params"] == {"path": "/w/a"}
        await client.send({"jsonrpc": "2.0", "id": sent["id"] + 100, "result": "stray"})
        await client.send({"jsonrpc": "2.0", "id": str(sent["id"]), "result": "wrong type"})
        await anyio.wait_all_tasks_blocked()
        assert results == []
        await client.send({"jsonrpc": "2.0", "id": sent["id"], "result": {"content": "hi"}})
        await client.send({"jsonrpc": "2.0", "id": sent["id"], "result": "duplicate"})
        await anyio.wait_all_tasks_blocked()
        assert results == [{"content": "hi"}]


async def test_outgoing_requests_get_distinct_ids_and_error_answers_raise() -> None:
    async with running(TableDispatcher()) as (connection, client, tg):
        outcomes: dict[str, Any] = {}

        async def ask(name: str) -> None:
            try:
                outcomes[name] = await connection.request(name, {})
            except RpcError as err:
                outcomes[name] = (err.code, err.message)

        tg.start_soon(ask, "first")
        tg.start_soon(ask, "second")
        sent = {m["method"]: m["id"] for m in [await client.recv(), await client.recv()]}
        assert sent["first"] != sent["second"]
        await client.send({"jsonrpc": "2.0", "id": sent["second"], "error": {"code": -32002, "message": "gone"}})
        await client.send({"jsonrpc": "2.0", "id": sent["first"], "result": 1})
        await anyio.wait_all_tasks_blocked()
        assert outcomes == {"first": 1, "second": (-32002, "gone")}


async def test_cancelling_an_outgoing_request_withdraws_it() -> None:
    async with running(TableDispatcher()) as (connection, client, tg):
        scope = anyio.CancelScope()

        async def ask() -> None:
            with scope:
                await connection.request("session/request_permission", {})

        tg.start_soon(ask)
        sent = await client.recv()
        scope.cancel()
        withdrawn = await client.recv()
        assert withdrawn == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sent["id"]}}


async def test_peer_disconnect_fails_pending_outgoing_requests() -> None:
    server_end, client_end = MemoryTransport.pair()
    connection = JsonRpcConnection(server_end, TableDispatcher())
    errors: list[BaseException] = []

    async def ask() -> None:
        try:
            await connection.request("fs/read_text_file", {})
        except ConnectionClosed as exc:
            errors.append(exc)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            tg.start_soon(ask)
            assert (await client_end.receive()) is not None
            await client_end.aclose()
    assert len(errors) == 1
    with pytest.raises(ConnectionClosed):
        await connection.request("after/close", {})


# -- AfterReply ----------------------------------------------------------------------


async def test_after_reply_continuation_runs_after_the_reply_is_sent() -> None:
    holder: dict[str, JsonRpcConnection] = {}

    async def prompt(params: Any) -> Any:
        async def then() -> None:
            await holder["connection"].notify("session/update", {"state": "idle"})

        return AfterReply({"ack": True}, then)

    async with running(TableDispatcher({"session/prompt": prompt})) as (connection, client, _tg):
        holder["connection"] = connection
        await client.call("session/prompt", {}, id_=4)
        assert await client.recv() == {"jsonrpc": "2.0", "id": 4, "result": {"ack": True}}
        assert await client.recv() == {"jsonrpc": "2.0", "method": "session/update", "params": {"state": "idle"}}


# -- batches ------------------------------------------------------------------------


async def test_batch_is_answered_with_one_array() -> None:
    seen: list[Any] = []

    async def note(params: Any) -> None:
        seen.append(params)

    dispatcher = TableDispatcher(
        {"echo": echo, "session/prompt": echo},
        notifications={"note": note},
        batches=True,
        unbatchable=frozenset({"session/prompt"}),
    )
    async with running(dispatcher) as (_, client, _tg):
        await client.send(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]},
                {"jsonrpc": "2.0", "method": "note", "params": {"x": 1}},
                {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [2]},
                {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}},
                {"jsonrpc": "2.0", "id": 4, "method": "missing"},
                5,
            ]
        )
        replies = await client.recv()
    assert isinstance(replies, list)
    by_id = {(r["id"], "error" in r): r for r in replies}
    assert len(replies) == 5
    assert by_id[(1, False)]["result"] == {"echo": [1]}
    assert by_id[(2, False)]["result"] == {"echo": [2]}
    assert by_id[(3, True)]["error"]["code"] == -32600
    assert by_id[(4, True)]["error"]["code"] == -32601
    assert by_id[(None, True)]["error"]["code"] == -32600
    assert seen == [{"x": 1}]


async def test_empty_batch_and_notification_only_batch() -> None:
    seen: list[Any] = []

    async def note(params: Any) -> None:
        seen.append(params)

    dispatcher = TableDispatcher({"echo": echo}, notifications={"note": note}, batches=True)
    async with running(dispatcher) as (_, client, _tg):
        await client.send([])
        empty = await client.recv()
        assert empty["id"] is None and empty["error"]["code"] == -32600
        await client.send([{"jsonrpc": "2.0", "method": "note", "params": {}}])
        await client.call("echo", ["next"], id_=1)
        # a batch of notifications produces no reply at all
        assert await client.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"echo": ["next"]}}
    assert seen == [{}]


# -- lone surrogates (term2.domain.mended_text) ----------------------------------------


async def test_lone_surrogates_reach_no_handler_and_the_id_is_echoed_exactly() -> None:
    """A client's `"\\ud800"` is U+FFFD in what a handler, a notification or our own request receives; a
    valid pair is kept; the id a reply carries back is the very one sent (the encoder escapes it again)."""
    seen: list[Any] = []

    async def note(params: Any) -> None:
        seen.append(params)

    dispatcher = TableDispatcher({"echo": echo}, notifications={"note": note}, batches=True)
    async with running(dispatcher) as (connection, client, tg):
        line = rb'{"jsonrpc":"2.0","id":"id-\ud800","method":"echo","params":{"k\udc00":["a\ud800b","\ud83d\ude00"]}}'
        await client.send(line)
        reply = await client.recv()
        assert reply == {"jsonrpc": "2.0", "id": "id-\ud800", "result": {"echo": {"k\ufffd": ["a\ufffdb", "😀"]}}}
        await client.send(rb'[{"jsonrpc":"2.0","id":7,"method":"echo","params":["\udfff"]}]')
        assert await client.recv() == [{"jsonrpc": "2.0", "id": 7, "result": {"echo": ["\ufffd"]}}]
        await client.send(rb'{"jsonrpc":"2.0","method":"note","params":{"text":"\ud800"}}')

        answers: list[Any] = []

        async def ask() -> None:
            answers.append(await connection.request("fs/read_text_file", {"path": "/w/a"}))

        tg.start_soon(ask)
        sent = await client.recv()
        await client.send(b'{"jsonrpc":"2.0","id":%d,"result":{"content":"x\\udc00y"}}' % sent["id"])
        await anyio.wait_all_tasks_blocked()
    assert seen == [{"text": "\ufffd"}]
    assert answers == [{"content": "x\ufffdy"}]
