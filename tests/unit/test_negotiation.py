"""Version negotiation, shared by the server and the launcher's early answer."""

from __future__ import annotations

import json

import pytest

from term2.adapters.acp.errors import INVALID_PARAMS, RpcError
from term2.adapters.acp.negotiation import ClientCaps, client_caps, client_takes_compaction, early_answer, negotiate

INFO = {"name": "term2", "title": "term2", "version": "9.9"}


@pytest.mark.parametrize(("asked", "v2", "got"), [(1, True, 1), (2, True, 2), (7, True, 2), (2, False, 1)])
def test_one_version_per_connection(asked: int, v2: bool, got: int) -> None:
    version, result = negotiate({"protocolVersion": asked}, v2, INFO)
    assert version == got == result["protocolVersion"]


def test_v2_result_is_exactly_the_documented_one() -> None:
    assert negotiate({"protocolVersion": 2}, True, INFO)[1] == {
        "protocolVersion": 2,
        "info": INFO,
        "capabilities": {"session": {}},
    }


@pytest.mark.parametrize(
    "params", [None, {}, {"protocolVersion": "2"}, {"protocolVersion": True}, {"protocolVersion": 0}]
)
def test_unusable_versions_are_refused(params: object) -> None:
    with pytest.raises(RpcError) as caught:
        negotiate(params, True, INFO)
    assert caught.value.code == INVALID_PARAMS == -32602


def test_a_well_formed_initialize_is_answered_early() -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2}})
    answered = early_answer(line.encode(), True, INFO)
    assert answered is not None
    version, reply, client = answered
    assert version == 2 and reply.endswith(b"\n") and client.compaction
    assert json.loads(reply) == {"jsonrpc": "2.0", "id": 0, "result": negotiate({"protocolVersion": 2}, True, INFO)[1]}


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[]",
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}',
        b'{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":null,"method":"initialize","params":{"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":99999999999999999999,"method":"initialize","params":{"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":0}}',
        b'{"jsonrpc":"1.0","id":1,"method":"initialize","params":{"protocolVersion":2}}',
    ],
)
def test_anything_else_is_left_to_the_server(line: bytes) -> None:
    assert early_answer(line, True, INFO) is None


@pytest.mark.parametrize("request_id", ["init", 2**63 - 1, -(2**63)])
def test_the_early_answer_takes_every_id_the_connection_takes(request_id: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {"protocolVersion": 1}})
    answered = early_answer(line.encode(), True, INFO)
    assert answered is not None and json.loads(answered[1])["id"] == request_id


def test_the_early_answer_escapes_to_ascii_like_the_connection() -> None:
    answered = early_answer(
        json.dumps({"jsonrpc": "2.0", "id": "ïd", "method": "initialize", "params": {"protocolVersion": 1}}).encode(),
        True,
        {**INFO, "title": "tèrm2"},
    )
    assert answered is not None and answered[1].isascii() and b"\\u00ef" in answered[1]


@pytest.mark.parametrize(
    ("params", "version", "expected"),
    [
        ({"clientCapabilities": {"session": {"compaction": {}}}}, 1, True),
        ({"clientCapabilities": {"session": {"compaction": None}}}, 1, False),
        ({"clientCapabilities": {"session": {}}}, 1, False),
        ({"clientCapabilities": {}}, 1, False),
        ({}, 1, False),
        ({}, 2, True),
    ],
)
def test_v1_sends_compaction_updates_only_to_clients_that_advertised_them(
    params: dict[str, object], version: int, expected: bool
) -> None:
    assert client_takes_compaction(params, version) is expected


def test_the_client_capabilities_term2_acts_on_are_read_on_v1_only() -> None:
    zed = {
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": True,
            "_meta": {"terminal_output": True},
        }
    }
    assert client_caps(zed, 1) == ClientCaps(fs_read=True, fs_write=True, terminal_output=True)
    assert client_caps(zed, 2) == ClientCaps(compaction=True)
    odd = {"clientCapabilities": {"fs": {"readTextFile": "yes"}, "_meta": None}}
    assert client_caps(odd, 1) == ClientCaps()
    assert client_caps(None, 1) == ClientCaps()
