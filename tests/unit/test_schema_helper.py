"""The schema helper must reject the known term2 wire bugs and accept the
documented good shapes (examples from shared/notes/acp-wire-notes.md).

Needs the SDK package installed: `npm ci --prefix conformance`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# `tests` is not a package on pytest's default sys.path (rootdir isn't added).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.schemas import (
    SchemaRecorder,
    definition_for,
    is_rfc3339_datetime,
    validate_all,
    validate_outgoing,
)


def _resp(result: object, id_: int = 0) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": result}


def _update(update: dict, session_id: str = "s") -> dict:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }


def _permission(params: dict, id_: int = 5) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "session/request_permission",
        "params": params,
    }


V2_OPTIONS = [
    {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
]


# ---------------------------------------------------------------- lookups


@pytest.mark.parametrize(
    ("version", "kind", "method", "expected"),
    [
        (1, "notification", "session/update", "SessionNotification"),
        (2, "notification", "session/update", "UpdateSessionNotification"),
        (1, "request", "session/request_permission", "RequestPermissionRequest"),
        (2, "request", "session/request_permission", "RequestPermissionRequest"),
        (1, "response", "initialize", "InitializeResponse"),
        (2, "response", "session/new", "NewSessionResponse"),
        (2, "response", "session/list", "ListSessionsResponse"),
        (1, "response", "session/load", "LoadSessionResponse"),
        (2, "response", "session/resume", "ResumeSessionResponse"),
        (2, "response", "session/close", "CloseSessionResponse"),
        (1, "response", "session/prompt", "PromptResponse"),
        (2, "response", "session/prompt", "PromptResponse"),
        (2, "response", "session/load", None),  # gone in v2
        (2, "request", "fs/read_text_file", None),  # gone in v2
    ],
)
def test_definition_lookup(version: int, kind: str, method: str, expected: str | None) -> None:
    assert definition_for(version, kind, method) == expected


# ---------------------------------------------------------------- known-bad


def test_rejects_v1_prompt_response_with_custom_stop_reason() -> None:
    with pytest.raises(AssertionError, match="PromptResponse"):
        validate_outgoing(1, _resp({"stopReason": "_term2_error"}), "session/prompt")


def test_rejects_v2_agent_message_chunk_without_message_id() -> None:
    bad = _update(
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "x"},
        }
    )
    with pytest.raises(AssertionError, match="UpdateSessionNotification"):
        validate_outgoing(2, bad)


def test_rejects_v2_initialize_without_info() -> None:
    bad = _resp({"protocolVersion": 2, "capabilities": {"session": {}}})
    with pytest.raises(AssertionError, match="InitializeResponse"):
        validate_outgoing(2, bad, "initialize")


def test_rejects_naive_updated_at_in_v2_list() -> None:
    naive = {"sessionId": "s1", "cwd": "/p", "updatedAt": "2025-10-29T14:22:15.123456"}
    with pytest.raises(AssertionError, match="date-time"):
        validate_outgoing(2, _resp({"sessions": [naive]}), "session/list")


def test_rejects_v2_permission_request_without_title() -> None:
    v1_shaped = {
        "sessionId": "s",
        "toolCall": {"toolCallId": "c1", "title": "Write a.txt"},
        "options": V2_OPTIONS,
    }
    with pytest.raises(AssertionError, match="RequestPermissionRequest"):
        validate_outgoing(2, _permission(v1_shaped))


@pytest.mark.parametrize(
    ("version", "message", "method"),
    [
        (2, _resp(None), "session/prompt"),  # null result: v2 zod rejects it
        (2, _resp({"stopReason": "end_turn"}, id_="x"), None),  # result without method
        (
            1,
            _update({"sessionUpdate": "state_update", "state": "idle"}),
            None,
        ),  # v2-only tag
        (
            2,
            {"jsonrpc": "2.0", "id": 1, "error": {"code": "-32000", "message": "busy"}},
            None,
        ),
        (2, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000}}, None),
        (2, {"id": 1, "result": {}}, "session/close"),  # no jsonrpc
        (
            2,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {},
                "error": {"code": 1, "message": "m"},
            },
            "x",
        ),
        (
            2,
            {"jsonrpc": "2.0", "method": "fs/read_text_file", "id": 1, "params": {}},
            None,
        ),
        (
            2,
            _permission({"sessionId": "s", "title": "t", "options": []}),
            None,
        ),  # >= 1 option
        (
            2,
            _update({"sessionUpdate": "plan_update", "planId": "p", "entries": []}),
            None,
        ),
    ],
)
def test_rejects_other_bad_shapes(version: int, message: dict, method: str | None) -> None:
    with pytest.raises(AssertionError):
        validate_outgoing(version, message, method)


def test_v1_forbids_batches() -> None:
    with pytest.raises(AssertionError, match="batch"):
        SchemaRecorder(1).agent_sent([_update({"sessionUpdate": "plan", "entries": []})])


# ---------------------------------------------------------------- good


V1_GOOD = [
    (
        _resp(
            {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": False,
                    "promptCapabilities": {
                        "image": False,
                        "audio": False,
                        "embeddedContext": True,
                    },
                    "mcpCapabilities": {"http": False, "sse": False},
                    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                },
                "authMethods": [],
                "agentInfo": {"name": "term2", "title": "term2", "version": "0.1.0"},
            }
        ),
        "initialize",
    ),
    (_resp({"stopReason": "end_turn"}, 3), "session/prompt"),
    (_resp({"stopReason": "cancelled", "usage": None}, 3), "session/prompt"),
    (_resp({}, 4), "session/load"),
    (_resp({}, 4), "session/close"),
    (
        _resp({"sessions": [{"sessionId": "s", "cwd": "/p", "updatedAt": "whatever"}]}, 2),
        "session/list",
    ),
    (
        _update(
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Hel"},
            }
        ),
        None,
    ),
    (
        _update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "c1",
                "title": "Write a.txt",
                "kind": "edit",
                "status": "pending",
            }
        ),
        None,
    ),
    (
        _permission(
            {
                "sessionId": "s",
                "toolCall": {
                    "toolCallId": "c1",
                    "title": "Write a.txt",
                    "kind": "edit",
                    "status": "pending",
                },
                "options": [
                    {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
                    {
                        "optionId": "reject-once",
                        "name": "Reject",
                        "kind": "reject_once",
                    },
                ],
            }
        ),
        None,
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 9,
            "error": {"code": -32602, "message": "Invalid params"},
        },
        None,
    ),
]

V2_GOOD = [
    (
        _resp(
            {
                "protocolVersion": 2,
                "info": {"name": "term2", "title": "term2", "version": "0.1.0"},
                "capabilities": {"session": {}},
            }
        ),
        "initialize",
    ),
    (_resp({"sessionId": "sess_1"}, 1), "session/new"),
    (
        _resp(
            {
                "sessions": [
                    {
                        "sessionId": "sess_1",
                        "cwd": "/home/u/proj",
                        "title": "Fix tests",
                        "updatedAt": "2025-10-29T14:22:15Z",
                    },
                    {
                        "sessionId": "sess_2",
                        "cwd": "/home/u/proj",
                        "updatedAt": "2025-10-29T14:22:15.5+00:00",
                    },
                ],
                "nextCursor": "eyJvIjoyfQ==",
            },
            2,
        ),
        "session/list",
    ),
    (_resp({}, 3), "session/prompt"),
    (_resp({}, 7), "session/resume"),
    (_resp({}, 8), "session/close"),
    (
        _update(
            {
                "sessionUpdate": "user_message",
                "messageId": "u1",
                "content": [{"type": "text", "text": "hi"}],
            }
        ),
        None,
    ),
    (_update({"sessionUpdate": "state_update", "state": "running"}), None),
    (
        _update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": "a1",
                "content": {"type": "text", "text": "Hello"},
            }
        ),
        None,
    ),
    (
        _update({"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}),
        None,
    ),
    (
        _update(
            {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "_term2_error",
            }
        ),
        None,
    ),
    (
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "title": "Write a.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "/p/a.txt"},
            }
        ),
        None,
    ),
    (
        _update(
            {
                "sessionUpdate": "tool_call_content_chunk",
                "toolCallId": "c1",
                "content": {
                    "type": "content",
                    "content": {"type": "text", "text": "wrote 3 bytes"},
                },
            }
        ),
        None,
    ),
    (
        _update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "c1",
                "status": "cancelled",
            }
        ),
        None,
    ),
    (
        _permission(
            {
                "sessionId": "s",
                "title": "Allow writing a.txt?",
                "description": "optional text",
                "subject": {"type": "tool_call", "toolCall": {"toolCallId": "c1"}},
                "options": V2_OPTIONS,
            }
        ),
        None,
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32000, "message": "prompt already running"},
        },
        None,
    ),
    (
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "Invalid request"},
        },
        None,
    ),
    (
        {"jsonrpc": "2.0", "method": "_term2/debug", "params": {"anything": [1, 2]}},
        None,
    ),
]


@pytest.mark.parametrize(("message", "method"), V1_GOOD)
def test_accepts_v1_examples(message: dict, method: str | None) -> None:
    validate_outgoing(1, message, method)


@pytest.mark.parametrize(("message", "method"), V2_GOOD)
def test_accepts_v2_examples(message: dict, method: str | None) -> None:
    validate_outgoing(2, message, method)


def test_recorder_tracks_request_ids_including_zero() -> None:
    recorder = validate_all(
        2,
        [
            (
                "client",
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
            ),
            (
                "client",
                {"jsonrpc": "2.0", "id": "0", "method": "session/new", "params": {}},
            ),
            ("agent", _resp({"sessionId": "s"}, id_="0")),
            ("agent", V2_GOOD[0][0]),
        ],
    )
    assert recorder.validated == 2
    assert recorder.pending == {}


def test_recorder_checks_result_against_the_tracked_method() -> None:
    recorder = SchemaRecorder(2)
    recorder.client_sent({"jsonrpc": "2.0", "id": 4, "method": "session/new", "params": {}})
    with pytest.raises(AssertionError, match="NewSessionResponse"):
        recorder.agent_sent(_resp({}, 4))


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("2025-10-29T14:22:15Z", True),
        ("2025-10-29t14:22:15.123+05:30", True),
        ("2025-10-29T14:22:15", False),
        ("2025-10-29 14:22:15Z", False),
        ("2025-02-30T14:22:15Z", False),
        ("2025-10-29T24:00:00Z", False),
        (None, True),  # formats only constrain strings
    ],
)
def test_rfc3339_datetime(value: object, ok: bool) -> None:
    assert is_rfc3339_datetime(value) is ok


def test_missing_node_modules_fails_with_npm_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.support import schemas

    monkeypatch.setitem(schemas.SCHEMA_FILES, 2, tmp_path / "absent.json")
    with pytest.raises(schemas.SchemaFilesMissingError, match="npm ci --prefix conformance"):
        schemas.schema_path(2)
