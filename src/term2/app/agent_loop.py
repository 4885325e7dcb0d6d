"""The agent loop of one turn: ask the model, run the tools it requests, repeat.

A model request that fails transiently (rate limit, 5xx, unreachable, timeout)
is sent again after a backoff the client hears about, as a thought chunk (ADR
0014). The sleep runs inside the turn's cancel scope, so `session/cancel`
during a backoff ends the turn at once. A request the provider rejects as too
long for its context window is compacted and sent again (`compaction.py`);
before each request the compactor may also compact ahead of the limit.

Everything the model sees and says goes into the transcript as it happens
(its calls and their results structurally, reasoning blocks kept), so the
next request, in this turn or the next, starts with exactly what this one sent.

Each tool call is run, recorded and shown under an id term2 made; the model's
own id stays in the transcript only (`call_names.py`, ADR 0021).
"""

from __future__ import annotations

import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import anyio

from term2.app.call_names import CallNamer, NamedCall
from term2.app.clock import new_id
from term2.app.compaction import Compactor
from term2.app.metering import Meter
from term2.app.results import bounded_result
from term2.app.transcript import Transcript
from term2.domain.context_budget import ContextBudget
from term2.domain.history import AgentMessage, AgentThought, HistoryEntry
from term2.domain.retry import RetryPolicy, retry_notice
from term2.domain.transcript import ChatMessage, ReasoningBlock
from term2.domain.turn import FinishReason, StopReason, TurnLimits, after_response, may_ask_again
from term2.ports.llm import (
    ContextWindowExceeded,
    Finished,
    IncompleteResponse,
    LLMError,
    LLMEvent,
    LLMProvider,
    ProviderTimeout,
    ReasoningReady,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolCallRequest,
    Usage,
)
from term2.ports.tools import Toolbox, ToolContext, ToolReply
from term2.ports.updates import MessageChunk, Notice
from term2.support.deferred_log import get_logger

log = get_logger("term2.agent_loop")

MAX_OVERFLOW_RETRIES = 4  # compaction, then dropping the older half, up to three times


@dataclass(frozen=True, slots=True)
class Backoff:
    """How the loop waits between attempts; tests pin the draw and record the sleeps instead of sleeping."""

    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    jitter: Callable[[], float] = random.random


class _Response:
    """What one model response produced so far; kept so a cancelled turn still records it."""

    def __init__(self, namer: CallNamer) -> None:
        self.message_id = new_id("msg")
        self.thought_id = new_id("thought")
        self.text: list[str] = []
        self.thought: list[str] = []
        self.calls: list[NamedCall] = []
        self.namer = namer
        self.reasoning: list[ReasoningBlock] = []
        self.finish = FinishReason.STOP
        self.tokens: int | None = None  # the provider's count for the request and this answer

    def message(self) -> ChatMessage | None:
        """The assistant message for the transcript; None when the model said nothing and asked for nothing.

        Reasoning alone is no message: it only travels with the text or calls it led to,
        and a response that showed neither may be sent again (a reasoning-only assistant
        turn left before the retry would end the next request, which Anthropic refuses).
        """
        if not (self.text or self.calls):
            return None
        calls = tuple(named.sent for named in self.calls)
        return ChatMessage("assistant", "".join(self.text), calls, reasoning=tuple(self.reasoning))

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
    transcript: Transcript,
    llm: LLMProvider,
    toolbox: Toolbox,
    ctx: ToolContext,
    limits: TurnLimits,
    *,
    compactor: Compactor | None = None,
    backoff: Backoff = Backoff(),
    window: int | None = None,
    meter: Meter | None = None,
) -> StopReason:
    """Run the turn to its stop reason; without a ``compactor``, one over ``window`` (tokens, when known) is made."""
    meter = meter or Meter()
    compactor = compactor or Compactor(llm, ContextBudget(window), ctx, meter)
    requests = 0
    waiting = 0.0  # seconds this turn has waited on the model (limits.model_time bounds it)
    while True:
        requests += 1
        meter.requests += 1
        transcript.offer(toolbox.specs())  # MCP tools change between requests when a server says so
        started = anyio.current_time()
        with anyio.move_on_after(max(0.0, limits.model_time - waiting)) as bound:
            await compactor.before_request(transcript)
            response = await _respond(
                transcript, llm, ctx, limits.retry, backoff, compactor, meter, first_token=limits.first_token
            )
        waiting += anyio.current_time() - started
        if bound.cancelled_caught:
            raise ProviderTimeout(
                f"The turn waited on the model for more than turn_timeout ({limits.model_time:g} s); what it said "
                "so far is kept. Raise turn_timeout in config.toml for longer turns."
            )
        await compactor.after_response(transcript)
        stop = after_response(response.finish, len(response.calls))
        if stop is not None:
            return stop
        if not may_ask_again(requests, limits):
            # Running the tools now would act on the user's behalf with no model left to see the results.
            return StopReason.MAX_TURN_REQUESTS

        async def deliver(named: NamedCall, result: str | ToolReply) -> None:
            with anyio.CancelScope(shield=True):  # the call ran: its result is kept even if the turn is cancelled now
                images = result.images if isinstance(result, ToolReply) else ()
                said = result.text if isinstance(result, ToolReply) else result
                text = await bounded_result(said, ctx.session_id, ctx.outputs)
                # A tool's images are kept with its result: the only copy (a tool call's history is text).
                await transcript.add(ChatMessage("tool", text, tool_call_id=named.sent.call_id, images=images))

        await _run_tools(response.calls, toolbox, ctx, deliver)


async def _run_tools(
    calls: list[NamedCall],
    toolbox: Toolbox,
    ctx: ToolContext,
    deliver: Callable[[NamedCall, str | ToolReply], Awaitable[None]],
) -> None:
    """Run the calls, delivering each result in the order the model asked, as soon as it can be.

    A response that reads five files should not wait for five round trips
    through the disk: consecutive read-only calls run side by side. Anything
    that writes, runs or needs an approval runs alone and in order, so the
    user is never asked two questions at once and a later call sees what an
    earlier one did. Each result is delivered (into the transcript) before
    the next call starts, so a turn cancelled halfway keeps the results of the
    calls that did run, an edit's included.
    """
    index = 0
    while index < len(calls):
        end = index
        while end < len(calls) and toolbox.runs_concurrently(calls[end].call, ctx):
            end += 1
        if end - index > 1:
            results: list[str | ToolReply] = [""] * (end - index)
            async with anyio.create_task_group() as tg:
                for position in range(index, end):
                    tg.start_soon(_run_into, results, position - index, calls[position].call, toolbox, ctx)
            for position in range(index, end):
                await deliver(calls[position], results[position - index])
            index = end
            continue
        await deliver(calls[index], await toolbox.execute(calls[index].call, ctx))
        index += 1


async def _run_into(
    results: list[str | ToolReply], position: int, call: ToolCallRequest, toolbox: Toolbox, ctx: ToolContext
) -> None:
    results[position] = await toolbox.execute(call, ctx)


async def _respond(
    transcript: Transcript,
    llm: LLMProvider,
    ctx: ToolContext,
    policy: RetryPolicy,
    backoff: Backoff,
    compactor: Compactor,
    meter: Meter,
    first_token: float = 120.0,
) -> _Response:
    """One model response, its request sent again while it fails transiently before any content.

    Only a request that failed before its first content delta is retried: once
    text or a thought was shown, or a tool call arrived, a second attempt would
    show the user a different answer after part of the first one (and, the turn
    going on, could run tools twice). Such a failure ends the turn with its error.
    A request too long for the window is compacted and sent again, a bounded
    number of times, without a backoff: waiting does not shorten it.
    """
    failed, waited, overflows = 0, 0.0, 0
    while True:
        response = _Response(CallNamer(transcript.messages))
        try:
            await _stream_response(transcript, llm, ctx, response, meter, first_token)
            return response
        except ContextWindowExceeded:
            if response.started:
                raise
            overflows += 1
            log.warning("request too long for the context window", session_id=ctx.session_id, attempt=overflows)
            if overflows > MAX_OVERFLOW_RETRIES or not await compactor.on_overflow(transcript, overflows):
                raise
            continue
        except IncompleteResponse as exc:  # some servers answer a prompt too long for them with an empty stream
            near = compactor.probable_overflow(transcript)
            if not (exc.empty or near):
                raise
            if response.started or not near:  # told by the numbers (`empty_answers`), with no compaction
                raise compactor.empty_answer_error(transcript, exc) from exc
            overflows += 1
            log.warning("empty or cut-short answer near the context window", session_id=ctx.session_id, error=str(exc))
            if overflows > 1 or not await compactor.on_overflow(transcript, 1):
                raise compactor.empty_answer_error(transcript, exc) from exc
            continue
        except LLMError as exc:
            if response.started or not exc.transient:
                raise
            failed += 1
            wait = policy.delay(failed, waited, exc.retry_after, backoff.jitter())
            if wait is None or (exc.retry_limit is not None and failed > exc.retry_limit):
                raise
            notice = retry_notice(wait, failed + 1, policy, exc.kind, exc.status)
            # info: the user is told through the turn (the notice below); the log file keeps it (ADR 0045)
            log.info("retrying model request", session_id=ctx.session_id, wait=round(wait, 3), error=str(exc))
        # A notice of its own (not part of any answer, not recorded): progress, not conversation.
        await ctx.emit(Notice(new_id("thought"), notice, "warning", fallback="thought"))
        await backoff.sleep(wait)
        waited += wait


async def _stream_response(
    transcript: Transcript,
    llm: LLMProvider,
    ctx: ToolContext,
    response: _Response,
    meter: Meter,
    first_token: float = 120.0,
) -> None:
    """Stream one response into ``response``; what arrived is recorded, even when it failed or was cancelled.

    The request must bring its first text, thought or tool call within ``first_token`` seconds
    (`first_token_timeout`), whatever the adapter: a server that accepts and stays silent, or keeps
    a stream open with nothing in it, fails as a timeout, which the loop retries like any other.
    """
    stream = llm.stream(transcript.request())
    waiting = anyio.CancelScope(deadline=anyio.current_time() + first_token)
    try:
        with waiting:
            await _read_stream(stream, ctx, response, meter, waiting)
    finally:
        with anyio.CancelScope(shield=True):
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
            for entry in response.entries():
                await ctx.record(entry)
            message = response.message()
            if message is not None:
                await transcript.add(message)
                if response.tokens is not None:
                    transcript.counted(response.tokens, len(transcript.messages))
    if waiting.cancelled_caught:
        raise ProviderTimeout(
            f"the model sent nothing within first_token_timeout ({first_token:g} s); "
            "raise it (TERM2_FIRST_TOKEN_TIMEOUT) for a slow model"
        )


async def _read_stream(
    stream: AsyncIterator[LLMEvent], ctx: ToolContext, response: _Response, meter: Meter, waiting: anyio.CancelScope
) -> None:
    async for event in stream:
        meter.answered = True
        if isinstance(event, TextDelta | ThoughtDelta | ToolCallReady):
            waiting.deadline = math.inf  # the model answered: from here only request_timeout bounds the stream
        if isinstance(event, TextDelta):
            if event.text:
                response.text.append(event.text)
                await ctx.emit(MessageChunk(response.message_id, event.text))
        elif isinstance(event, ThoughtDelta):
            if event.text:
                response.thought.append(event.text)
                await ctx.emit(MessageChunk(response.thought_id, event.text, thought=True))
        elif isinstance(event, ToolCallReady):
            named = response.namer.name(event.call)
            response.calls.append(named)
            log.debug(  # the one place that links the model's id to term2's
                "tool call named", session_id=ctx.session_id, call_id=named.call.call_id, sent_id=named.sent.call_id
            )
        elif isinstance(event, ReasoningReady):
            response.reasoning.append(event.block)
        elif isinstance(event, Usage):
            response.tokens = event.input_tokens + event.output_tokens
            meter.add(event)
        elif isinstance(event, Finished):
            response.finish = event.reason
