"""Lone UTF-16 surrogates from every side, through a real `term2 acp`: a clear error where a name is at
stake, U+FFFD everywhere else, and nothing lost.

JSON lets any peer escape a lone surrogate (`"\\ud800"`); decoded, it is a str UTF-8 cannot encode.
Before the adapters mended such text at their boundary (`term2.domain.mended_text`), a client's
prompt holding one was refused, a model's reply holding one failed the turn when the store could not
encode it, and an MCP server's result holding one was dropped by the SDK, the call waiting out its
timeout. Here the client escapes them in a prompt (text, an embedded resource, `_meta`), the fake
model in a text delta and in a tool call's arguments, and a hand-written MCP server in a tool's
description and result. Every turn ends normally, the session is stored and `session/load` replays it,
and every line term2 writes is JSON-RPC that UTF-8 can carry. A `cwd` holding one is refused with
-32602: term2 does not guess which directory was meant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, allow_kind, replayed_by_a_new_process, updates

FIRST_TURN_TIMEOUT = 180.0
REPO = str(Path(__file__).resolve().parents[2])
MENDED_PROMPT = "hello \ufffd world \U0001f600"


def _prompt_line(request_id: int, session_id: str) -> bytes:
    """A v1 prompt as a client would write it, lone surrogates escaped in its text, resource and `_meta`
    (and one valid pair, which stays 😀)."""
    return (
        b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"%s","_meta":{"note":"\\udfff"},'
        b'"prompt":[{"type":"text","text":"hello \\ud800 world \\ud83d\\ude00"},'
        b'{"type":"resource","resource":{"uri":"file:///notes.txt","text":"res \\udc00 ource"}}]}}\n'
        % (request_id, session_id.encode())
    )


def _prompt(proc: AcpProcess, request_id: int, session_id: str, timeout: float) -> list[Message]:
    line = _prompt_line(request_id, session_id)
    proc.transcript.append(("client", json.loads(line)))  # what `send` records, for the schema check
    proc.send_raw(line)
    messages = proc.collect_until(lambda m: m.get("id") == request_id and "method" not in m, timeout)
    assert messages[-1].get("result", {}).get("stopReason") == "end_turn", (messages[-1], proc.stderr()[-3000:])
    return messages


def _protocol_only(proc: AcpProcess) -> None:
    """Every stdout line is JSON-RPC, valid for the schema, and holds nothing UTF-8 cannot carry."""
    proc.validate_schemas()
    for raw in proc.raw_lines:
        json.dumps(json.loads(raw), ensure_ascii=False).encode("utf-8")


def _said(messages: list[Message], kind: str) -> str:
    return "".join(u["content"].get("text", "") for u in updates(messages, kind) if isinstance(u["content"], dict))


def _user_texts(server: FakeLLMServer) -> str:
    body = server.requests[0].body
    assert isinstance(body, dict)
    return json.dumps([m["content"] for m in body["messages"] if m["role"] == "user"], ensure_ascii=False)


def test_a_prompt_and_a_model_reply_holding_lone_surrogates_are_answered_stored_and_replayed(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    home = tmp_path / "home"
    with start_fake_llm() as llm:
        a = AcpProcess(tmp_path, env=llm_env(llm), home=home, permission=allow_kind("allow_once"))
        try:
            a.initialize(1)
            refused = a.call("session/new", {"cwd": str(workspace) + "\ud800", "mcpServers": []})
            assert refused["error"]["code"] == -32602, refused
            assert "cwd is not valid Unicode: it holds a lone surrogate" in refused["error"]["message"]
            sid = a.new_session(workspace)
            llm.push(
                {
                    "text": "model \udc00 says",
                    # The arguments as a string the wire escapes once: the decoded call holds a lone surrogate.
                    "tool_calls": [{"name": "write_file", "arguments": '{"path": "out.txt", "content": "x\udc00y"}'}],
                },
                {"text": "done \ud800"},
            )
            live = _prompt(a, 50, sid, FIRST_TURN_TIMEOUT)
            assert "hello \ufffd world \U0001f600" in _user_texts(llm) and "res \ufffd ource" in _user_texts(llm)
            assert _said(live, "agent_message_chunk") == "model \ufffd saysdone \ufffd"
            assert (workspace / "out.txt").read_text(encoding="utf-8") == "x\ufffdy"
            [call] = updates(live, "tool_call")
            finished = [u for u in updates(live, "tool_call_update") if u.get("status") in ("completed", "failed")]
            assert [u["status"] for u in finished] == ["completed"], finished
            assert a.close() == 0
            _protocol_only(a)
        finally:
            a.kill()

        load = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        replayed = replayed_by_a_new_process(tmp_path, llm_env(llm), home, 1, "session/load", load, _protocol_only)
    user = [u["content"] for u in updates(replayed, "user_message_chunk")]
    assert {"type": "text", "text": MENDED_PROMPT} in user
    assert any(c.get("resource", {}).get("text") == "res \ufffd ource" for c in user)
    assert _said(replayed, "agent_message_chunk") == "model \ufffd saysdone \ufffd"
    assert call["toolCallId"] in {u["toolCallId"] for u in updates(replayed, "tool_call")}


def test_an_mcp_result_holding_lone_surrogates_reaches_the_model_mended(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    raw_server = {
        "name": "raw",
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_raw_server"],
        "env": [{"name": "PYTHONPATH", "value": REPO}],
    }
    expected = "lone \ufffd and \ufffd, pair \U0001f600"
    with start_fake_llm() as llm:
        proc = AcpProcess(tmp_path, env=llm_env(llm), permission=allow_kind("allow_once"))
        try:
            proc.initialize(1)
            sid = proc.result("session/new", {"cwd": str(workspace), "mcpServers": [raw_server]})["sessionId"]
            llm.push({"tool_calls": [{"name": "mcp__raw__lone", "arguments": {"text": "hi"}}]}, {"text": "Read it."})
            response = proc.call(
                "session/prompt",
                {"sessionId": sid, "prompt": [{"type": "text", "text": "call it"}]},
                timeout=FIRST_TURN_TIMEOUT,
            )
            assert response.get("result", {}).get("stopReason") == "end_turn", (response, proc.stderr()[-3000:])
            assert proc.close() == 0
            _protocol_only(proc)
        finally:
            proc.kill()
    bodies: list[Any] = [r.body for r in llm.requests]
    tools = {t["function"]["name"]: t["function"]["description"] for t in bodies[0]["tools"]}
    assert expected in tools["mcp__raw__lone"]
    results = [m["content"] for m in bodies[1]["messages"] if m["role"] == "tool"]
    assert any(f"hi: {expected}" in str(r) for r in results), results
