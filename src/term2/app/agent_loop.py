"""The agent loop of one turn: ask the model, run the tools it requests, repeat.

A model request that fails transiently (rate limit, 5xx, unreachable, timeout)
is sent again after a backoff the client hears about, as a thought chunk (ADR
0014). The sleep runs inside the turn's cancel scope, so `session/cancel`
during a backoff ends the turn at once.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import structlog

from term2.app.clock import new_id
from term2.domain.history import AgentMessage, AgentThought, HistoryEntry
from term2.domain.retry import RetryPolicy, retry_notice
from term2.domain.turn import FinishReason, StopReason, TurnLimits, after_response, may_ask_again
from term2.ports.llm import (
    ChatMessage,
    CompletionRequest,
    Finished,
    LLMError,
    LLMProvider,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    Usage,
)
from term2.ports.tools import Toolbox, ToolContext
from term2.ports.updates import MessageChunk, UsageChanged

log = structlog.get_logger("term2.agent_loop")


@dataclass(frozen=True, slots=True)
class Backoff:
    """How the loop waits between attempts; tests pin the draw and record the sleeps instead of sleeping."""

    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    jitter: Callable[[], float] = random.random


class _Response:
    """What one model response produced so far; kept so a cancelled turn still records it."""

    def __init__(self) -> None:
        self.message_id = new_id("msg")
        self.thought_id = new_id("thought")
        self.text: list[str] = []
        self.thought: list[str] = []
        self.calls: list[ToolCallRequest] = []
        self.finish = FinishReason.STOP

    def entries(self) -> list[HistoryEntry]:
        out: list[HistoryEntry] = []
        if self.thought:
            out.append(AgentThought(self.thought_id, "".join(self.thought)))
        if self.text:
            out.append(AgentMessage(self.message_id, "".join(self.text)))
        return out

    @property
    def started(self) -> bool:
        """Whether anything of this response reached the client or asked for a tool."""
        return bool(self.text or self.thought or self.calls)


async def run_loop(
    messages: list[ChatMessage],
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    limits: TurnLimits,
    backoff: Backoff = Backoff(),
) -> StopReason:
    requests = 0
    while True:
        requests += 1
        response = await _respond(messages, llm, toolbox, ctx, limits.retry, backoff)
        messages.append(ChatMessage("assistant", "".join(response.text), tuple(response.calls)))
        stop = after_response(response.finish, len(response.calls))
        if stop is not None:
            return stop
        if not may_ask_again(requests, limits):
            # Running the tools now would act on the user's behalf with no model left to see the results.
            return StopReason.MAX_TURN_REQUESTS
        for call, result in zip(response.calls, await _run_tools(response.calls, toolbox, ctx), strict=True):
            messages.append(ChatMessage("tool", result, tool_call_id=call.call_id))


async def _run_tools(calls: list[ToolCallRequest], toolbox: Toolbox, ctx: ToolContext) -> list[str]:
    """Results in the order the model asked; consecutive read-only calls run side by side.

    A response that reads five files should not wait for five round trips
    through the disk. Anything that writes, runs or needs an approval runs
    alone and in order, so the user is never asked two questions at once and
    a later call sees what an earlier one did.
    """
    results: list[str] = [""] * len(calls)
    index = 0
    while index < len(calls):
        end = index
        while end < len(calls) and toolbox.runs_concurrently(calls[end], ctx):
            end += 1
        if end - index > 1:
            async with anyio.create_task_group() as tg:
                for position in range(index, end):
                    tg.start_soon(_run_into, results, position, calls[position], toolbox, ctx)
            index = end
            continue
        results[index] = await toolbox.execute(calls[index], ctx)
        index += 1
    return results


async def _run_into(
    results: list[str], position: int, call: ToolCallRequest, toolbox: Toolbox, ctx: ToolContext
) -> None:
    results[position] = await toolbox.execute(call, ctx)


async def _respond(
    messages: list[ChatMessage],
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    policy: RetryPolicy,
    backoff: Backoff,
) -> _Response:
    """One model response, its request sent again while it fails transiently before any content.

    Only a request that failed before its first content delta is retried: once
    text or a thought was shown, or a tool call arrived, a second attempt would
    show the user a different answer after part of the first one (and, the turn
    going on, could run tools twice). Such a failure ends the turn with its error.
    """
    failed, waited = 0, 0.0
    while True:
        response = _Response()
        try:
            await _stream_response(messages, llm, toolbox, ctx, response)
            return response
        except LLMError as exc:
            if response.started or not exc.transient:
                raise
            failed += 1
            wait = policy.delay(failed, waited, exc.retry_after, backoff.jitter())
            if wait is None:
                raise
            notice = retry_notice(wait, failed + 1, policy, exc.kind, exc.status)
            log.warning("retrying model request", session_id=ctx.session_id, wait=round(wait, 3), error=str(exc))
        # A notice of its own (not part of any answer, not recorded): progress, not conversation.
        await ctx.emit(MessageChunk(new_id("thought"), notice, thought=True))
        await backoff.sleep(wait)
        waited += wait


async def _stream_response(
    messages: list[ChatMessage],
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    response: _Response,
) -> None:
    """Stream one response into ``response``; what arrived is recorded, even when it failed or was cancelled."""
    request = CompletionRequest(tuple(messages), toolbox.specs())
    stream = llm.stream(request)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                if event.text:
                    response.text.append(event.text)
                    await ctx.emit(MessageChunk(response.message_id, event.text))
            elif isinstance(event, ThoughtDelta):
                if event.text:
                    response.thought.append(event.text)
                    await ctx.emit(MessageChunk(response.thought_id, event.text, thought=True))
            elif isinstance(event, ToolCallReady):
                response.calls.append(event.call)
            elif isinstance(event, Usage):
                if event.context_window:
                    used = event.input_tokens + event.output_tokens
                    await ctx.emit(UsageChanged(used, event.context_window))
            elif isinstance(event, Finished):
                response.finish = event.reason
    finally:
        with anyio.CancelScope(shield=True):
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
            for entry in response.entries():
                await ctx.record(entry)
