"""The agent loop of one turn: ask the model, run the tools it requests, repeat."""

from __future__ import annotations

import anyio

from term2.app.clock import new_id
from term2.domain.history import AgentMessage, AgentThought, HistoryEntry
from term2.domain.turn import FinishReason, StopReason, TurnLimits, after_response, may_ask_again
from term2.ports.llm import (
    ChatMessage,
    CompletionRequest,
    Finished,
    LLMProvider,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    Usage,
)
from term2.ports.tools import Toolbox, ToolContext
from term2.ports.updates import MessageChunk, UsageChanged


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


async def run_loop(
    messages: list[ChatMessage],
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    limits: TurnLimits,
) -> StopReason:
    requests = 0
    while True:
        requests += 1
        response = _Response()
        try:
            await _stream_response(messages, llm, toolbox, ctx, response)
        finally:
            with anyio.CancelScope(shield=True):
                for entry in response.entries():
                    await ctx.record(entry)
        messages.append(ChatMessage("assistant", "".join(response.text), tuple(response.calls)))
        stop = after_response(response.finish, len(response.calls))
        if stop is not None:
            return stop
        if not may_ask_again(requests, limits):
            # Running the tools now would act on the user's behalf with no model left to see the results.
            return StopReason.MAX_TURN_REQUESTS
        for call in response.calls:
            result = await toolbox.execute(call, ctx)
            messages.append(ChatMessage("tool", result, tool_call_id=call.call_id))


async def _stream_response(
    messages: list[ChatMessage],
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    response: _Response,
) -> None:
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
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with anyio.CancelScope(shield=True):
                await aclose()
