"""Issue 19, items 4 and 5, over a real `term2 acp`: embedded context and display-only terminals on ACP v1.

Two v1 processes, each with the fake model server (which records every
request body): `zed` initializes the way Zed does as far as these features go
(`clientCapabilities._meta.terminal_output: true`), `plain` says nothing
more. Every message either writes is checked against the official v1 schema
when its process closes.
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e.test_tools_e2e import TURN_TIMEOUT, WARM_UP_TIMEOUT, Agent, Answers, select, shell_call
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, Message, bare, updates

ZED = {"_meta": {"terminal_output": True, "terminal-auth": True}, "terminal": True}


@contextlib.contextmanager
def _v1_agent(base: Path, capabilities: Message | None) -> Iterator[Agent]:
    root = base / "project"
    root.mkdir(exist_ok=True)
    with start_fake_llm() as llm:
        answers = Answers()
        proc = AcpProcess(base, env=llm_env(llm), permission=answers)
        try:
            proc.initialize(1, capabilities)
            yield Agent(proc, llm, answers, base, root)
            assert proc.close() == 0, proc.stderr()[-3000:]
            proc.validate_schemas()
        finally:
            proc.kill()


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Agent]]:
    with contextlib.ExitStack() as stack:
        started = {
            name: stack.enter_context(_v1_agent(tmp_path_factory.mktemp(name), caps))
            for name, caps in (("zed", ZED), ("plain", None))
        }
        with ThreadPoolExecutor(len(started)) as pool:
            warm = [pool.submit(a.turn, a.session(), timeout=WARM_UP_TIMEOUT) for a in started.values()]
            for future in warm:
                future.result()
        yield started


@pytest.fixture
def zed(agents: dict[str, Agent]) -> Iterator[Agent]:
    yield agents["zed"]
    agents["zed"].llm.state.reset()


@pytest.fixture
def plain(agents: dict[str, Agent]) -> Iterator[Agent]:
    yield agents["plain"]
    agents["plain"].llm.state.reset()


def prompt(agent: Agent, sid: str, *blocks: Message) -> Message:
    """One v1 turn with these prompt blocks; the response (the turn's updates are in `agent.proc.log`)."""
    return agent.proc.call("session/prompt", {"sessionId": sid, "prompt": list(blocks)}, TURN_TIMEOUT)


def user_text(agent: Agent) -> str:
    """The last user message of the last request the model server received."""
    messages = agent.llm.requests[-1].body["messages"]
    content = [m for m in messages if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def text(words: str) -> Message:
    return {"type": "text", "text": words}


def resource(uri: str, **fields: Any) -> Message:
    return {"type": "resource", "resource": {"uri": uri, **fields}}


# --- initialize --------------------------------------------------------------------------


def test_initialize_advertises_embedded_context_on_v1_only(zed: Agent, tmp_path: Path) -> None:
    answers = [m["result"] for who, m in zed.proc.transcript if who == "agent" and "result" in m]
    [answer] = [a for a in answers if "agentCapabilities" in a]
    assert answer["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True

    v2 = AcpProcess(tmp_path)
    try:
        result = v2.initialize(2)
        assert result["protocolVersion"] == 2
        assert result["capabilities"] == {"session": {}}  # the v2 page: no prompt extensions
        assert v2.close() == 0
        v2.validate_schemas()
    finally:
        v2.kill()


# --- embedded context --------------------------------------------------------------------


def test_an_embedded_resource_reaches_the_model_with_its_text_and_uri(zed: Agent) -> None:
    sid = zed.session()
    target = zed.root / "my app.py"
    uri = target.as_uri()
    assert "%20" in uri

    response = prompt(zed, sid, text("what does it print?"), resource(uri, text="print('embedded 42')\n"))

    assert bare(response["result"]) == {"stopReason": "end_turn"}
    sent = user_text(zed)
    assert "what does it print?" in sent
    assert "print('embedded 42')" in sent
    assert uri in sent and str(target) in sent  # the URI as sent, and the path it names


def test_a_blob_becomes_a_note_not_its_bytes(zed: Agent) -> None:
    sid = zed.session()
    blob = base64.b64encode(bytes(range(256)) * 4).decode()

    prompt(zed, sid, text("look"), resource("file:///w/logo.pdf", blob=blob, mimeType="application/pdf"))

    sent = user_text(zed)
    assert "[attached binary data: /w/logo.pdf (application/pdf, 1,024 bytes); its content is not shown to you]" in sent
    assert blob[:32] not in sent


def test_an_oversized_resource_is_cut_and_says_so(zed: Agent) -> None:
    sid = zed.session()
    body = "".join(f"row {n:06d}\n" for n in range(20_000))  # 220 KB

    prompt(zed, sid, text("summarize"), resource((zed.root / "big.log").as_uri(), text=body))

    sent = user_text(zed)
    assert "row 000000" in sent and "row 019999" not in sent
    assert "[attached text cut at about 9,000 tokens: 3,272 of 20,000 lines shown; read " in sent
    assert len(sent) < 40_000


def test_a_percent_encoded_link_is_decoded_and_other_schemes_are_named(zed: Agent) -> None:
    sid = zed.session()
    target = zed.root / "a b.py"
    target.write_text("x = 1\n")

    prompt(
        zed,
        sid,
        text("read these"),
        {"type": "resource_link", "uri": target.as_uri(), "name": "a b.py"},
        {"type": "resource_link", "uri": "https://example.com/spec", "name": "spec"},
    )

    sent = user_text(zed)
    assert f"[attached: a b.py -> {target}]" in sent
    assert "%20" not in sent
    assert "[attached: spec -> https://example.com/spec (not a local file; term2 does not open it)]" in sent


def test_session_load_replays_the_resource_as_it_came(zed: Agent) -> None:
    sid = zed.session()
    blocks = [
        text("compare"),
        resource((zed.root / "x y.txt").as_uri(), text="left\n", mimeType="text/plain"),
        resource("file:///w/doc.pdf", blob="JVBERi0=", mimeType="application/pdf"),
    ]
    prompt(zed, sid, *blocks)

    assert set(zed.proc.result("session/load", {"sessionId": sid, "cwd": str(zed.root), "mcpServers": []})) == {
        "configOptions",
        "modes",
    }  # v1's pickers and modes (ADR 0043, 0044)

    replayed = [u["content"] for u in updates(zed.proc.log, "user_message_chunk")]
    assert replayed[-3:] == blocks


def test_a_bad_resource_is_refused_and_nothing_is_lost(zed: Agent) -> None:
    sid = zed.session()
    before = len(zed.llm.requests)
    response = zed.proc.call(
        "session/prompt", {"sessionId": sid, "prompt": [resource("file:///w/a.png", blob="not base64!")]}
    )
    assert response["error"]["code"] == -32602
    assert "resource.blob is not base64" in response["error"]["message"]
    assert len(zed.llm.requests) == before

    assert bare(prompt(zed, sid, text("still here"))["result"]) == {"stopReason": "end_turn"}


# --- command output as a display-only terminal -----------------------------------------------


def _metas(messages: list[Message], key: str) -> list[dict[str, Any]]:
    return [u["_meta"][key] for u in updates(messages) if key in (u.get("_meta") or {})]


def test_a_client_that_draws_terminals_gets_zeds_terminal_meta(zed: Agent) -> None:
    sid = zed.session()
    zed.answers.policy = select("allow-once")
    zed.llm.push({"tool_calls": [shell_call("printf 'one\\n'; printf 'two\\n'; exit 3")]})
    prompt(zed, sid, text("run it"))
    messages = zed.proc.log

    [info] = _metas(messages, "terminal_info")
    terminal_id = info["terminal_id"]
    assert info == {"terminal_id": terminal_id, "cwd": str(zed.root.resolve())}
    [created] = [u for u in updates(messages) if "terminal_info" in (u.get("_meta") or {})]
    assert created["sessionUpdate"] == "tool_call"  # Zed creates a display terminal from a tool_call only
    assert created["content"] == [{"type": "terminal", "terminalId": terminal_id}]
    assert created["title"].startswith("Run `printf")

    outputs = _metas(messages, "terminal_output")
    assert {o["terminal_id"] for o in outputs} == {terminal_id}
    assert "".join(o["data"] for o in outputs) == "one\ntwo\n"
    assert _metas(messages, "terminal_exit") == [{"terminal_id": terminal_id, "exit_code": 3, "signal": None}]

    of_call = [u for u in updates(messages) if u.get("toolCallId") == created["toolCallId"]]
    keys = [key for u in of_call for key in (u.get("_meta") or {})]
    assert keys.index("terminal_info") < keys.index("terminal_output") < keys.index("terminal_exit")
    calls = [u for u in updates(messages) if u["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in u]
    assert calls[-1]["status"] == "failed"  # exit code 3
    assert all(c["type"] == "terminal" for u in calls for c in u.get("content", []))
    assert "one\ntwo" in zed.llm.requests[-1].body["messages"][-1]["content"]  # the model reads it as before

    zed.proc.result("session/load", {"sessionId": sid, "cwd": str(zed.root), "mcpServers": []})
    assert [i["terminal_id"] for i in _metas(zed.proc.log, "terminal_info")] == [terminal_id]
    assert "".join(o["data"] for o in _metas(zed.proc.log, "terminal_output")).startswith("one\ntwo\n")
    assert _metas(zed.proc.log, "terminal_exit") == [{"terminal_id": terminal_id, "exit_code": 3, "signal": None}]


def test_a_client_that_does_not_gets_todays_updates(plain: Agent) -> None:
    sid = plain.session()
    plain.answers.policy = select("allow-once")
    plain.llm.push({"tool_calls": [shell_call("printf 'one\\ntwo\\n'")]})
    prompt(plain, sid, text("run it"))
    messages = plain.proc.log

    tool_updates = [u for u in updates(messages) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert tool_updates and all("_meta" not in u for u in tool_updates)
    assert [u["sessionUpdate"] for u in tool_updates].count("tool_call") == 1
    final = [u for u in tool_updates if u.get("status") == "completed"][-1]
    assert final["content"][0]["type"] == "content"
    assert final["content"][0]["content"]["text"].startswith("$ printf")
    assert "one\ntwo" in final["content"][0]["content"]["text"]
