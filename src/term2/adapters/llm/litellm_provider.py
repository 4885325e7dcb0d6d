"""LLM provider adapter backed by litellm: one code path for every provider.

Swapping OpenAI for Anthropic, Gemini, Ollama, ... is a change of
`ProviderSettings.model` / `api_base` only. This module owns the boundary
rules: litellm is imported lazily (see `litellm_runtime`), hidden retries are
off (term2 decides retry policy), every litellm exception is mapped to the
port's errors (see `litellm_errors`), and the HTTP stream is closed in a
`finally` so a cancelled turn stops the provider from generating (and billing).
Anthropic's signed thinking blocks make the round trip (streamed
`thinking_blocks` become `ReasoningReady`, and go back as `thinking_blocks`),
and OpenAI's `prompt_cache_key` is sent where litellm is known to pass it on.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from term2.adapters.llm.chat_shapes import (
    ReasoningAssembler,
    ToolCallAssembler,
    field_of,
    finish_reason,
    openai_messages,
    tool_to_openai,
    usage_from,
)
from term2.adapters.llm.litellm_errors import map_litellm_error
from term2.adapters.llm.litellm_runtime import (
    is_loaded,
    load_litellm,
    preload,
    shutdown_litellm,
)
from term2.adapters.llm.mended_events import StreamMender
from term2.ports.llm import (
    CompletionRequest,
    Finished,
    IncompleteResponse,
    LLMError,
    LLMEvent,
    ProviderSettings,
    TextDelta,
    ThoughtDelta,
    Usage,
)

__all__ = ["LiteLLMProvider", "preload"]

# Providers whose litellm path turns `thinking_blocks` into Anthropic content blocks.
_THINKING_PROVIDERS = frozenset({"anthropic", "bedrock", "vertex_ai"})
# Bare ids litellm routes to OpenAI itself; `prompt_cache_key` is an OpenAI parameter
# that litellm refuses (UnsupportedParamsError) for providers that do not take it.
_BARE_OPENAI = re.compile(r"^(gpt-|chatgpt-|o\d)")


def _sends_thinking_blocks(model: str) -> bool:
    head, sep, rest = model.partition("/")
    if not sep:
        return model.startswith("claude")
    return head == "anthropic" or (head in _THINKING_PROVIDERS and "claude" in rest)


def _takes_prompt_cache_key(model: str) -> bool:
    head, sep, _ = model.partition("/")
    return head == "openai" if sep else bool(_BARE_OPENAI.match(model))


@dataclass
class _StreamState:
    """What must be remembered across chunks until the stream ends."""

    calls: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    reasoning: ReasoningAssembler = field(default_factory=ReasoningAssembler)
    finish: str | None = None
    usage: Usage | None = None


class LiteLLMProvider:
    """`LLMProvider` over `litellm.acompletion(stream=True)`."""

    def __init__(self, settings: ProviderSettings) -> None:
        self._settings = settings
        self._closed = False

    @property
    def settings(self) -> ProviderSettings:
        return self._settings

    def _completion_kwargs(self, request: CompletionRequest) -> dict[str, Any]:
        s = self._settings
        thinking = _sends_thinking_blocks(s.model)
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": openai_messages(request.messages, thinking_blocks=thinking),
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": s.timeout_s,  # per read for streams; litellm's default is 6000 s
            "max_retries": 0,  # no hidden SDK retries: retry policy belongs to term2
        }
        if request.tools:
            kwargs["tools"] = [tool_to_openai(t) for t in request.tools]
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        options = s.request_options  # per model, from config.toml (openai_wire's docstring says why)
        if not options.stream:  # fail loudly rather than stream to a server the user said cannot
            raise LLMError(
                f'{s.model}: stream = false is served by the OpenAI-compatible wire only: set wire = "openai" '
                "for its provider in config.toml"
            )
        if not options.stream_usage:
            del kwargs["stream_options"]
        if request.tools and options.tool_choice:
            kwargs["tool_choice"] = options.tool_choice
        if options.extra_body:
            kwargs["extra_body"] = dict(options.extra_body)
        if s.api_base:
            kwargs["api_base"] = s.api_base
        if s.api_key:
            kwargs["api_key"] = s.api_key
        if s.effort and s.supports_reasoning:
            kwargs["reasoning_effort"] = s.effort
        if request.cache_key and _takes_prompt_cache_key(s.model):
            kwargs["prompt_cache_key"] = request.cache_key
        return kwargs

    async def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        """Yield deltas as they arrive, then tool calls, usage and exactly one Finished."""
        model = self._settings.model
        try:
            if not is_loaded():
                await preload()
            litellm = load_litellm()
        except Exception as exc:  # a broken install must still surface as a port error
            raise LLMError(f"Cannot load the LLM library for {model}: {exc}") from exc
        kwargs = self._completion_kwargs(request)  # its own errors are the port's already
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:  # litellm raises many unrelated types; map them all
            raise map_litellm_error(exc, model, self._settings.api_base) from exc
        state = _StreamState()
        mender = StreamMender()  # litellm decodes the JSON: its strings are mended here (ADR 0035)
        try:
            chunks = response.__aiter__()
            said = False
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise map_litellm_error(exc, model, self._settings.api_base) from exc
                for event in self._translate(chunk, state, self._settings.context_window):
                    said = True
                    for mended in mender.feed(event):
                        yield mended
            if not (said or state.calls or state.usage):
                # litellm closes an empty event stream with a "stop" chunk of its own making: no answer at all,
                # which llama-cpp-python sends for a prompt over its context (the agent loop decides).
                raise IncompleteResponse(f"Provider error from {model}: the response was empty", empty=True)
            closing: list[LLMEvent] = [*state.reasoning.ready(), *state.calls.ready()]
            if state.usage is not None:
                closing.append(state.usage)
            closing.append(Finished(finish_reason(state.finish, bool(state.calls))))
            for event in closing:
                for mended in mender.feed(event):
                    yield mended
        finally:
            # Closing (not just dropping) the wrapper is what releases the HTTP stream;
            # litellm shields this await, so it also runs inside a cancelled scope.
            await response.aclose()

    @staticmethod
    def _translate(chunk: Any, state: _StreamState, context_window: int | None) -> list[LLMEvent]:
        usage = usage_from(field_of(chunk, "usage"), context_window)
        if usage is not None:
            state.usage = usage
        events: list[LLMEvent] = []
        for choice in field_of(chunk, "choices") or ():
            delta = field_of(choice, "delta")
            if delta is not None:
                thought = field_of(delta, "reasoning_content")
                if thought:
                    events.append(ThoughtDelta(str(thought)))
                text = field_of(delta, "content")
                if text:
                    events.append(TextDelta(str(text)))
                for fragment in field_of(delta, "tool_calls") or ():
                    state.calls.add(fragment)
                for block in field_of(delta, "thinking_blocks") or ():
                    state.reasoning.add(block)
            reason = field_of(choice, "finish_reason")
            if reason:
                state.finish = str(reason)
        return events

    async def prepare(self) -> None:
        """Import litellm in a worker thread (seconds), so the first prompt does not wait for all of it."""
        try:
            await preload()
        except Exception as exc:  # a broken install surfaces as a port error, at the first prompt too
            raise LLMError(f"Cannot load the LLM library for {self._settings.model}: {exc}") from exc

    async def keep_connected(self) -> None:
        """Not done: litellm owns its HTTP clients and offers no way to open one ahead (ADR 0048)."""

    async def aclose(self) -> None:
        """Stop litellm's background worker and close its cached clients (no-op if never loaded)."""
        if self._closed:
            return
        self._closed = True
        try:
            await shutdown_litellm()
        except Exception as exc:
            raise map_litellm_error(exc, self._settings.model) from exc
