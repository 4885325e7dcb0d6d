"""LLM provider adapter backed by litellm: one code path for every provider.

Swapping OpenAI for Anthropic, Gemini, Ollama, ... is a change of
`ProviderSettings.model` / `api_base` only. This module owns the boundary
rules: litellm is imported lazily (see `litellm_runtime`), hidden retries are
off (term2 decides retry policy), every litellm exception is mapped to the
port's errors (see `litellm_errors`), and the HTTP stream is closed in a
`finally` so a cancelled turn stops the provider from generating (and billing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from term2.adapters.llm.litellm_errors import map_litellm_error
from term2.adapters.llm.litellm_runtime import (
    is_loaded,
    load_litellm,
    preload,
    shutdown_litellm,
)
from term2.adapters.llm.litellm_wire import (
    ToolCallAssembler,
    field_of,
    finish_reason,
    message_to_openai,
    tool_to_openai,
    usage_counts,
)
from term2.ports.llm import (
    CompletionRequest,
    Finished,
    LLMError,
    LLMEvent,
    ProviderSettings,
    TextDelta,
    ThoughtDelta,
    Usage,
)

__all__ = ["LiteLLMProvider", "preload"]


@dataclass
class _StreamState:
    """What must be remembered across chunks until the stream ends."""

    calls: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    finish: str | None = None
    usage: tuple[int, int] | None = None


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
        kwargs: dict[str, Any] = {
            "model": s.model,
            "messages": [message_to_openai(m) for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": s.timeout_s,  # per read for streams; litellm's default is 6000 s
            "max_retries": 0,  # no hidden SDK retries: retry policy belongs to term2
        }
        if request.tools:
            kwargs["tools"] = [tool_to_openai(t) for t in request.tools]
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if s.api_base:
            kwargs["api_base"] = s.api_base
        if s.api_key:
            kwargs["api_key"] = s.api_key
        if s.effort and s.supports_reasoning:
            kwargs["reasoning_effort"] = s.effort
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
        try:
            response = await litellm.acompletion(**self._completion_kwargs(request))
        except Exception as exc:  # litellm raises many unrelated types; map them all
            raise map_litellm_error(exc, model, self._settings.api_base) from exc
        state = _StreamState()
        try:
            chunks = response.__aiter__()
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise map_litellm_error(exc, model, self._settings.api_base) from exc
                for event in self._translate(chunk, state):
                    yield event
            for ready in state.calls.ready():
                yield ready
            if state.usage is not None:
                yield Usage(state.usage[0], state.usage[1], self._settings.context_window)
            yield Finished(finish_reason(state.finish, bool(state.calls)))
        finally:
            # Closing (not just dropping) the wrapper is what releases the HTTP stream;
            # litellm shields this await, so it also runs inside a cancelled scope.
            await response.aclose()

    @staticmethod
    def _translate(chunk: Any, state: _StreamState) -> list[LLMEvent]:
        counts = usage_counts(field_of(chunk, "usage"))
        if counts is not None:
            state.usage = counts
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
            reason = field_of(choice, "finish_reason")
            if reason:
                state.finish = str(reason)
        return events

    async def aclose(self) -> None:
        """Stop litellm's background worker and close its cached clients (no-op if never loaded)."""
        if self._closed:
            return
        self._closed = True
        try:
            await shutdown_litellm()
        except Exception as exc:
            raise map_litellm_error(exc, self._settings.model) from exc
