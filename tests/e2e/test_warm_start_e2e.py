"""Issue 32 end to end: once a session exists, `term2 acp` opens the model endpoint's connection ahead.

A recording TCP relay sits between term2 and the fake model server, so the
test sees connections as the network does: which were opened before the
prompt was sent, and what bytes each carried. Nothing here waits on a clock
except guards against a hang: the relay is asked whether a connection was
accepted before the prompt is sent, which is an ordering, not a duration.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_native_wires_e2e import litellm_was_loaded, openai_env
from tests.e2e.test_prompts import FIRST_TURN_TIMEOUT, GUARD, idle_update, make_workspace
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.fakes.recording_relay import RecordingRelay, recording_relay
from tests.support.acp_process import AcpProcess, updates

REQUEST = b"POST /v1/chat/completions "


def _env(llm: FakeLLMServer, relay: RecordingRelay) -> dict[str, str]:
    env = openai_env(llm)
    env["OPENAI_BASE_URL"] = f"http://127.0.0.1:{relay.port}/v1"
    for name in ("http_proxy", "https_proxy", "all_proxy"):  # with a proxy nothing is opened ahead (ADR 0048)
        env[name] = env[name.upper()] = ""
    return env


def _reply_text(messages: list[dict[str, object]]) -> str:
    chunks = updates(messages, "agent_message_chunk")
    return "".join(str(u["content"]["text"]) for u in chunks)  # type: ignore[index]


def test_the_first_request_goes_out_on_a_connection_opened_before_the_prompt(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm, recording_relay(("127.0.0.1", llm.port)) as relay:
        llm.push({"text": "Hello there."})
        client = AcpProcess(tmp_path, env=_env(llm, relay))
        try:
            client.initialize(2)
            sid = client.new_session(workspace)
            assert relay.wait_for(1, GUARD), "no connection to the model endpoint was opened after session/new"
            before = relay.snapshot()
            assert before[0][1] == b"", f"bytes were sent on the connection before the prompt: {before[0][1]!r}"
            _ack, messages = client.prompt_v2(sid, "Say hello.", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(messages)["stopReason"] == "end_turn", client.stderr()[-3000:]
            assert _reply_text(messages) == "Hello there."
            after = relay.snapshot()
            assert after[0][1].startswith(REQUEST), after  # the opened-ahead connection carried the request
            assert not any(data for _, data, _ in after[1:]), after  # and no other connection carried anything
        finally:
            assert client.close() == 0
        client.assert_stdout_is_protocol()
        assert not litellm_was_loaded(client)  # a native wire never imports litellm, warming included


def test_a_connection_the_server_closed_before_the_prompt_is_dropped_silently(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm, recording_relay(("127.0.0.1", llm.port), drop_first=1) as relay:
        llm.push({"text": "Still here."})
        client = AcpProcess(tmp_path, env=_env(llm, relay))
        try:
            client.initialize(2)
            sid = client.new_session(workspace)
            assert relay.wait_for(1, GUARD), "no connection to the model endpoint was opened after session/new"
            assert relay.snapshot()[0][2]  # the server hung up on it before any prompt
            _ack, messages = client.prompt_v2(sid, "Are you there?", timeout=FIRST_TURN_TIMEOUT)
            assert idle_update(messages)["stopReason"] == "end_turn", client.stderr()[-3000:]
            assert _reply_text(messages) == "Still here."
            assert len([r for r in llm.requests if r.path.endswith("/chat/completions")]) == 1  # no retry was needed
        finally:
            assert client.close() == 0
        client.assert_stdout_is_protocol()
        assert [m for who, m in client.transcript if who == "agent" and "error" in m] == []
