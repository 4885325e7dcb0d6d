"""What the request validators (`adapters/acp/params.py`) accept, and how they refuse.

The ACP rules they carry: unknown keys and `_meta` are allowed; a wrong or
missing field is -32602 naming it; nothing the store could not keep gets in.
"""

from __future__ import annotations

from typing import Any

import pytest

from term2.adapters.acp import params as p
from term2.adapters.acp.errors import INVALID_PARAMS, RpcError
from term2.adapters.acp.mcp_servers import mcp_servers
from term2.domain.content import TextBlock
from term2.domain.mended_text import loads


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


def _mended(raw: str) -> Any:
    """A value as the connection hands it over: decoded and mended (term2.domain.mended_text)."""
    return loads(raw)


@pytest.mark.parametrize(
    ("request_", "params"),
    [
        (p.NEW_SESSION, r'{"cwd": "/w/caf\ud800"}'),
        (p.LIST_SESSIONS, r'{"cwd": "/w\udc00"}'),
        (p.RESUME_SESSION, r'{"sessionId": "s", "cwd": "\uDBFF/w"}'),
    ],
)
def test_a_cwd_that_held_a_lone_surrogate_is_refused_not_guessed(request_: p.Request[Any], params: str) -> None:
    """U+FFFD is a character a real directory may hold: the mended cwd is no path term2 may act on."""
    message = _refusal(request_, _mended(params))
    assert "cwd is not valid Unicode: it holds a lone surrogate" in message


@pytest.mark.parametrize(
    ("request_", "params"),
    [
        (p.NEW_SESSION, r'{"cwd": "/w", "additionalDirectories": ["/lib", "/w2/caf\ud800"]}'),
        (p.RESUME_SESSION, r'{"sessionId": "s", "cwd": "/w", "additionalDirectories": ["\uDBFF/lib"]}'),
    ],
)
def test_an_additional_directory_that_held_a_lone_surrogate_is_refused(request_: p.Request[Any], params: str) -> None:
    """Each additional directory becomes a root as `cwd` does (ADR 0051): the mended one is refused, not guessed."""
    message = _refusal(request_, _mended(params))
    assert "additionalDirectories is not valid Unicode: it holds a lone surrogate" in message


def test_a_cwd_with_a_valid_pair_or_a_real_u_fffd_is_a_path() -> None:
    assert p.parse(p.NEW_SESSION, _mended(r'{"cwd": "/w/\ud83d\ude00"}'), "session/new")["cwd"] == "/w/😀"
    assert p.parse(p.NEW_SESSION, _mended('{"cwd": "/w/\ufffd"}'), "session/new")["cwd"] == "/w/\ufffd"


def test_mended_text_that_is_only_told_is_kept() -> None:
    params = _mended(r'{"sessionId": "s", "prompt": [{"type": "text", "text": "hi \ud800"}], "_meta": {"k": "\udc00"}}')
    args = p.parse(p.PROMPT, params, "session/prompt")
    assert args["_meta"] == {"k": "\ufffd"}
    assert p.prompt_blocks(args["prompt"]) == (TextBlock("hi \ufffd"),)


@pytest.mark.parametrize(
    "entry",
    [
        r'{"name": "s", "command": "/bin/ser\ud800ver"}',
        r'{"name": "s", "command": "/bin/server", "args": ["--root", "/w\udc00"]}',
        r'{"name": "s", "command": "/bin/server", "env": [{"name": "HOME", "value": "/h\ud800"}]}',
        r'{"type": "http", "name": "s", "url": "http://127.0.0.1:9/\ud800"}',
        r'{"type": "http", "name": "s", "url": "http://x", "headers": [{"name": "t", "value": "\ud800"}]}',
    ],
)
def test_an_mcp_server_entry_that_held_a_lone_surrogate_is_refused(entry: str) -> None:
    with pytest.raises(RpcError) as refused:
        mcp_servers([_mended(entry)], "session/new")
    assert refused.value.code == INVALID_PARAMS and "lone surrogate" in refused.value.message
    assert mcp_servers([_mended(r'{"name": "n\ud800", "command": "/bin/server"}')], "m")[0][0].name == "n\ufffd"
