"""The composition root with adapters overridden, and the prompt use case driven through it.

Nothing here talks to a network, a sandbox or a disk store: the container's
real wiring is kept and only its edges are swapped with `override`, the way
an alternate provider is swapped by configuration in production.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from dependency_injector import providers

from term2.adapters.llm.scripted import ScriptedProvider, text_response, tool_call_response
from term2.adapters.sandbox.scripted import ScriptedSandbox
from term2.adapters.store.memory_store import InMemorySessionStore
from term2.app.config import Settings
from term2.app.entrypoints.container import Application, Container, build_container
from term2.domain.content import TextBlock
from term2.domain.history import AgentMessage, ToolCall, ToolStatus, UserMessage
from term2.domain.transcript import ModelMessage
from term2.domain.turn import FinishReason, StopReason
from term2.ports.llm import Finished, ProviderUnreachable, TextDelta
from term2.ports.updates import MessageChunk, StateChanged, ToolCallChanged
from tests.fakes.approvers import REJECTED, FixedApprover
from tests.fakes.sinks import RecordingSink


def container_with(llm: ScriptedProvider, settings: Settings | None = None) -> Container:
    container = build_container(settings or Settings(model="openai/fake", max_turn_requests=3), {})
    container.store.override(providers.Singleton(InMemorySessionStore))
    container.llm.override(providers.Object(llm))
    container.sandbox.override(providers.Object(ScriptedSandbox()))
    return container


async def _run(
    container: Container, workspace: Path, text: str, approver: FixedApprover
) -> tuple[StopReason, RecordingSink]:
    opened = await container.sessions().new(str(workspace))
    prompts = container.prompts()
    turn = prompts.admit(opened.session.session_id)
    sink = RecordingSink()
    outcome = await prompts.run(turn, (TextBlock(text),), sink, approver)
    return outcome.stop_reason, sink


@pytest.mark.anyio
async def test_a_turn_streams_records_and_ends_idle(tmp_path: Path) -> None:
    llm = ScriptedProvider([text_response("Hello", "Hel", "lo")])
    container = container_with(llm)
    stop, sink = await _run(container, tmp_path, "hi", FixedApprover(REJECTED))
    assert stop is StopReason.END_TURN
    chunks = [e.text for e in sink.events if isinstance(e, MessageChunk)]
    assert chunks == ["Hel", "lo"]
    last = sink.events[-1]
    assert isinstance(last, StateChanged) and (last.state, last.stop_reason) == ("idle", StopReason.END_TURN)
    store = container.store()
    [session] = (await store.list(None, None, 10)).sessions
    history = [e async for e in store.history(session.session_id)]
    assert [type(e) for e in history] == [UserMessage, ModelMessage, AgentMessage, ModelMessage]
    transcript = [m.message for m in history if isinstance(m, ModelMessage)]
    assert [(m.role, m.content) for m in transcript] == [("user", "hi"), ("assistant", "Hello")]
    assert session.title == "hi"
    system = llm.requests[0].messages[0]
    assert system.role == "system" and str(tmp_path) in system.content


@pytest.mark.anyio
async def test_tool_results_feed_back_and_a_denied_edit_fails_without_writing(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    target = outside / "x.txt"
    args = json.dumps({"path": str(target), "content": "nope"})
    llm = ScriptedProvider([tool_call_response(("c1", "write_file", args)), text_response("ok")])
    approver = FixedApprover(REJECTED)
    stop, sink = await _run(container_with(llm), tmp_path, "write outside", approver)
    assert stop is StopReason.END_TURN
    assert len(approver.requests) == 1 and not target.exists()
    final = [e.call for e in sink.events if isinstance(e, ToolCallChanged)][-1]
    assert isinstance(final, ToolCall) and final.status is ToolStatus.FAILED
    tool_message = llm.requests[1].messages[-1]
    assert tool_message.role == "tool" and tool_message.tool_call_id == "c1" and "did not run" in tool_message.content


@pytest.mark.anyio
async def test_the_request_cap_stops_a_looping_model(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    read = json.dumps({"path": "a.txt"})
    llm = ScriptedProvider([tool_call_response((f"c{n}", "read_file", read)) for n in range(5)])
    stop, _ = await _run(container_with(llm), tmp_path, "loop", FixedApprover(REJECTED))
    assert stop is StopReason.MAX_TURN_REQUESTS
    assert len(llm.requests) == 3


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("finish", "expected"),
    [(FinishReason.LENGTH, StopReason.MAX_TOKENS), (FinishReason.CONTENT_FILTER, StopReason.REFUSAL)],
)
async def test_finish_reasons_map_to_stop_reasons(tmp_path: Path, finish: FinishReason, expected: StopReason) -> None:
    llm = ScriptedProvider([[TextDelta("cut"), Finished(finish)]])
    stop, _ = await _run(container_with(llm), tmp_path, "x", FixedApprover(REJECTED))
    assert stop is expected


@pytest.mark.anyio
async def test_a_provider_failure_ends_with_term2_error_and_tells_the_user(tmp_path: Path) -> None:
    llm = ScriptedProvider([[TextDelta("partial "), ProviderUnreachable("cannot reach the model")]])
    stop, sink = await _run(container_with(llm), tmp_path, "x", FixedApprover(REJECTED))
    assert stop is StopReason.ERROR
    texts = [e.text for e in sink.events if isinstance(e, MessageChunk)]
    assert texts[0] == "partial " and "cannot reach the model" in texts[-1]
    last = sink.events[-1]
    assert isinstance(last, StateChanged) and (last.state, last.stop_reason) == ("idle", StopReason.ERROR)


@pytest.mark.anyio
async def test_cancel_settles_the_turn_as_cancelled(tmp_path: Path) -> None:
    llm = ScriptedProvider([text_response("slow", *["w "] * 2000)], delay=0.05)  # 100 s: ends only by the cancel
    container = container_with(llm)
    opened = await container.sessions().new(str(tmp_path))
    prompts = container.prompts()
    turn = prompts.admit(opened.session.session_id)
    sink = RecordingSink()
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: prompts.run(turn, (TextBlock("go"),), sink, FixedApprover(REJECTED)))
        while not any(isinstance(e, MessageChunk) for e in sink.events):  # cancelled mid-stream, not after 0.2 s
            await anyio.sleep(0.01)
        prompts.cancel(opened.session.session_id)
    last = sink.events[-1]
    assert isinstance(last, StateChanged) and (last.state, last.stop_reason) == ("idle", StopReason.CANCELLED)
    assert not turn.turn.busy and turn.turn.settled


@pytest.mark.anyio
async def test_no_model_configured_is_a_readable_failure(tmp_path: Path) -> None:
    container = build_container(Settings(), {})
    container.store.override(providers.Singleton(InMemorySessionStore))
    stop, sink = await _run(container, tmp_path, "x", FixedApprover(REJECTED))
    assert stop is StopReason.ERROR
    assert any("no model configured" in e.text for e in sink.events if isinstance(e, MessageChunk))


def test_retry_limits_reach_the_agent_loop_from_the_settings() -> None:
    settings = Settings(model="openai/fake", max_turn_requests=4, retry_max_attempts=2, retry_max_wait=9.5)
    limits = build_container(settings, {}).limits()
    assert limits.max_model_requests == 4
    assert (limits.retry.max_attempts, limits.retry.max_wait) == (2, 9.5)


@pytest.mark.anyio
async def test_with_no_model_the_turn_fails_and_the_prompt_is_kept(tmp_path: Path) -> None:
    container = build_container(Settings(), {})  # no model anywhere: the real provider factory refuses
    container.store.override(providers.Singleton(InMemorySessionStore))
    container.sandbox.override(providers.Object(ScriptedSandbox()))
    stop, _sink = await _run(container, tmp_path, "hello?", FixedApprover(REJECTED))
    assert stop is StopReason.ERROR
    [session] = (await container.store().list(None, None, 10)).sessions
    history = [e async for e in container.store().history(session.session_id)]
    assert [type(e) for e in history][:1] == [UserMessage]
    assert any(isinstance(e, AgentMessage) and "no model configured" in e.text for e in history)


@pytest.mark.anyio
@pytest.mark.parametrize("turn_part", [False, True])
async def test_shutdown_closes_the_adapter_only_when_a_turn_part_could_have_made_one(turn_part: bool) -> None:
    """Exit must not build (and import) a model adapter that no turn ever used."""
    made: list[ScriptedProvider] = []

    def make() -> ScriptedProvider:
        made.append(ScriptedProvider([]))
        return made[-1]

    container = build_container(Settings(model="openai/fake"), {})
    container.store.override(providers.Singleton(InMemorySessionStore))
    container.sandbox.override(providers.Object(ScriptedSandbox()))
    container.llm.override(providers.Singleton(make))
    app = Application(container)
    if turn_part:
        app.prompts()
    await app.shutdown()
    assert len(made) == (1 if turn_part else 0)


@pytest.mark.anyio
async def test_a_turn_that_fails_before_the_model_still_reports_the_sessions_totals(tmp_path: Path) -> None:
    from term2.domain.usage import TokenUsage, TurnUsage

    container = build_container(Settings(), {})  # no model: the turn fails once the prompt is recorded
    container.store.override(providers.Singleton(InMemorySessionStore))
    container.sandbox.override(providers.Object(ScriptedSandbox()))
    opened = await container.sessions().new(str(tmp_path))
    await container.store().append(opened.session.session_id, TurnUsage("t0", TokenUsage(1_000, 50), None))
    prompts = container.prompts()
    outcome = await prompts.run(
        prompts.admit(opened.session.session_id), (TextBlock("x"),), RecordingSink(), FixedApprover(REJECTED)
    )
    assert outcome.stop_reason is StopReason.ERROR
    assert outcome.spent is not None and (outcome.spent.session.input, outcome.spent.session.output) == (1_000, 50)
