"""Issue 13 end to end: a real `term2 acp` on the native wires, against fakes that enforce the providers' rules.

The fake Anthropic server refuses (400, Anthropic's own body) more than four
`cache_control` blocks, and, with thinking on, a tool loop whose last assistant
message does not start with the signed thinking block it issued. So a passing
two-turn session with a tool call proves the breakpoints and the reasoning
round-trip; the recorded bodies show the prefix is byte-identical. The OpenAI
fake records `prompt_cache_key`. Neither process may import litellm: it says at
debug level, on shutdown, whether `litellm` is in `sys.modules`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_prompts import FIRST_TURN_TIMEOUT, idle_update, make_workspace
from tests.fakes.llm_accounting import count_cache_control
from tests.fakes.llm_server import FakeLLMServer, RecordedRequest, start_fake_llm
from tests.support.acp_process import AcpProcess, updates

Message = dict[str, Any]
ANTHROPIC_MODEL = "anthropic/claude-sonnet-4-5"  # in the catalog, with prices and thinking


def anthropic_env(server: FakeLLMServer) -> dict[str, str]:
    return {
        "TERM2_MODEL": ANTHROPIC_MODEL,
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": server.base_url,
        "TERM2_EFFORT": "low",
    }


def openai_env(server: FakeLLMServer, model: str = "openai/gpt-4o-mini") -> dict[str, str]:
    return {"TERM2_MODEL": model, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url + "/v1"}


def litellm_was_loaded(client: AcpProcess) -> bool:
    lines = [line for line in client.stderr().splitlines() if "shutting down" in line and "litellm_loaded" in line]
    assert lines, "no shutdown line at debug level"
    return "litellm_loaded=True" in lines[-1] or '"litellm_loaded": true' in lines[-1]


def model_requests(server: FakeLLMServer, protocol: str) -> list[RecordedRequest]:
    return [r for r in server.requests if r.protocol == protocol]


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    root = make_workspace(tmp_path)
    (root / "notes.txt").write_text("remember the milk\n")
    yield root


def test_anthropic_two_turns_with_a_tool_keep_breakpoints_thinking_and_the_prefix(
    tmp_path: Path, workspace: Path
) -> None:
    with start_fake_llm(require_key="sk-ant-test") as llm:
        llm.push(
            {
                "thought": "I should read the notes.",
                "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
            },
            {"thought": "It says milk.", "text": "The notes say: remember the milk."},
            {"thought": "Short answer.", "text": "You are welcome."},
        )
        client = AcpProcess(tmp_path, env=anthropic_env(llm))
        try:
            client.initialize(2)
            sid = client.new_session(workspace)
            _ack, first = client.prompt_v2(sid, "What do my notes say?", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(first)["stopReason"] == "end_turn", client.stderr()[-3000:]
            _ack, second = client.prompt_v2(sid, "Thanks!", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(second)["stopReason"] == "end_turn"
            assert client.close() == 0
            client.validate_schemas()
            assert not litellm_was_loaded(client)
        finally:
            client.kill()
    sent = model_requests(llm, "anthropic")
    assert len(sent) == 3 and all(r.status == "completed" for r in sent), [(r.status, r.rejection) for r in sent]
    assert all(1 <= count_cache_control(r.body) <= 4 for r in sent)
    assert all(r.body.get("thinking", {}).get("type") == "enabled" for r in sent)
    # The tool loop's second request sends the signed thinking block back first (the fake checks the signature).
    loop = sent[1].body["messages"]
    assistant = [m for m in loop if m["role"] == "assistant"][-1]
    assert assistant["content"][0]["type"] == "thinking" and assistant["content"][0]["signature"]
    # System and tools byte-identical across the session, and each request extends the one before.
    assert len({json.dumps([r.body["system"], r.body["tools"]]) for r in sent}) == 1

    def plain(messages: list[Message]) -> str:
        stripped = json.loads(json.dumps(messages))
        for message in stripped:
            for block in message["content"] if isinstance(message["content"], list) else []:
                block.pop("cache_control", None)
        return json.dumps(stripped)

    for earlier, later in itertools.pairwise(sent):
        before = plain(earlier.body["messages"])[:-1]  # without the closing bracket
        assert plain(later.body["messages"]).startswith(before)


def test_openai_sees_one_cache_key_per_session_and_cost_grows(tmp_path: Path, workspace: Path) -> None:
    with start_fake_llm() as llm:
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            client.initialize(2)
            one, other = client.new_session(workspace), client.new_session(workspace)
            seen: list[Message] = []
            for sid, text in ((one, "first"), (one, "second"), (other, "elsewhere")):
                _ack, messages = client.prompt_v2(sid, text, timeout=FIRST_TURN_TIMEOUT)
                assert idle_update(messages)["stopReason"] == "end_turn"
                seen.append(idle_update(messages))
                costs = [u["cost"]["amount"] for u in updates(messages, "usage_update")]
                assert costs and all(c > 0 for c in costs)
            usage_one = seen[:2]
            assert all(u["usage"]["inputTokens"] > 0 and u["usage"]["outputTokens"] > 0 for u in seen)
            session_costs = [u["_meta"]["term2"]["session"]["cost"] for u in usage_one]
            assert session_costs[1] > session_costs[0] > 0  # cumulative within the session
            assert seen[2]["_meta"]["term2"]["session"]["cost"] < session_costs[1]  # another session starts afresh
            assert client.close() == 0
            client.validate_schemas()
            assert not litellm_was_loaded(client)
        finally:
            client.kill()
    keys = [r.body.get("prompt_cache_key") for r in model_requests(llm, "openai")]
    assert keys[0] and keys[0] == keys[1] and keys[2] and keys[2] != keys[0]
    assert "sess_" not in str(keys)  # a digest, not the session id (a bearer secret)


def test_v1_prompt_response_carries_usage_and_cost(tmp_path: Path, workspace: Path) -> None:
    with start_fake_llm() as llm:
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            client.initialize(1)
            sid = client.new_session(workspace)
            params = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            result = client.result("session/prompt", params, timeout=FIRST_TURN_TIMEOUT)
            assert result["stopReason"] == "end_turn"
            assert result["usage"]["totalTokens"] == result["usage"]["inputTokens"] + result["usage"]["outputTokens"]
            assert result["_meta"]["term2"]["turn"]["cost"] > 0 and result["_meta"]["term2"]["currency"] == "USD"
            assert client.close() == 0
            client.validate_schemas()
        finally:
            client.kill()


def test_the_litellm_wire_still_serves_openai_by_configuration(tmp_path: Path, workspace: Path) -> None:
    folder = tmp_path / "xdg-config" / "term2"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text('[providers.openai]\nwire = "litellm"\n')
    with start_fake_llm() as llm:
        llm.push({"text": "through litellm"})
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            client.initialize(2)
            sid = client.new_session(workspace)
            _ack, messages = client.prompt_v2(sid, "hi", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(messages)["stopReason"] == "end_turn"
            text = "".join(u["content"]["text"] for u in updates(messages, "agent_message_chunk"))
            assert text == "through litellm"
            assert client.close() == 0
            assert litellm_was_loaded(client)
        finally:
            client.kill()
