"""Issue 4, prompt turns: the ACP v1/v2 prompt lifecycle over a real `term2 acp`.

Every test drives a real subprocess whose LLM adapter is the real litellm one,
pointed at the local fake OpenAI/Anthropic server, and every transcript is
checked against the official ACP JSON schemas. A process pays a litellm import,
so one v2 and one v1 process (module scoped) serve most tests, each test on its
own fresh sessions; failures and the Anthropic swap get their own processes
because they need their own environment.
"""

from __future__ import annotations

import contextlib
import json
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, allow_kind, bare, is_update, updates
from tests.support.net import closed_port

Message = dict[str, Any]
Predicate = Callable[[Message], bool]

# The first turn of a process waits for litellm's import (seconds; much more on a busy box).
FIRST_TURN_TIMEOUT = 120.0
GUARD = 60.0  # seconds: a guard against a hang only; what it guards lasts longer
CONTEXT_WINDOW = 200_000  # a real window: these tests are not about compaction (test_context_e2e is)
CONFIG = f"""
[models."openai/fake-model"]
context_window = {CONTEXT_WINDOW}
"""


# --------------------------------------------------------------------------- rigs


@dataclass
class Rig:
    client: AcpProcess
    llm: FakeLLMServer
    workspace: Path


def make_workspace(base: Path) -> Path:
    root = base / "project"
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text("# demo project\n")
    return root


def write_config(base: Path, text: str) -> None:
    folder = base / "xdg-config" / "term2"  # AcpProcess sets XDG_CONFIG_HOME=<base>/xdg-config
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)


@contextlib.contextmanager
def shared_rig(base: Path, version: int, env: dict[str, str]) -> Iterator[Rig]:
    workspace = make_workspace(base)
    write_config(base, CONFIG)
    with start_fake_llm() as server:
        client = AcpProcess(base, env={**llm_env(server), **env})
        try:
            client.initialize(version)
            warm_up(client, workspace, version)
            yield Rig(client, server, workspace)
            assert client.close() == 0, client.stderr()[-3000:]
            client.validate_schemas()
        finally:
            client.kill()


def warm_up(client: AcpProcess, workspace: Path, version: int) -> None:
    """One echo turn, so that the tests' own turns do not pay for importing litellm."""
    sid = client.new_session(workspace)
    if version == 2:
        client.prompt_v2(sid, "warm up", timeout=FIRST_TURN_TIMEOUT)
    else:
        client.result("session/prompt", prompt_params(sid, "warm up"), timeout=FIRST_TURN_TIMEOUT)


@pytest.fixture(scope="module")
def v2_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with shared_rig(tmp_path_factory.mktemp("v2"), 2, {"TERM2_MAX_TURN_REQUESTS": "2"}) as rig:
        yield rig


@pytest.fixture(scope="module")
def v1_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with shared_rig(tmp_path_factory.mktemp("v1"), 1, {}) as rig:
        yield rig


def _fresh(rig: Rig) -> Iterator[Rig]:
    """Each test starts with an empty reply queue and inbox, and ends with a schema check."""
    drain(rig.client)
    rig.llm.state.reset()
    yield rig
    rig.client.validate_schemas()


@pytest.fixture
def v2(v2_rig: Rig) -> Iterator[Rig]:
    yield from _fresh(v2_rig)


@pytest.fixture
def v1(v1_rig: Rig) -> Iterator[Rig]:
    yield from _fresh(v1_rig)


# --------------------------------------------------------------------------- helpers


def drain(client: AcpProcess) -> list[Message]:
    out = []
    while True:
        try:
            out.append(client.next(timeout=0.05))
        except queue.Empty:
            return out


def prompt_params(session_id: str, *blocks: Message | str) -> Message:
    prompt = [{"type": "text", "text": b} if isinstance(b, str) else b for b in blocks]
    return {"sessionId": session_id, "prompt": prompt}


def is_idle(session_id: str) -> Predicate:
    return is_update(session_id, "state_update", state="idle")


def is_response(request_id: int) -> Predicate:
    return lambda m: m.get("id") == request_id and "method" not in m


def of_session(messages: list[Message], session_id: str, *request_ids: Any) -> list[Message]:
    """The updates for one session plus the responses to the given requests, in arrival order."""
    return [
        m
        for m in messages
        if (m.get("method") == "session/update" and m["params"]["sessionId"] == session_id)
        or ("method" not in m and m.get("id") in request_ids)
    ]


def kinds(messages: list[Message]) -> list[str]:
    """Each message as a short tag: `ack`/`error` for responses, the update kind otherwise."""
    out = []
    for m in messages:
        if m.get("method") == "session/update":
            update = m["params"]["update"]
            tag = update["sessionUpdate"]
            if tag == "state_update":
                tag = f"{update['state']}:{update['stopReason']}" if "stopReason" in update else update["state"]
            out.append(tag)
        elif "result" in m:
            out.append("ack")
        elif "error" in m:
            out.append("error")
        else:
            out.append(m.get("method", "?"))
    return out


def squeeze(tags: list[str]) -> list[str]:
    """Collapse runs of one tag, so the number of chunks does not matter to order checks."""
    out: list[str] = []
    for tag in tags:
        if not out or out[-1] != tag:
            out.append(tag)
    return out


def flow(messages: list[Message]) -> list[str]:
    """The turn's shape: squeezed tags without usage updates (the usage test checks those)."""
    return squeeze([tag for tag in kinds(messages) if tag != "usage_update"])


def text_of(chunks: list[Message]) -> str:
    return "".join(u["content"]["text"] for u in chunks)


def run_v2(
    client: AcpProcess, session_id: str, *blocks: Message | str, timeout: float = 30
) -> tuple[int, list[Message]]:
    """One v2 turn: the request id and this session's messages up to its idle update."""
    request_id = client.request("session/prompt", prompt_params(session_id, *blocks))
    messages = client.collect_until(is_idle(session_id), timeout)
    return request_id, of_session(messages, session_id, request_id)


def run_v1(client: AcpProcess, session_id: str, *blocks: Message | str, timeout: float = 30) -> list[Message]:
    """One v1 turn: this session's updates, then the prompt's response (last)."""
    request_id = client.request("session/prompt", prompt_params(session_id, *blocks))
    messages = client.collect_until(is_response(request_id), timeout)
    return of_session(messages, session_id, request_id)


def idle_update(messages: list[Message]) -> Message:
    idle = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
    assert len(idle) == 1, idle
    return idle[0]


def assert_disconnected(llm: FakeLLMServer, index: int = 0) -> None:
    """The fake provider saw term2 hang up on the stream (no more generation, no more billing)."""
    request = llm.wait_until_closed(index, timeout=GUARD)
    assert request is not None, "the model request was never closed"
    assert request.status == "disconnected", request.status


def slow_stream(words: int = 400, delay: float = 0.25) -> Message:
    """100 s by default: longer than any guard, so a cancel that did not work cannot pass for one that did."""
    return {"text": " ".join(f"w{i}" for i in range(words)), "chunk_delay": delay}


# --------------------------------------------------------------------------- v2 lifecycle


def test_v2_exact_order_one_message_id_and_thoughts(v2: Rig) -> None:
    sid = v2.client.new_session(v2.workspace)
    v2.llm.push({"text": "Hello there, human friend.", "chunks": 4})
    request_id, messages = run_v2(v2.client, sid, "say hello")

    assert flow(messages) == [
        "running",
        "ack",
        "user_message",
        "agent_message_chunk",
        "idle:end_turn",
    ], kinds(messages)
    assert messages[1] == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    user = updates(messages, "user_message")[0]
    assert user["content"] == [{"type": "text", "text": "say hello"}]
    assert isinstance(user["messageId"], str) and user["messageId"]
    chunks = updates(messages, "agent_message_chunk")
    assert len(chunks) == 4
    assert len({c["messageId"] for c in chunks}) == 1
    assert chunks[0]["messageId"] != user["messageId"]
    assert text_of(chunks) == "Hello there, human friend."
    assert bare(messages[-1]["params"]["update"]) == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }

    v2.llm.push({"thought": "Let me think about it.", "thought_chunks": 2, "text": "Done.", "chunks": 1})
    _, messages = run_v2(v2.client, sid, "think first")
    assert flow(messages) == [
        "running",
        "ack",
        "user_message",
        "agent_thought_chunk",
        "agent_message_chunk",
        "idle:end_turn",
    ], kinds(messages)
    thoughts = updates(messages, "agent_thought_chunk")
    answer = updates(messages, "agent_message_chunk")
    assert text_of(thoughts) == "Let me think about it."
    assert text_of(answer) == "Done."
    assert len({t["messageId"] for t in thoughts}) == 1
    assert thoughts[0]["messageId"] != answer[0]["messageId"]
    assert updates(messages, "user_message")[0]["messageId"] != user["messageId"]
    # The second request carries the first turn as history.
    sent = v2.llm.requests[-1].body["messages"]
    assert [m["role"] for m in sent][-3:] == ["user", "assistant", "user"]
    assert sent[-2]["content"] == "Hello there, human friend."


def test_v2_usage_update_when_the_context_window_is_known(v2: Rig) -> None:
    sid = v2.client.new_session(v2.workspace)
    v2.llm.push({"text": "counted", "usage": {"input_tokens": 120, "output_tokens": 7}})
    _, messages = run_v2(v2.client, sid, "count my tokens")
    tags = squeeze(kinds(messages))
    assert tags == ["running", "ack", "user_message", "agent_message_chunk", "usage_update", "idle:end_turn"], tags
    reported = {"term2": {"usage": "reported"}}  # the provider's own count, not term2's estimate
    usage = {"sessionUpdate": "usage_update", "used": 127, "size": CONTEXT_WINDOW, "_meta": reported}
    assert updates(messages, "usage_update") == [usage]


def test_v2_second_prompt_refused_while_streaming_other_sessions_independent(v2: Rig) -> None:
    client = v2.client
    busy, other = client.new_session(v2.workspace), client.new_session(v2.workspace)
    v2.llm.push(slow_stream(words=20, delay=0.25))
    first = client.request("session/prompt", prompt_params(busy, "long answer please"))
    early = client.collect_until(is_update(busy, "agent_message_chunk"))

    second = client.request("session/prompt", prompt_params(busy, "and another thing"))
    refusal = client.collect_until(is_response(second))
    error = refusal[-1]["error"]
    assert error["code"] == -32000
    assert "already" in error["message"] and busy in error["message"]

    # Another session runs a whole turn while the first is still streaming.
    assert v2.llm.wait_for_request(1)
    v2.llm.push({"text": "quick reply"})
    other_id = client.request("session/prompt", prompt_params(other, "quick question"))
    meanwhile = client.collect_until(is_idle(other), timeout=30)
    other_turn = of_session(meanwhile, other, other_id)
    assert flow(other_turn) == ["running", "ack", "user_message", "agent_message_chunk", "idle:end_turn"]
    assert text_of(updates(other_turn, "agent_message_chunk")) == "quick reply"

    rest = client.collect_until(is_idle(busy), timeout=30)
    during = early + refusal + meanwhile
    assert not [m for m in during if is_idle(busy)(m)], "the busy session finished before the other one"
    mine = of_session(during + rest, busy, first, second)
    assert flow(mine) == [
        "running",
        "ack",
        "user_message",
        "agent_message_chunk",
        "error",
        "agent_message_chunk",
        "idle:end_turn",
    ], kinds(mine)
    assert text_of(updates(mine, "agent_message_chunk")) == slow_stream(words=20)["text"]
    assert len(v2.llm.requests) == 2  # the refused prompt never reached the model


def test_v2_back_to_back_prompts_in_one_write_second_refused_during_preparation(v2: Rig) -> None:
    client = v2.client
    sid = client.new_session(v2.workspace)
    v2.llm.push({"text": "only once"})
    lines = [
        {"jsonrpc": "2.0", "id": f"pp-{n}", "method": "session/prompt", "params": prompt_params(sid, f"prompt {n}")}
        for n in (1, 2)
    ]
    for line in lines:
        client.transcript.append(("client", line))
    client.send_raw(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    messages = client.collect_until(is_idle(sid), timeout=30)
    answers = {m["id"]: m for m in messages if "method" not in m}
    assert answers["pp-1"] == {"jsonrpc": "2.0", "id": "pp-1", "result": {}}
    assert answers["pp-2"]["error"]["code"] == -32000
    assert flow(of_session(messages, sid, "pp-1")) == [
        "running",
        "ack",
        "user_message",
        "agent_message_chunk",
        "idle:end_turn",
    ]
    assert updates(messages, "user_message")[0]["content"][0]["text"] == "prompt 1"
    assert len(v2.llm.requests) == 1


# --------------------------------------------------------------------------- v2 cancellation


def test_v2_cancel_during_streaming_then_prompt_again_and_replay(v2: Rig) -> None:
    client = v2.client
    sid = client.new_session(v2.workspace)
    v2.llm.push(slow_stream())
    request_id = client.request("session/prompt", prompt_params(sid, "stream slowly"))
    early = client.collect_until(is_update(sid, "agent_message_chunk"))
    client.notify("session/cancel", {"sessionId": sid})
    tail = client.collect_until(is_idle(sid), timeout=GUARD)
    assert bare(idle_update(tail)) == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    assert_disconnected(v2.llm, 0)
    turn = of_session(early + tail, sid, request_id)
    assert flow(turn) == ["running", "ack", "user_message", "agent_message_chunk", "idle:cancelled"]
    partial = text_of(updates(turn, "agent_message_chunk"))
    assert partial and slow_stream()["text"].startswith(partial)
    assert partial != slow_stream()["text"]

    # Nothing of the cancelled turn trails its idle update, and cancelling an idle session (clients
    # do send duplicates) must not produce a stray idle: the next turn's running comes first.
    client.notify("session/cancel", {"sessionId": sid})
    client.notify("session/cancel", {"sessionId": sid})
    v2.llm.push({"text": "fresh start"})
    _, again = run_v2(v2.client, sid, "try again")
    assert flow(again) == ["running", "ack", "user_message", "agent_message_chunk", "idle:end_turn"]
    assert text_of(updates(again, "agent_message_chunk")) == "fresh start"
    history = v2.llm.requests[-1].body["messages"]
    assert [m["content"] for m in history if m["role"] == "user"][-2:] == ["stream slowly", "try again"]

    # Resume with replay redraws both turns, the interrupted one included.
    resumed = client.call(
        "session/resume", {"sessionId": sid, "cwd": str(v2.workspace), "replayFrom": {"type": "start"}}
    )
    assert resumed["result"] == {}
    replayed = of_session(client.log, sid)
    assert kinds(replayed) == ["user_message", "agent_message", "user_message", "agent_message"]
    texts = [u["content"][0]["text"] for u in updates(replayed)]
    assert texts == ["stream slowly", partial, "try again", "fresh start"]
    v2.llm.push({"text": "after resume"})
    _, resumed_turn = run_v2(v2.client, sid, "still there?")
    assert idle_update(resumed_turn)["stopReason"] == "end_turn"


def test_v2_cancel_while_the_model_is_slow_to_answer(v2: Rig) -> None:
    client = v2.client
    sid = client.new_session(v2.workspace)
    v2.llm.push({"text": "too late", "delay_first_byte": 1000})  # a cancel that waited for it would not end
    request_id = client.request("session/prompt", prompt_params(sid, "are you there?"))
    assert v2.llm.wait_for_request(1, timeout=30)
    client.notify("session/cancel", {"sessionId": sid})
    messages = of_session(client.collect_until(is_idle(sid), timeout=GUARD), sid, request_id)
    assert flow(messages) == ["running", "ack", "user_message", "idle:cancelled"], kinds(messages)
    assert_disconnected(v2.llm, 0)

    v2.llm.push({"text": "back again"})
    _, again = run_v2(v2.client, sid, "once more")
    assert idle_update(again)["stopReason"] == "end_turn"
    assert text_of(updates(again, "agent_message_chunk")) == "back again"


def test_v2_cancel_sent_in_the_same_write_as_its_prompt(v2: Rig) -> None:
    """A cancel that follows its prompt on the wire cancels that prompt, even during preparation."""
    client = v2.client
    sid = client.new_session(v2.workspace)
    v2.llm.push(slow_stream())
    prompt = {"jsonrpc": "2.0", "id": "with-cancel", "method": "session/prompt", "params": prompt_params(sid, "go")}
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
    client.transcript += [("client", prompt), ("client", cancel)]
    client.send_raw(json.dumps(prompt).encode() + b"\n" + json.dumps(cancel).encode() + b"\n")
    messages = of_session(client.collect_until(is_idle(sid), timeout=GUARD), sid, "with-cancel")
    assert idle_update(messages)["stopReason"] == "cancelled", kinds(messages)
    assert flow(messages)[:2] == ["running", "ack"]
    if v2.llm.requests:  # the cancel may land before or after the model call started
        assert_disconnected(v2.llm, 0)
    assert len(v2.llm.requests) <= 1


def test_v2_cancel_denies_a_pending_permission_and_stops_a_running_tool(v2: Rig) -> None:
    client = v2.client
    sid = client.new_session(v2.workspace)
    shell = {"name": "run_shell", "arguments": {"command": "sleep 1000"}, "id": "call_sleep"}

    # Cancel while the permission request is unanswered: the call never runs, the turn is cancelled.
    v2.llm.push({"tool_calls": [shell]})
    request_id = client.request("session/prompt", prompt_params(sid, "nap"))
    asked = client.collect_until(lambda m: m.get("method") == "session/request_permission", timeout=30)
    permission_id = asked[-1]["id"]
    client.notify("session/cancel", {"sessionId": sid})
    rest = client.collect_until(is_idle(sid), timeout=GUARD)
    turn = of_session(asked + rest, sid, request_id)
    assert idle_update(turn)["stopReason"] == "cancelled"
    assert "requires_action" in flow(turn)
    withdrawn = [m for m in rest if m.get("method") == "$/cancel_request"]
    assert withdrawn and withdrawn[0]["params"] == {"requestId": permission_id}
    statuses = [u.get("status") for u in updates(turn, "tool_call_update")]
    assert "in_progress" not in statuses and "completed" not in statuses, statuses
    client.send({"jsonrpc": "2.0", "id": permission_id, "result": {"outcome": {"outcome": "cancelled"}}})
    assert len(v2.llm.requests) == 1

    # Cancel while the approved command runs: the tool is stopped, the turn ends at once.
    client.permission = allow_kind("allow_once")
    try:
        v2.llm.push({"tool_calls": [dict(shell, id="call_sleep_2")]})
        request_id = client.request("session/prompt", prompt_params(sid, "nap again"))
        running = client.collect_until(is_update(sid, "tool_call_update", status="in_progress"), timeout=30)
        call_id = running[-1]["params"]["update"]["toolCallId"]  # term2's, not the model's "call_sleep_2"
        client.notify("session/cancel", {"sessionId": sid})
        rest = client.collect_until(is_idle(sid), timeout=GUARD)  # the command sleeps 1,000 s: it was stopped
    finally:
        client.permission = None
    turn = of_session(running + rest, sid, request_id)
    assert idle_update(turn)["stopReason"] == "cancelled"
    final = [u for u in updates(turn, "tool_call_update") if u["toolCallId"] == call_id][-1]
    assert final["status"] in ("cancelled", "failed"), final
    assert len(v2.llm.requests) == 2  # the cancelled tool's result was never sent back to the model


# --------------------------------------------------------------------------- stop reasons and content


def test_v2_stop_reasons_max_tokens_refusal_and_max_turn_requests(v2: Rig) -> None:
    sid = v2.client.new_session(v2.workspace)
    v2.llm.push({"text": "cut short", "finish": "length"})
    _, messages = run_v2(v2.client, sid, "write a novel")
    assert idle_update(messages)["stopReason"] == "max_tokens"
    assert text_of(updates(messages, "agent_message_chunk")) == "cut short"

    v2.llm.push({"text": "", "finish": "content_filter"})
    _, messages = run_v2(v2.client, sid, "something forbidden")
    assert idle_update(messages)["stopReason"] == "refusal"

    # TERM2_MAX_TURN_REQUESTS=2: a model that keeps asking for a tool is stopped after 2 requests.
    read = {"name": "read_file", "arguments": {"path": "README.md"}}
    v2.llm.push(*({"tool_calls": [dict(read, id=f"call_{n}")]} for n in range(4)))
    before = len(v2.llm.requests)
    _, messages = run_v2(v2.client, sid, "read the readme forever")
    assert idle_update(messages)["stopReason"] == "max_turn_requests"
    assert len(v2.llm.requests) - before == 2
    calls = updates(messages, "tool_call_update")
    # The second response's call is not run: no model request is left to read its result.
    (ran,) = {c["toolCallId"] for c in calls}  # one call, under term2's own id (ADR 0021)
    assert ran not in {f"call_{n}" for n in range(4)} and ran.startswith("call_")
    assert [c["status"] for c in calls if c["toolCallId"] == ran][-1] == "completed"
    tool_result = v2.llm.requests[-1].body["messages"][-1]
    assert tool_result["role"] == "tool" and "# demo project" in tool_result["content"]


def test_v2_prompt_content_resource_link_accepted_media_refused(v2: Rig) -> None:
    client = v2.client
    sid = client.new_session(v2.workspace)
    readme = v2.workspace / "README.md"
    refused = {
        "image": {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        "audio": {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
        "resource": {"type": "resource", "resource": {"uri": readme.as_uri(), "text": "# demo"}},
    }
    for kind, block in refused.items():
        response = client.call("session/prompt", prompt_params(sid, "look at this", block))
        assert response["error"]["code"] == -32602, response
        assert f"'{kind}'" in response["error"]["message"]
        assert of_session(client.log, sid) == []  # refused before the turn: no running, no idle
    assert v2.llm.requests == []

    link = {"type": "resource_link", "uri": readme.as_uri(), "name": "README.md"}
    v2.llm.push({"text": "seen it"})
    _, messages = run_v2(v2.client, sid, "summarize", link)
    assert idle_update(messages)["stopReason"] == "end_turn"
    assert updates(messages, "user_message")[0]["content"][1] == link
    sent = v2.llm.requests[0].body["messages"][-1]["content"]
    assert str(readme) in sent and "summarize" in sent


# --------------------------------------------------------------------------- v1


def test_v1_exact_order_and_no_state_updates(v1: Rig) -> None:
    sid = v1.client.new_session(v1.workspace)
    v1.llm.push({"thought": "hmm", "text": "one two three", "chunks": 3})
    messages = run_v1(v1.client, sid, "count")
    # The commands' update follows the session/new reply (ADR 0043): it may land in this turn's messages.
    tags = [tag for tag in kinds(messages) if tag not in ("usage_update", "available_commands_update")]
    # The first prompt titles the session before the turn streams (ADR 0046).
    assert tags == ["session_info_update", "agent_thought_chunk"] + ["agent_message_chunk"] * 3 + ["ack"], tags
    assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
    assert text_of(updates(messages, "agent_message_chunk")) == "one two three"
    assert text_of(updates(messages, "agent_thought_chunk")) == "hmm"

    v1.llm.push({"text": "cut", "finish": "length"})
    assert bare(run_v1(v1.client, sid, "more")[-1]["result"]) == {"stopReason": "max_tokens"}
    state_updates = [
        m
        for who, m in v1.client.transcript
        if who == "agent"
        and m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "state_update"
    ]
    assert state_updates == []


def test_v1_cancel_during_streaming_and_slow_model_then_prompt_again_and_load(v1: Rig) -> None:
    client = v1.client
    sid = client.new_session(v1.workspace)
    v1.llm.push(slow_stream())
    request_id = client.request("session/prompt", prompt_params(sid, "stream slowly"))
    early = client.collect_until(is_update(sid, "agent_message_chunk"))
    busy = client.call("session/prompt", prompt_params(sid, "me too"))
    assert busy["error"]["code"] == -32000
    client.notify("session/cancel", {"sessionId": sid})
    rest = client.collect_until(is_response(request_id), timeout=GUARD)
    assert {**rest[-1], "result": bare(rest[-1]["result"])} == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"stopReason": "cancelled"},
    }
    assert_disconnected(v1.llm, 0)
    partial = text_of(updates(of_session(early + client.log + rest, sid), "agent_message_chunk"))
    assert partial and slow_stream()["text"].startswith(partial)

    v1.llm.push({"text": "never sent", "delay_first_byte": 1000})
    request_id = client.request("session/prompt", prompt_params(sid, "are you there?"))
    assert v1.llm.wait_for_request(2, timeout=30)
    client.notify("session/cancel", {"sessionId": sid})
    rest = client.collect_until(is_response(request_id), timeout=GUARD)
    [answer] = of_session(rest, sid, request_id)
    assert {**answer, "result": bare(answer["result"])} == {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {"stopReason": "cancelled"},
    }
    assert_disconnected(v1.llm, 1)

    v1.llm.push({"text": "working again"})
    messages = run_v1(v1.client, sid, "hello?")
    assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
    assert text_of(updates(messages, "agent_message_chunk")) == "working again"

    loaded = client.call("session/load", {"sessionId": sid, "cwd": str(v1.workspace), "mcpServers": []})
    assert set(loaded["result"]) == {"configOptions", "modes"}  # v1's pickers (ADR 0043)
    replayed = updates(of_session(client.log, sid))
    assert [u["sessionUpdate"] for u in replayed] == [
        "user_message_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert [u["content"]["text"] for u in replayed] == [
        "stream slowly",
        partial,
        "are you there?",
        "hello?",
        "working again",
    ]


def test_v1_cancel_request_on_a_prompt_in_flight(v1: Rig) -> None:
    client = v1.client
    sid = client.new_session(v1.workspace)
    v1.llm.push(slow_stream())
    request_id = client.request("session/prompt", prompt_params(sid, "stream slowly"))
    client.collect_until(is_update(sid, "agent_message_chunk"))
    client.notify("$/cancel_request", {"requestId": request_id})
    answer = client.collect_until(is_response(request_id), timeout=GUARD)[-1]
    assert answer["error"]["code"] == -32800, answer
    assert_disconnected(v1.llm, 0)

    v1.llm.push({"text": "still here"})
    messages = run_v1(v1.client, sid, "next")
    assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
    assert text_of(updates(messages, "agent_message_chunk")) == "still here"


# --------------------------------------------------------------------------- provider failures


FAILURES = [
    ({"status": 401}, ("401", "authentication")),
    ({"status": 429}, ("429", "rate limit")),
    ({"status": 500}, ("500", "server had an error")),
    ({"text": "never", "delay_first_byte": 20}, ("timed out",)),
    ({"text": "a b c d e", "stall_after": 2, "stall_seconds": 20}, ("timed out",)),
    ({"text": "a b c d e", "error_after": 2, "error_message": "Overloaded (fake)."}, ("overloaded",)),
]


@pytest.mark.parametrize("wire", ["litellm", "openai"])
@pytest.mark.parametrize("version", [2, 1])
def test_provider_failures_are_reported_and_the_session_stays_usable(tmp_path: Path, version: int, wire: str) -> None:
    """Through litellm and through the native adapter: the same failures read the same way."""
    workspace = make_workspace(tmp_path)
    write_config(tmp_path, f'[providers.openai]\nwire = "{wire}"\n')
    port = closed_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        "TERM2_MODEL": "openai/fake-model",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": base_url + "/v1",
        "TERM2_REQUEST_TIMEOUT": "1",
        "TERM2_RETRY_MAX_ATTEMPTS": "1",  # how failures are reported; retries are test_retries_e2e.py's
    }
    client = AcpProcess(tmp_path, env=env)
    server: FakeLLMServer | None = None
    try:
        client.initialize(version)
        sid = client.new_session(workspace)

        def fails(needles: tuple[str, ...], timeout: float = 30) -> float:
            started = time.monotonic()
            if version == 2:
                _, messages = run_v2(client, sid, "hi", timeout=timeout)
                assert flow(messages)[:3] == ["running", "ack", "user_message"]
                assert bare(messages[-1]["params"]["update"]) == {
                    "sessionUpdate": "state_update",
                    "state": "idle",
                    "stopReason": "_term2_error",
                }
                said = updates(messages, "agent_message_chunk")[-1]["content"]["text"]
            else:
                messages = run_v1(client, sid, "hi", timeout=timeout)
                error = messages[-1]["error"]
                assert error["code"] == -32603
                said = error["message"]
            for needle in needles:
                assert needle in said.lower(), said
            assert "fake-model" in said
            return time.monotonic() - started

        if wire == "litellm":  # the native path has no library to wait for
            # A cancel while the first turn still waits for litellm to load settles it at once.
            request_id = client.request("session/prompt", prompt_params(sid, "hi"))
            if version == 2:
                client.collect_until(is_update(sid, "user_message"))
            else:  # v1 says nothing until the model answers: a request read after the prompt orders the cancel
                # after it (term2 reads in order and has registered the prompt before the next line's answer)
                assert "result" in client.call("session/list", {}, timeout=GUARD)
            client.notify("session/cancel", {"sessionId": sid})
            ended = client.collect_until(is_idle(sid) if version == 2 else is_response(request_id), timeout=GUARD)
            if version == 2:
                assert idle_update(ended)["stopReason"] == "cancelled"
            else:
                assert bare(ended[-1]["result"]) == {"stopReason": "cancelled"}

        # Nothing listens on the provider's port yet: connection refused.
        fails(("cannot reach", str(port)), timeout=FIRST_TURN_TIMEOUT)

        server = FakeLLMServer(port=port).start()
        for reply, needles in FAILURES:
            server.state.reset()
            server.push(reply)
            fails(needles)  # "timed out" for the 20 s delays: the 1 s request timeout, not the 120 s default
            assert len(server.requests) == 1, "term2 retried although retries are off"
            assert server.wait_until_closed(0, timeout=GUARD) is not None

        server.push({"text": "recovered"})
        if version == 2:
            _, messages = run_v2(client, sid, "again")
            assert idle_update(messages)["stopReason"] == "end_turn"
        else:
            messages = run_v1(client, sid, "again")
            assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
        assert text_of(updates(messages, "agent_message_chunk")) == "recovered"
        assert client.close() == 0, client.stderr()[-3000:]
        client.validate_schemas()
    finally:
        client.kill()
        if server is not None:
            server.stop()


# --------------------------------------------------------------------------- provider swap


def test_anthropic_selected_by_configuration_only_holds_the_same_turn(
    acp: Callable[..., AcpProcess], fake_llm: FakeLLMServer, tmp_path: Path, workspace: Path
) -> None:
    write_config(tmp_path, f'[providers.anthropic]\napi_base = "{fake_llm.base_url}"\n')
    client = acp(env={"TERM2_MODEL": "anthropic/fake-model", "ANTHROPIC_API_KEY": "sk-ant-test"})
    client.initialize(2)
    sid = client.new_session(workspace)
    fake_llm.push({"thought": "Thinking it over.", "text": "Hello from Claude.", "chunks": 3})
    ack, messages = client.prompt_v2(sid, "say hello", timeout=FIRST_TURN_TIMEOUT)
    assert ack["result"] == {}
    assert flow(of_session(messages, sid, ack["id"])) == [
        "running",
        "ack",
        "user_message",
        "agent_thought_chunk",
        "agent_message_chunk",
        "idle:end_turn",
    ], kinds(messages)
    assert text_of(updates(messages, "agent_message_chunk")) == "Hello from Claude."
    assert text_of(updates(messages, "agent_thought_chunk")) == "Thinking it over."
    request = fake_llm.requests[0]
    assert request.protocol == "anthropic" and request.model == "fake-model"
    assert request.headers.get("x-api-key") == "sk-ant-test"

    fake_llm.push({"status": 401})
    _, messages = client.prompt_v2(sid, "again")
    assert idle_update(messages)["stopReason"] == "_term2_error"
    said = updates(messages, "agent_message_chunk")[-1]["content"]["text"]
    assert "401" in said and "authentication" in said.lower()
    assert client.close() == 0
    client.validate_schemas()
