"""Pure translations for OpenAI Chat Completions: the request body, and stream chunks to port events.

Kept apart from the HTTP code so both can be unit-tested without a server. The
message and tool shapes come from `chat_shapes`, shared with the litellm adapter:
litellm itself speaks this dialect to every OpenAI-compatible server.

One rule for every message shape: never ``null`` where an empty or absent value
means the same. OpenAI's spec makes an assistant message's ``content``
optional and nullable when it carries ``tool_calls``, but compatible servers
disagree on the two spellings of "none": llama-cpp-python validates
``content`` as a string (``null`` is an HTTP 500, "7 validation errors"), and
llama.cpp's own server has refused a missing ``content`` key ("Missing
'content'"). The empty string is the one spelling OpenAI, vLLM, Ollama,
llama.cpp, llama-cpp-python and LM Studio all take, so an assistant message
with calls and no text goes out with ``"content": ""`` (`chat_shapes`, whose
shapes litellm sends on to the same servers). User, system and tool messages
always carry their text (possibly empty), never ``null``.

What servers differ on is configuration, per model (`RequestOptions`, from
``[models."<id>"]``): ``tool_choice``, whether ``stream_options`` is sent, and
extra body fields. The defaults are what OpenAI takes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from term2.adapters.llm.chat_shapes import (
    ToolCallAssembler,
    finish_reason,
    openai_messages,
    tool_to_openai,
    usage_from,
)
from term2.adapters.llm.http_errors import error_from_event
from term2.adapters.llm.sse import WHOLE_EVENT, SSEEvent, event_json
from term2.ports.llm import (
    CompletionRequest,
    Finished,
    LLMEvent,
    RequestOptions,
    TextDelta,
    ThoughtDelta,
    Usage,
)

__all__ = ["OpenAIStream", "as_chunk", "chat_body"]

_NO_OPTIONS = RequestOptions()


def chat_body(
    request: CompletionRequest,
    model: str,
    *,
    effort: str | None = None,
    reasoning: bool = False,
    options: RequestOptions = _NO_OPTIONS,
) -> dict[str, Any]:
    """The JSON body of one streamed ``POST /chat/completions``.

    ``max_tokens`` goes out as ``max_completion_tokens`` for reasoning models
    (OpenAI refuses ``max_tokens`` there) and as ``max_tokens`` otherwise, the
    name every compatible server knows. ``reasoning_effort`` only goes to
    reasoning models, which alone accept it. Reasoning blocks are not sent: the
    only ones the port carries are Anthropic's, which this wire has no place for.
    ``tool_choice`` goes only with tools (OpenAI refuses it alone); the
    configured extra fields go last, so they may set what term2 does not own.
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": openai_messages(request.messages),  # no null content: the module's rule
        "stream": options.stream,
    }
    if options.stream and options.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [tool_to_openai(t) for t in request.tools]
        if options.tool_choice:
            body["tool_choice"] = options.tool_choice
    if request.max_tokens is not None:
        body["max_completion_tokens" if reasoning else "max_tokens"] = request.max_tokens
    if effort and reasoning:
        body["reasoning_effort"] = effort
    if request.cache_key:
        body["prompt_cache_key"] = request.cache_key
    body.update(options.extra_body)
    return body


def as_chunk(completion: dict[str, Any]) -> dict[str, Any]:
    """A whole ``chat.completion`` as the one ``chat.completion.chunk`` that would have streamed it.

    Each choice's ``message`` becomes its ``delta`` and each tool call gets the
    ``index`` a stream gives it, so one fold (`OpenAIStream.feed`) serves both:
    text, tool calls, usage and the finish reason come out as the same events.
    A legacy ``function_call`` beside ``tool_calls`` (llama-cpp-python sends
    both, the first sometimes misnamed) is not a second call and is dropped.
    """
    if completion.get("error") is not None:
        return completion
    choices = []
    for choice in completion.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        delta = dict(message) if isinstance(message, dict) else {}
        delta.pop("function_call", None)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            delta["tool_calls"] = [
                {**call, "index": index} if isinstance(call, dict) else call for index, call in enumerate(calls)
            ]
        choices.append({"index": choice.get("index", 0), "delta": delta, "finish_reason": choice.get("finish_reason")})
    return {**completion, "object": "chat.completion.chunk", "choices": choices}


@dataclass
class OpenAIStream:
    """Folds ``chat.completion.chunk`` payloads into port events; `finish_events()` gives the closing ones.

    Text and thoughts are yielded as they arrive. Tool-call fragments, usage and
    the finish reason are held until the end, so a consumer never sees half a
    call. Thoughts come as ``reasoning_content`` (DeepSeek, vLLM, litellm's
    proxy) or ``reasoning`` (OpenRouter, Ollama); a delta carrying both
    streams the first only, since some servers send the same text twice. An
    ``{"error": ...}`` payload is raised as the port's error.
    """

    model: str
    context_window: int | None = None
    calls: ToolCallAssembler = field(default_factory=ToolCallAssembler)
    finish: str | None = None
    usage: Usage | None = None
    done: bool = False  # the ``[DONE]`` sentinel arrived

    def feed_sse(self, event: SSEEvent) -> list[LLMEvent]:
        if event.is_done:
            self.done = True
            return []
        if event.event == WHOLE_EVENT:  # a non-streamed answer: one chunk carrying all of it, then the end
            events = self.feed(as_chunk(event_json(event.data, self.model)))
            self.done = True
            return events
        return self.feed(event_json(event.data, self.model))

    @property
    def ended(self) -> bool:
        return self.done

    @property
    def whole(self) -> bool:
        return self.done or self.complete

    def feed(self, chunk: dict[str, Any]) -> list[LLMEvent]:
        if chunk.get("error") is not None:
            raise error_from_event(chunk, self.model)
        usage = usage_from(chunk.get("usage"), self.context_window)
        if usage is not None:
            self.usage = usage
        events: list[LLMEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            if isinstance(delta, dict):
                thought = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(thought, str) and thought:
                    events.append(ThoughtDelta(thought))
                text = delta.get("content")
                if isinstance(text, str) and text:
                    events.append(TextDelta(text))
                for fragment in delta.get("tool_calls") or ():
                    self.calls.add(fragment)
            reason = choice.get("finish_reason")
            if reason:
                self.finish = str(reason)
        return events

    @property
    def complete(self) -> bool:
        """A finish reason arrived: the answer is whole even if a server omits ``[DONE]``."""
        return self.finish is not None

    def finish_events(self) -> list[LLMEvent]:
        events: list[LLMEvent] = [*self.calls.ready()]
        if self.usage is not None:
            events.append(self.usage)
        events.append(Finished(finish_reason(self.finish, bool(self.calls))))
        return events
