"""Issue 30 (items 9 and 11) end to end: what an MCP server names, and what a call carries, as the editor shows it.

A server chooses its tools' names and its errors' texts; a line break, ESC or
U+202E in them must not reach an editor (or `term2 exec`'s terminal) raw, in
the `tool_call` updates that announce and end a call nor in the permission
request. And an approval must show what it allows: the call's arguments are
its content, bounded and escaped, since CodeCompanion and avante show only a
permission request's title and content. Through a real `term2 acp` and the
hand-written stdio server `tests/fakes/mcp_raw_server.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from term2.app.mcp.names import tool_names
from tests.e2e.test_mcp_e2e import REPO, open_session
from tests.e2e.test_tools_e2e import Agent, _agent, _warm_up, select
from tests.support.acp_process import Message, updates

HOSTILE = "look\nhere\u202eexe.\x1b[2Jx"  # a line break, a bidi override and a screen erase
SHOWN = "look\\x0ahere\\xe2\\x80\\xaeexe.\\x1b[2Jx"
ACTING = ("\n", "\u202e", "\x1b")


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with _agent(tmp_path_factory.mktemp("mcp-display"), 1) as started:
        _warm_up(started)
        yield started


@pytest.fixture(autouse=True)
def _clean_script(agent: Agent) -> Iterator[None]:
    agent.llm.state.reset()
    yield
    agent.llm.state.reset()
    agent.answers.policy = None


def raw_server(tool: str) -> Message:
    env = [{"name": "PYTHONPATH", "value": REPO}, {"name": "RAW_TOOL", "value": tool}]
    return {"name": "raw", "command": sys.executable, "args": ["-m", "tests.fakes.mcp_raw_server"], "env": env}


def acts(text: str, allowed: str = "") -> bool:
    return any(char in text and char not in allowed for char in ACTING)


def texts(content: list[dict[str, Any]]) -> str:
    return "".join(c["content"]["text"] for c in content if c.get("type") == "content")


def call(agent: Agent, arguments: dict[str, Any]) -> tuple[list[Message], dict[str, Any]]:
    sid = open_session(agent.proc, agent.root, [raw_server(HOSTILE)])
    name = tool_names([("raw", HOSTILE)])[0]
    messages = agent.turn(sid, {"name": name, "arguments": arguments}, policy=select("allow-once"))
    return messages, agent.proc.permission_requests[-1]["params"]


def test_a_servers_tool_name_reaches_the_editor_escaped(agent: Agent) -> None:
    messages, request = call(agent, {"text": "hi"})
    announced = updates(messages, "tool_call") + updates(messages, "tool_call_update")
    titles = [u["title"] for u in announced if "title" in u]
    assert titles and all(SHOWN in title and not acts(title) for title in titles), titles
    assert request["toolCall"]["title"] == f"{SHOWN} (MCP server 'raw')"
    assert not acts(texts(request["toolCall"]["content"]), allowed="\n")
    ended = announced[-1]
    assert ended["status"] == "completed"
    assert not acts(texts(ended["content"]), allowed="\n")


def test_an_error_a_server_sends_reaches_the_editor_escaped(agent: Agent) -> None:
    messages, _ = call(agent, {"error": "denied\x1b]52;c;cm0gLXJmIH4=\x07 \u202egnp.exe\nsecond line"})
    ended = updates(messages, "tool_call_update")[-1]
    assert ended["status"] == "failed"
    shown = texts(ended["content"])
    assert "denied\\x1b]52;c;cm0gLXJmIH4=\\x07 \\xe2\\x80\\xaegnp.exe\\x0asecond line" in shown, shown
    assert not acts(shown)


def test_the_permission_request_shows_the_arguments_bounded_and_escaped(agent: Agent) -> None:
    long = "x" * 50_000
    messages, request = call(agent, {"text": f"rm -rf ~ \u202eevil\x1b[31m {long} tail-end"})
    content = texts(request["toolCall"]["content"])
    assert content.startswith("Arguments:")
    assert '"text": "rm -rf ~ \\u202eevil\\u001b[31m xxx' in content, content[:300]
    assert "tail-end" in content and "characters cut" in content
    assert len(content) < 5_000
    assert not acts(content, allowed="\n")
    assert request["toolCall"]["rawInput"]["text"].endswith("tail-end")  # the whole, as before
    first = updates(messages, "tool_call")[0]
    assert texts(first["content"]) == content  # the tool_call that announces it shows them too


def test_status_names_each_server_escaped(agent: Agent) -> None:
    """Red team of issue 30.9: `/status` lists the session's MCP servers by name, as the notices do, escaped:
    a name holding a line break could forge a line of the answer ("MCP servers: none"), ESC or U+202E
    redraw or reorder it."""
    server = raw_server("plain")
    server["name"] = HOSTILE
    sid = open_session(agent.proc, agent.root, [server])
    before = len(agent.proc.log)
    response = agent.proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/status"}]})
    assert response["result"]["stopReason"] == "end_turn"
    mine = [m for m in agent.proc.log[before:] if m.get("params", {}).get("sessionId") == sid]
    said = "".join(u["content"]["text"] for u in updates(mine, "agent_message_chunk"))
    assert "MCP servers: " in said and SHOWN in said, said
    assert not acts(said, allowed="\n") and said.count("\n") == said.count("\n", 0, said.index("MCP servers")), said
