"""One client files suite, two adapters.

(a) `acp`: AcpClientFiles over a real JsonRpcConnection; the other end is a scripted client (a
    second connection over an in-memory transport) serving `fs/read_text_file` and
    `fs/write_text_file` from buffers, answering refusals with JSON-RPC errors, and checking every
    request's params against the official v1 schema.
(b) `memory`: MemoryClientFiles (tests/fakes), the double the tool tests use.

Both must agree on what the tools rely on: the buffer's text (a line range of it), the whole text
replaced by a write, an error the tools can fall back from (answered) for a refused or unknown path,
nothing asked of a client that did not offer a method, and a write's unknown fate when the client
goes away.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from term2.adapters.acp.client_files import AcpClientFiles
from term2.adapters.acp.connection import JsonRpcConnection
from term2.adapters.acp.errors import RpcError
from term2.adapters.acp.memory_transport import MemoryTransport
from term2.adapters.acp.negotiation import ClientCaps
from term2.ports.client_files import ClientFileError, ClientFiles
from tests.fakes.client_files import MemoryClientFiles
from tests.fakes.dispatchers import TableDispatcher
from tests.support.schemas import check_definition

pytestmark = pytest.mark.anyio

SESSION = "sess-1"
PATH = "/work/project/a.py"
BUFFER = "one\ntwo\nthree\n"


@dataclass
class Rig:
    files: ClientFiles
    client: MemoryClientFiles  # the client's side: its buffers, its refusals, what it was asked
    disconnect: Callable[[], Awaitable[None]]


def _serve(client: MemoryClientFiles, method: str, definition: str) -> Callable[[Any], Awaitable[Any]]:
    async def handle(params: Any) -> Any:
        check_definition(1, definition, params, f"{method} params")
        try:
            if method == "fs/read_text_file":
                text = await client.read_text(
                    params["sessionId"], params["path"], line=params.get("line"), limit=params.get("limit")
                )
                return {"content": text}
            await client.write_text(params["sessionId"], params["path"], params["content"])
            return {}
        except ClientFileError as err:
            raise RpcError(-32002, str(err)) from None

    return handle


@asynccontextmanager
async def acp_rig(reads: bool, writes: bool) -> AsyncIterator[Rig]:
    client = MemoryClientFiles(reads=True, writes=True)  # the scripted client serves both; caps decide the asking
    ours, theirs = MemoryTransport.pair()
    agent = JsonRpcConnection(ours, TableDispatcher())
    peer = JsonRpcConnection(
        theirs,
        TableDispatcher(
            {
                "fs/read_text_file": _serve(client, "fs/read_text_file", "ReadTextFileRequest"),
                "fs/write_text_file": _serve(client, "fs/write_text_file", "WriteTextFileRequest"),
            }
        ),
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.serve)
            tg.start_soon(peer.serve)

            async def disconnect() -> None:
                await theirs.aclose()  # the agent's connection reads EOF: pending requests fail
                await anyio.wait_all_tasks_blocked()

            try:
                yield Rig(AcpClientFiles(agent, ClientCaps(fs_read=reads, fs_write=writes)), client, disconnect)
            finally:
                await ours.aclose()
                await theirs.aclose()
                tg.cancel_scope.cancel()


@asynccontextmanager
async def memory_rig(reads: bool, writes: bool) -> AsyncIterator[Rig]:
    client = MemoryClientFiles(reads=reads, writes=writes)

    async def disconnect() -> None:
        client.gone = True

    yield Rig(client, client, disconnect)


RIGS = {"acp": acp_rig, "memory": memory_rig}


@pytest.fixture(params=sorted(RIGS))
def make_rig(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return RIGS[request.param]  # type: ignore[no-any-return]


async def test_a_read_answers_the_buffers_text(make_rig: Callable[..., Any]) -> None:
    async with make_rig(True, True) as rig:
        rig.client.buffers[PATH] = BUFFER
        assert rig.files.reads and rig.files.writes
        assert await rig.files.read_text(SESSION, PATH) == BUFFER
        assert await rig.files.read_text(SESSION, PATH, line=2, limit=1) == "two\n"
        assert await rig.files.read_text(SESSION, PATH, line=2) == "two\nthree\n"
        assert rig.client.requests[0] == ("fs/read_text_file", SESSION, PATH)


async def test_a_write_replaces_the_whole_text(make_rig: Callable[..., Any]) -> None:
    async with make_rig(True, True) as rig:
        rig.client.buffers[PATH] = BUFFER
        await rig.files.write_text(SESSION, PATH, "new\n")
        assert rig.client.buffers[PATH] == "new\n"
        assert await rig.files.read_text(SESSION, PATH) == "new\n"


@pytest.mark.parametrize("method", ["read", "write"])
async def test_a_refused_path_is_an_answered_error_and_nothing_changes(
    make_rig: Callable[..., Any], method: str
) -> None:
    async with make_rig(True, True) as rig:
        rig.client.buffers[PATH] = BUFFER
        rig.client.refuse.add(PATH)
        with pytest.raises(ClientFileError) as caught:
            if method == "read":
                await rig.files.read_text(SESSION, PATH)
            else:
                await rig.files.write_text(SESSION, PATH, "changed\n")
        assert caught.value.answered
        assert rig.client.buffers[PATH] == BUFFER


async def test_an_unknown_path_is_an_answered_error(make_rig: Callable[..., Any]) -> None:
    async with make_rig(True, True) as rig:
        with pytest.raises(ClientFileError) as caught:
            await rig.files.read_text(SESSION, "/work/project/missing.py")
        assert caught.value.answered


async def test_a_client_that_did_not_offer_a_method_is_not_asked(make_rig: Callable[..., Any]) -> None:
    async with make_rig(False, False) as rig:
        rig.client.buffers[PATH] = BUFFER
        assert not rig.files.reads and not rig.files.writes
        with pytest.raises(ClientFileError):
            await rig.files.read_text(SESSION, PATH)
        with pytest.raises(ClientFileError):
            await rig.files.write_text(SESSION, PATH, "x\n")
        assert rig.client.buffers[PATH] == BUFFER
        if isinstance(rig.files, AcpClientFiles):
            assert rig.client.requests == []  # nothing went on the wire


async def test_a_client_gone_leaves_a_writes_fate_unknown(make_rig: Callable[..., Any]) -> None:
    async with make_rig(True, True) as rig:
        await rig.disconnect()
        with pytest.raises(ClientFileError) as caught:
            await rig.files.write_text(SESSION, PATH, "x\n")
        assert not caught.value.answered
