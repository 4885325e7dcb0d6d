"""Issue 29 part 4 end to end: news for the user goes as `notice` updates only to v1 clients that
advertised `session.notices`, never into the model's transcript; other clients keep today's text,
each notice on its own line.

A real `term2 acp` against the fake provider: a retried 503 (the retry notice), an MCP server that
cannot start (the MCP notice), the context compaction a small window forces. Every message is
validated against the negotiated version's schema on close.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e.test_context_e2e import LIMIT_CHARS, TURNS, WINDOW, big_file, prompt_text, responder
from tests.e2e.test_native_wires_e2e import openai_env
from tests.e2e.test_prompts import FIRST_TURN_TIMEOUT, make_workspace, run_v1, run_v2, write_config
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, updates

Message = dict[str, Any]
NOTICES: Message = {"session": {"notices": {}}}


def start(tmp_path: Path, llm: FakeLLMServer, capabilities: Message | None, version: int = 1) -> AcpProcess:
    env = {**openai_env(llm), "TERM2_RETRY_MAX_ATTEMPTS": "3"}
    client = AcpProcess(tmp_path, env=env)
    client.initialize(version, capabilities)
    return client


def sent_to_model(llm: FakeLLMServer) -> str:
    return "\n".join(json.dumps(r.body["messages"]) for r in llm.requests if r.protocol == "openai")


def texts(messages: list[Message], kind: str) -> str:
    return "".join(u["content"]["text"] for u in updates(messages, kind))


def test_a_retry_is_a_notice_for_a_client_that_takes_them_and_never_reaches_the_model(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push({"status": 503}, {"text": "back"}, {"text": "again"})
        client = start(tmp_path, llm, NOTICES)
        try:
            sid = client.new_session(workspace)
            messages = run_v1(client, sid, "hi", timeout=FIRST_TURN_TIMEOUT)
            assert messages[-1]["result"]["stopReason"] == "end_turn", messages[-1]
            [notice] = updates(messages, "notice")
            assert notice["severity"] == "warning" and notice["title"].startswith("Retrying in"), notice
            assert "Retrying" not in texts(messages, "agent_thought_chunk") + texts(messages, "agent_message_chunk")
            run_v1(client, sid, "and then?", timeout=FIRST_TURN_TIMEOUT)
            assert len(llm.requests) == 3
            assert "Retrying" not in sent_to_model(llm)  # never in what the model reads back
        finally:
            client.close()
        client.validate_schemas()


@pytest.mark.parametrize("version", [1, 2])
def test_a_client_without_notices_keeps_the_thought_on_its_own_line(tmp_path: Path, version: int) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push({"status": 503}, {"thought": "Thinking hard.", "text": "back"})
        client = start(tmp_path, llm, None, version)
        try:
            sid = client.new_session(workspace)
            if version == 1:
                messages = run_v1(client, sid, "hi", timeout=FIRST_TURN_TIMEOUT)
                thoughts = texts(messages, "agent_thought_chunk")
                assert "\nRetrying in " in thoughts and thoughts.index("Thinking hard.") > thoughts.index("\n", 1)
            else:
                _, messages = run_v2(client, sid, "hi", timeout=FIRST_TURN_TIMEOUT)
                thoughts = [u["content"]["text"] for u in updates(messages, "agent_thought_chunk")]
                assert any(t.startswith("Retrying in") for t in thoughts), thoughts  # v2 exactly as before
            assert updates(messages, "notice") == []
            assert "Retrying" not in sent_to_model(llm)
        finally:
            client.close()
        client.validate_schemas()


@pytest.mark.parametrize("takes_notices", [True, False])
def test_an_mcp_server_that_cannot_start_is_a_notice_only_where_advertised(tmp_path: Path, takes_notices: bool) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        client = start(tmp_path, llm, NOTICES if takes_notices else None)
        try:
            broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
            sid = client.result("session/new", {"cwd": str(workspace), "mcpServers": [broken]})["sessionId"]

            def told(message: Message) -> bool:
                if message.get("method") != "session/update" or message["params"]["sessionId"] != sid:
                    return False
                update = message["params"]["update"]
                text = update.get("title", "") + update.get("content", {}).get("text", "")
                return "'broken' could not be started" in text

            [*_, last] = client.collect_until(told, timeout=30)
            update = last["params"]["update"]
            if takes_notices:
                assert update["sessionUpdate"] == "notice" and update["severity"] == "warning", update
            else:
                assert update["sessionUpdate"] == "agent_message_chunk", update
                assert update["content"]["text"].startswith("\n") and update["content"]["text"].endswith("\n")
        finally:
            client.close()
        client.validate_schemas()


@pytest.mark.slow
def test_compaction_is_announced_as_notices_to_a_client_without_the_compaction_capability(tmp_path: Path) -> None:
    """The compaction a small window forces (the context tests' rig): a client that takes notices but not
    compaction updates hears its start and end as notices, not as a thought."""
    root = tmp_path / "project"
    root.mkdir()
    big_file(root)
    write_config(tmp_path, f'[models."openai/fake-model"]\ncontext_window = {WINDOW}\n')
    with start_fake_llm(max_prompt_chars=LIMIT_CHARS) as llm:
        llm.responder = responder
        client = AcpProcess(tmp_path, env=llm_env(llm))
        try:
            client.initialize(1, NOTICES)
            sid = client.new_session(root)
            seen: list[Message] = []
            for turn in range(TURNS):
                client.log.clear()
                prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": prompt_text(turn)}]}
                assert client.result("session/prompt", prompt, timeout=FIRST_TURN_TIMEOUT)["stopReason"] == "end_turn"
                seen += client.log
                titles = [n["title"] for n in updates(seen, "notice")]
                if any(t.startswith("The conversation was compacted") for t in titles):
                    break
            assert titles and titles[0].startswith("Compacting the conversation"), titles
            assert any(t.startswith("The conversation was compacted") for t in titles), titles
            assert "Compacting" not in texts(seen, "agent_thought_chunk")
            assert "compaction_update" not in [u["sessionUpdate"] for u in updates(seen)]
            assert "Compacting the conversation" not in sent_to_model(llm)
        finally:
            client.close()
        client.validate_schemas()
