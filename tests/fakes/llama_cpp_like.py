"""The fake OpenAI server's "llama.cpp-like" mode: how llama-cpp-python's server answers, byte for byte.

Measured on llama-cpp-python 0.3.36's server (`python -m llama_cpp.server`, FastAPI on
uvicorn, sse-starlette) running Gemma 3 270M (issue 22), and read from its source
(`llama_cpp/server/app.py`, `errors.py`, `llama_types.py`, `llama_chat_format.py`):

Request validation
  The body is validated by pydantic against `CreateChatCompletionRequest`, whose
  `messages` is a union of TypedDicts (system, user, assistant, tool, function).
  The assistant member types `content` as `NotRequired[str]`: `"content": null`
  fails, `""` or no key pass. FastAPI raises `RequestValidationError` inside the
  route; llama-cpp-python's `RouteErrorHandler` catches every exception and answers
  **HTTP 500** `{"error": {"message": str(exc), "type": "internal_server_error",
  "param": null, "code": null}}`, where `str(exc)` is FastAPI's "N validation
  errors:" then one Python dict per line (every union member's errors: 7 for one
  null content) and the endpoint's file, line and path. Unknown fields
  (`stream_options`, `prompt_cache_key`, `parallel_tool_calls`, ...) are ignored.
  The OpenAI fake's sequencing rules do not apply: this server checks none of them.
Context overflow
  A prompt of `n_ctx` tokens or more: non-streamed, HTTP 400 with OpenAI's
  `context_length_exceeded` body (errors.py's wording); streamed, **HTTP 200 and
  an empty event stream** (the error raised inside the stream is only logged).
  Every failure inside a stream looks the same: the SSE headers, the chunked
  body's last chunk `0\r\n\r\n` and no event, then the server closes the
  connection (captures `term2-auto-stream`, `term2-required-stream`).
  `max_tokens` past the window is cut to what is left, not refused.
Streaming
  `data: <json>` events with Python's default `json.dumps` spacing, a first delta
  `{"role": "assistant"}`, content deltas, a last delta `{}` with the finish reason,
  then `data: [DONE]`; **no usage chunk**, whatever `stream_options` says. A
  non-streamed answer has `usage`. Output stops at `max_tokens` (finish `length`).
Tools (`tool_format`)
  "chatml-function-calling" (the default chat format for function calling): the
  template shows tools to the model only when `tool_choice` is "auto" or names a
  tool; without it the model cannot call one (a scripted call becomes text). With
  streaming and "auto", a model that picks a tool raises "Automatic streaming tool
  choice is not supported" inside the stream: a 200 with an empty body. Any other
  string `tool_choice` fails its assert: HTTP 500 with an empty message when not
  streamed, an empty 200 stream when streamed. Not streamed, "auto" answers real
  tool calls with `content: null`, `function_call` and `usage` (key order as
  measured: content, tool_calls, role, function_call). "streamed": a chat format that streams tool calls
  (llama-cpp-python's functionary formats, and llama.cpp's own `llama-server
  --jinja`), in llama-cpp-python's chunk shape (every chunk repeats the call's id and
  name, `content: null`).

Tokens are counted as the fake counts them everywhere (4 characters a token,
`llm_accounting`), over the messages plus the tools when the template shows them.
The endpoint's file and line in the 500 body are those of the measuring install;
`benchmarks/llama_cpp_server.py` records the real server's bodies to re-check them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, NotRequired

import pydantic
from typing_extensions import TypedDict

from tests.fakes.llm_accounting import tokens_of
from tests.fakes.llm_replies import PromptStats, Reply, arguments_of, split_even, text_pieces
from tests.fakes.llm_rules import Rejection

__all__ = [
    "ENDPOINT_CONTEXT",
    "SERVER_HEADER",
    "SSE_HEADERS",
    "LlamaEmitter",
    "LlamaSettings",
    "is_count_request",
    "llama_admit",
    "llama_tokenize",
    "prompt_tokens",
    "tools_shown",
]

# FastAPI's endpoint context in `str(RequestValidationError)`, as on the measuring install.
ENDPOINT_CONTEXT = (
    '  File "/opt/llama/lib/python3.11/site-packages/llama_cpp/server/app.py", line 404, in create_chat_completion\n'
    "    POST /v1/chat/completions"
)
# sse-starlette's response headers (uvicorn adds date and `server: uvicorn`).
SSE_HEADERS = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    "connection": "keep-alive",
    "x-accel-buffering": "no",
}
SERVER_HEADER = "uvicorn"
ToolFormat = Literal["chatml-function-calling", "streamed"]


@dataclass(frozen=True)
class LlamaSettings:
    n_ctx: int = 2048  # the server's --n_ctx, in tokens
    tool_format: ToolFormat = "chatml-function-calling"


# ---------------------------------------------------------------- llama-cpp-python's request types (0.3.36)


class _Text(TypedDict):
    type: Literal["text"]
    text: str


class _ImageUrl(TypedDict):
    url: str
    detail: NotRequired[Literal["auto", "low", "high"]]


class _Image(TypedDict):
    type: Literal["image_url"]
    image_url: str | _ImageUrl


class _CallFunction(TypedDict):
    name: str
    arguments: str


class _ToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: _CallFunction


class ChatCompletionRequestSystemMessage(TypedDict):
    role: Literal["system"]
    content: str | None


class ChatCompletionRequestUserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[_Text | _Image] | None


class ChatCompletionRequestAssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: NotRequired[str]
    tool_calls: NotRequired[list[_ToolCall]]
    function_call: NotRequired[_CallFunction]


class ChatCompletionRequestToolMessage(TypedDict):
    role: Literal["tool"]
    content: str | None
    tool_call_id: str
    name: NotRequired[str | None]


class ChatCompletionRequestFunctionMessage(TypedDict):
    role: Literal["function"]
    content: str | None
    name: str


_Message = (
    ChatCompletionRequestSystemMessage
    | ChatCompletionRequestUserMessage
    | ChatCompletionRequestAssistantMessage
    | ChatCompletionRequestToolMessage
    | ChatCompletionRequestFunctionMessage
)


class _Request(pydantic.BaseModel):
    """The part of `CreateChatCompletionRequest` term2's requests exercise; other fields are ignored, as there."""

    messages: list[_Message]
    max_tokens: int | None = None
    temperature: float = 0.2
    top_p: float = 0.95
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False


def _fastapi_text(errors: list[dict[str, Any]]) -> str:
    """`str(RequestValidationError)`: FastAPI's count line, one error dict a line, the endpoint."""
    message = f"{len(errors)} validation error{'s' if len(errors) != 1 else ''}:\n"
    for err in errors:
        message += f"  {err}\n"
    message += "\n" + ENDPOINT_CONTEXT
    return message.rstrip()


def validation_rejection(body: dict[str, Any]) -> Rejection | None:
    try:
        _Request.model_validate(body)
    except pydantic.ValidationError as exc:
        errors = [{**err, "loc": ("body", *err["loc"])} for err in exc.errors(include_url=False)]
        message = _fastapi_text(errors)
        error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
        return Rejection(500, {"error": error}, f"llama-cpp-python: {len(errors)} validation errors")
    return None


# ---------------------------------------------------------------- what the model sees, and overflow


def tools_shown(body: dict[str, Any], settings: LlamaSettings) -> bool:
    if not body.get("tools"):
        return False
    if settings.tool_format == "streamed":
        return True
    choice = body.get("tool_choice")
    return choice == "auto" or isinstance(choice, dict)


def prompt_tokens(body: dict[str, Any], settings: LlamaSettings) -> int:
    """Tokens of the rendered prompt: the messages, and the tools when the template shows them."""
    part: dict[str, Any] = {"messages": body.get("messages")}
    if tools_shown(body, settings):
        part = {"tools": body.get("tools"), **part}
    return tokens_of(len(json.dumps(part, ensure_ascii=False, separators=(",", ":"))))


def _overflow_body(tokens: int, settings: LlamaSettings, max_tokens: int | None) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is {settings.n_ctx} tokens. However, you requested "
        f"{(max_tokens or 0) + tokens} tokens ({tokens} in the messages, {max_tokens} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    code = "context_length_exceeded"
    return {"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": code}}


@dataclass(frozen=True)
class LlamaAdmission:
    rejection: Rejection | None = None
    empty_stream: bool = False  # answer 200 and an event stream with nothing in it
    empty_reason: str = ""  # what the server's log says (the exception raised inside the stream)


def llama_admit(body: Any, settings: LlamaSettings, reply: Reply | None) -> LlamaAdmission:
    """How llama-cpp-python answers before generating: a 500 validation body, an overflow, a tool failure, or go."""
    if not isinstance(body, dict):
        error = {"message": "Expecting value", "type": "internal_server_error", "param": None, "code": None}
        return LlamaAdmission(Rejection(500, {"error": error}, "llama-cpp-python: no JSON body"))
    rejection = validation_rejection(body)
    if rejection is not None:
        return LlamaAdmission(rejection)
    choice, streamed = body.get("tool_choice"), bool(body.get("stream"))
    if (
        settings.tool_format == "chatml-function-calling"
        and body.get("tools")
        and isinstance(choice, str)
        and choice not in ("none", "auto")
    ):
        if streamed:  # the assert fires inside the stream: only the server's log says so
            return LlamaAdmission(empty_stream=True, empty_reason=f"tool_choice {choice!r} fails an assert")
        return LlamaAdmission(_internal("", f"llama-cpp-python: tool_choice {choice!r} fails an assert"))
    tokens = prompt_tokens(body, settings)
    if tokens >= settings.n_ctx:
        if streamed:
            return LlamaAdmission(empty_stream=True, empty_reason="context overflow")
        limit = body.get("max_tokens")
        overflow = _overflow_body(tokens, settings, limit if isinstance(limit, int) else None)
        return LlamaAdmission(Rejection(400, overflow, f"context_length_exceeded: {tokens} >= n_ctx {settings.n_ctx}"))
    picks_tool = bool(reply and reply.get("tool_calls")) and tools_shown(body, settings)
    if picks_tool and settings.tool_format == "chatml-function-calling" and choice == "auto" and streamed:
        return LlamaAdmission(empty_stream=True, empty_reason="Automatic streaming tool choice is not supported")
    return LlamaAdmission()


def _internal(message: str, reason: str) -> Rejection:
    error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
    return Rejection(500, {"error": error}, reason)


def encode_json(data: Any) -> bytes:
    """Starlette's `JSONResponse.render`: compact separators, UTF-8, no NaN."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


# ---------------------------------------------------------------- answers


class LlamaEmitter:
    """A reply as llama-cpp-python streams it (or answers it whole), within `max_tokens` and the window."""

    def __init__(self, reply: Reply, model: str, body: dict[str, Any], settings: LlamaSettings) -> None:
        self.reply, self.model, self.body, self.settings = reply, model, body, settings
        self.prompt = prompt_tokens(body, settings)
        self.id = f"cmpl-{uuid.uuid4()}"
        self.created = 1_700_000_000
        limit = body.get("max_tokens")
        room = settings.n_ctx - self.prompt
        self.limit = min(limit, room) if isinstance(limit, int) and limit > 0 else room
        self.calls = list(reply.get("tool_calls") or []) if tools_shown(body, settings) else []

    def _pieces(self) -> tuple[list[str], bool]:
        """The text pieces (a token each) within the limit, and whether the limit cut them."""
        reply = self.reply
        if reply.get("endless"):
            return ["tick "] * self.limit, True
        text = str(reply.get("text", ""))
        if reply.get("tool_calls") and not self.calls:  # the model never saw the tools
            text = text or "I cannot call tools here."
        if self._auto_grammar() and not self.calls:  # "message" picked: the follow-up grammar allows nothing
            text = ""
        pieces = text_pieces(text, reply.get("chunks"))
        return pieces[: self.limit], len(pieces) > self.limit

    def _auto_grammar(self) -> bool:
        """chatml-function-calling's "auto" path: a grammar picks a tool or a message, and the message is empty."""
        return (
            self.settings.tool_format == "chatml-function-calling"
            and self.body.get("tool_choice") == "auto"
            and bool(self.body.get("tools"))
        )

    def _chunk(self, delta: dict[str, Any], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        data = {
            "id": "chat" + self.id,
            "model": self.model,
            "created": self.created,
            "object": "chat.completion.chunk",
            "choices": [choice],
        }
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    def _call_chunk(self, call_id: str, name: str, arguments: str, first: bool) -> bytes:
        delta: dict[str, Any] = {
            "role": None,
            "content": None,
            "function_call": {"name": name, "arguments": arguments},
            "tool_calls": [
                {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
            ],
        }
        if first:
            delta["tool_calls"][0]["function"]["arguments"] = ""
        return self._chunk(delta, None)

    def frames(self, include_usage: bool) -> Iterator[tuple[bytes, bool]]:
        del include_usage  # ignored: this server never streams usage
        pieces, cut = self._pieces()
        if self.calls:
            yield from self._call_frames()
            return
        yield self._chunk({"role": "assistant"}, None), False
        for piece in pieces:
            yield self._chunk({"content": piece}, None), True
        finish = "length" if cut else str(self.reply.get("finish") or "stop")
        yield self._chunk({}, finish), False
        yield b"data: [DONE]\n\n", False

    def _call_frames(self) -> Iterator[tuple[bytes, bool]]:
        """llama-cpp-python's tool-call stream: a blank first delta, then every chunk repeats the call."""
        start = {"role": "assistant", "content": None, "function_call": None, "tool_calls": None}
        yield self._chunk(start, None), False
        for i, call in enumerate(self.calls):
            call_id = str(call.get("id") or f"call__{i}_{call['name']}_{self.id}")
            yield self._call_chunk(call_id, str(call["name"]), "", True), True
            for fragment in split_even(arguments_of(call), int(self.reply.get("arg_chunks", 3))):
                yield self._call_chunk(call_id, str(call["name"]), fragment, False), True
        end = {"role": None, "content": None, "function_call": None, "tool_calls": None}
        yield self._chunk(end, "tool_calls"), False
        yield b"data: [DONE]\n\n", False

    def whole_response(self) -> dict[str, Any]:
        pieces, cut = self._pieces()
        message: dict[str, Any] = {"content": "".join(pieces), "role": "assistant"}  # the key order measured
        finish = "length" if cut else str(self.reply.get("finish") or "stop")
        if self.calls:
            first = self.calls[0]
            message = {
                "content": None,
                "tool_calls": [
                    {
                        "id": str(c.get("id") or f"call__{i}_{c['name']}_{self.id}"),
                        "type": "function",
                        "function": {"name": c["name"], "arguments": arguments_of(c)},
                    }
                    for i, c in enumerate(self.calls)
                ],
                "role": "assistant",
                "function_call": {"name": first["name"], "arguments": arguments_of(first)},
            }
            finish = "tool_calls"
        completion = len(pieces) if not self.calls else sum(len(arguments_of(c)) // 4 + 1 for c in self.calls)
        return {
            "id": "chat" + self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": self.prompt,
                "completion_tokens": completion,
                "total_tokens": self.prompt + completion,
            },
        }

    def error_frame(self, reply: Reply) -> bytes:
        """An exception mid-stream is only logged by this server: the stream just ends."""
        del reply
        return b""


def stats_for(body: dict[str, Any], settings: LlamaSettings) -> PromptStats:
    tokens = prompt_tokens(body, settings)
    return PromptStats(chars=tokens * 4, tokens=tokens)


def llama_tokenize(body: Any) -> dict[str, Any]:
    """llama-cpp-python's `POST /extras/tokenize` (`{"input": str}` → `{"tokens": [int, ...]}`), with the fake's
    tokenizer (4 characters a token); a body without `input` is its pydantic 500, as on the chat route."""
    text = body.get("input") if isinstance(body, dict) else None
    if not isinstance(text, str):
        return {
            "error": {"message": "1 validation error", "type": "internal_server_error", "param": None, "code": None}
        }
    return {"tokens": list(range(tokens_of(len(text))))}


def is_count_request(body: Any) -> bool:
    """A one-token whole-answer request: how term2 asks a server that streams no usage for its count.
    The server answers it like any other; the fake only keeps the tests' scripted replies for the turns."""
    return isinstance(body, dict) and body.get("stream") is False and body.get("max_tokens") == 1
