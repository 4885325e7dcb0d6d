"""What the request validators (`adapters/acp/params.py`) accept, and how they refuse.

The ACP rules they carry: unknown keys and `_meta` are allowed; a wrong or
missing field is -32602 naming it; nothing the store could not keep gets in.
"""

from __future__ import annotations

from typing import Any

import pytest

from term2.adapters.acp import params as p
from term2.adapters.acp.errors import INVALID_PARAMS, RpcError


def _refusal(request: p.Request[Any], params: Any) -> str:
    with pytest.raises(RpcError) as refused:
        p.parse(request, params, "session/x")
    assert refused.value.code == INVALID_PARAMS
    return refused.value.message


def test_unknown_keys_are_ignored_and_optional_fields_read_as_none() -> None:
    args = p.parse(p.NEW_SESSION, {"cwd": "/w", "futureField": 1, "_meta": {"k": "v"}}, "session/new")
    assert args == {"cwd": "/w", "mcpServers": None, "additionalDirectories": None, "_meta": {"k": "v"}}


def test_a_nested_object_is_checked_too() -> None:
    args = p.parse(p.RESUME_SESSION, {"sessionId": "s", "cwd": "/w", "replayFrom": {"type": "start", "x": 2}}, "r")
    assert args["replayFrom"] == {"type": "start"}
    assert "replayFrom.type: Input should be a valid string" in _refusal(
        p.RESUME_SESSION, {"sessionId": "s", "cwd": "/w", "replayFrom": {"type": 3}}
    )


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({}, "cwd: Field required"),
        ({"cwd": 7}, "cwd: Input should be a valid string"),
        ({"cwd": "/w", "mcpServers": {}}, "mcpServers: Input should be a valid list"),
        ({"cwd": "/w", "_meta": "x"}, "_meta: Input should be a valid dictionary"),
        (["/w"], "params: Input should be a valid dictionary"),
        ({"cwd": "/w\ud800"}, "lone surrogate"),
    ],
)
def test_a_bad_request_is_refused_naming_what_is_wrong(params: Any, problem: str) -> None:
    message = _refusal(p.NEW_SESSION, params)
    assert message.startswith("Invalid params for session/x: ") and problem in message


def test_prompt_blocks_are_checked_by_kind() -> None:
    link = {"type": "resource_link", "uri": "file:///a", "name": "a"}
    blocks = p.prompt_blocks([{"type": "text", "text": "hi"}, link])
    assert [type(b).__name__ for b in blocks] == ["TextBlock", "ResourceLink"]
    with pytest.raises(RpcError, match=r"prompt\[0\]\): text: Field required"):
        p.prompt_blocks([{"type": "text"}])
    with pytest.raises(RpcError, match="'image' block, which term2 does not support"):
        p.prompt_blocks([{"type": "image", "data": ""}])
