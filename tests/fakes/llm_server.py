"""A scriptable fake LLM HTTP server speaking the providers' wire formats, and enforcing their rules.

Why: term2 must be tested end to end (litellm included) without a network or a
real model, and the tests must be able to make the "model" ask for tool calls,
fail with provider-shaped errors, stall, or stream slowly enough to be cancelled.
A fake that accepts what the real provider rejects makes such tests worthless, so
the server is also the specification of each provider: every request is checked
against the provider's rules first (`tests.fakes.llm_rules`), and the official
`openai` and `anthropic` clients are calibrated against it
(tests/contract/test_fake_llm_calibration.py).

Routes
  POST /v1/chat/completions, /chat/completions   OpenAI chat-completions (SSE when "stream")
  POST /v1/messages, /messages                   Anthropic Messages (SSE when "stream")
  POST /v1/responses, /responses                 OpenAI Responses (SSE events when "stream")
  POST /v1beta/models/{model}:generateContent    Gemini (also /v1/models/...)
  POST /v1beta/models/{model}:streamGenerateContent[?alt=sse]   (SSE; without alt=sse a JSON array)
  POST /v1beta/models/{model}:countTokens        {"totalTokens": N} (not recorded)
  POST /_script   body: one reply object or a list of them; appended to the queue
  POST /_reset    clear the queue and the recorded requests
  POST /_config   body: {"max_prompt_chars": N|null, "require_key": "k"|null} (only the keys given);
  GET  /_config   answers the current configuration
  GET  /_requests recorded requests (path, protocol, model, body, status, disconnected, rejection)
  GET  /_health   "ok"

A reply (every key optional):
  {"text": "Hello", "chunks": 3,            # text split into N pieces (default: per word)
   "thought": "...", "thought_chunks": N,   # reasoning / thinking deltas, sent first
   "redacted": "opaque-data",               # Anthropic: a redacted_thinking block (after the thought)
   "tool_calls": [{"name": "write_file", "arguments": {...} or "raw json", "id": "..."}],
   "arg_chunks": 3,                         # fragments per tool-call argument string
   "finish": "stop|tool_calls|length|content_filter",  # default: tool_calls if any, else stop
   "status": 401|429|500|503|529|400|...,   # error reply with a provider-shaped JSON body
   "error_message": "...", "error_code": "...", "error_type": "...",  # override the body's fields
   "headers": {"retry-after": "2"},          # extra response headers (error replies too)
   "error_after": N,                        # send N content deltas, then an in-stream error
   "delay_first_byte": 0.0, "chunk_delay": 0.0,
   "stall_after": N, "stall_seconds": 30.0,  # after N content deltas, go silent
   "hold": "name",                          # before the first byte, wait until the test calls release("name")
   "gather": {"name": "g", "count": N},     # after the first content delta, hold until N streams of that
                                            # name have sent theirs (a barrier: streams open together)
   "max_prompt_chars": N,                   # this reply is only given to a prompt of <= N chars:
                                            # a longer one is rejected as too long and the reply stays queued
   "usage": {"input_tokens": 12, "output_tokens": 5}}  # or prompt_tokens/completion_tokens; also
                                            # cached_tokens, cache_read_input_tokens,
                                            # cache_creation_input_tokens, reasoning_tokens

With an empty queue the reply is `server.responder(request)` if one is set (a
callable taking the RecordedRequest, answering a reply or None), else "echo: <last
user text>" (or "echo tool: <result>" after a tool result). A model name ending in "fake-<status>" (e.g. "fake-401")
yields that error, as a fallback for clients that cannot push a script.

Request rules (always on; see `tests.fakes.llm_rules` for the full list): a
request the real provider would refuse (unanswered tool calls, orphan tool
results, a system role in Anthropic messages, non-alternating roles, more than 4
cache_control blocks, thinking misuse, unknown thinking signatures, a missing
anthropic-version header, ...) answers 400 with the provider's real error body,
is recorded with status "error" and a `rejection` reason, and takes no reply from
the queue. So do prompts over the limit (`max_prompt_chars` of the server or of
the reply at the head of the queue; what is counted: `tests.fakes.llm_accounting`):
OpenAI answers 400 code `context_length_exceeded`, Anthropic 400 "prompt is too
long: K tokens > M maximum" (tokens = chars / 4). Authentication is checked only
when the server has `require_key` (401 with the provider's body).

Usage: without an explicit "usage" the prompt is priced at ~4 characters a token,
with a simulated prompt cache (OpenAI `prompt_tokens_details.cached_tokens`,
Anthropic `cache_read_input_tokens` / `cache_creation_input_tokens`; see
`tests.fakes.llm_accounting`), and reasoning tokens count the thought's deltas.
Anthropic thinking blocks carry signatures unique to this server, which accepts
them (and the redacted data it sent) back, for exactly the thinking text sent.

Error bodies follow what the official clients parse: OpenAI's
`{"error": {"message", "type", "param", "code"}}` (e.g. 429 with code
`rate_limit_exceeded`, or type and code `insufficient_quota` for an exhausted
quota: see `QUOTA_EXCEEDED`), Anthropic's `{"type": "error", "error": {"type",
"message"}}` (e.g. 529 `overloaded_error`) and Google's `{"error": {"code",
"message", "status"}}`. Retry hints travel as the real servers send them:
`retry-after` (seconds or an HTTP date), `retry-after-ms`, or "Please try again
in 1.5s" inside the message.

llama.cpp-like mode (`llama_cpp=LlamaSettings(n_ctx=..., tool_format=...)`, or
`configure(llama_cpp={...})`, or `--llama-cpp --n-ctx N` on the command line): the
OpenAI routes answer as llama-cpp-python's server does instead of as OpenAI does
(`tests.fakes.llama_cpp_like`): its pydantic validation (HTTP 500 with FastAPI's
text), an empty 200 stream on a streamed overflow, no streamed usage, unknown
fields ignored, tools shown only with `tool_choice` in its chatml-function-calling
format, `max_tokens` honoured. A reply `{"endless": true}` streams until the output
limit (in both modes: OpenAI's `max_tokens` / `max_completion_tokens` too).

In-process: `with start_fake_llm(script, max_prompt_chars=None, require_key=None) as server:`
yields a FakeLLMServer with `base_url` (OpenAI clients add "/v1"), `push(*replies)`,
`configure(max_prompt_chars=..., require_key=...)`, `responder`, `requests` (RecordedRequest:
path, protocol openai|anthropic|responses|gemini, model, body, headers, status
open|completed|disconnected|error, rejection, disconnected_at),
`wait_for_request(n)` and `wait_until_closed(index)`.

Audit: with $FAKE_LLM_REJECTION_LOG set, every rejection is appended to that file as a
JSON line (with $PYTEST_CURRENT_TEST), to list what a whole suite run sent that a real
provider would refuse.

CLI: python -m tests.fakes.llm_server [--host 127.0.0.1] [--port 0]
                                       [--port-file F] [--script replies.json]
                                       [--max-prompt-chars N] [--require-key K]
The bound port is printed on stdout and, if asked, written to F (atomically).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote

from tests.fakes.llama_cpp_like import (
    SERVER_HEADER,
    SSE_HEADERS,
    LlamaEmitter,
    LlamaSettings,
    encode_json,
    is_count_request,
    llama_admit,
    llama_tokenize,
    stats_for,
)
from tests.fakes.llm_accounting import PromptCache, prompt_chars, tokens_of
from tests.fakes.llm_replies import (
    PromptStats,
    Reply,
    arguments_object,
    arguments_of,
    default_reply,
    finish_of,
    split_even,
    text_pieces,
    token_usage,
)
from tests.fakes.llm_rules import GOOGLE_STATUS, Rejection, SignatureBook, check_auth, context_rejection, validate
from tests.fakes.llm_wire_extra import GeminiEmitter, ResponsesEmitter

__all__ = [
    "QUOTA_EXCEEDED",
    "FakeLLMServer",
    "FakeLLMState",
    "RecordedRequest",
    "Reply",
    "default_reply",
    "load_script",
    "start_fake_llm",
    "text_pieces",
]

_OPENAI_PATHS = {"/v1/chat/completions", "/chat/completions"}
_ANTHROPIC_PATHS = {"/v1/messages", "/messages"}
_RESPONSES_PATHS = {"/v1/responses", "/responses"}
_GEMINI_PATH = re.compile(
    r"^/(?:v1beta|v1|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent|countTokens)$"
)
_MODEL_STATUS = re.compile(r"fake-(\d{3})$")
_ENDLESS_CAP = 100_000  # deltas of an endless reply when the request sets no output limit

_OPENAI_ERRORS = {
    400: ("invalid_request_error", "invalid_request", "Bad request (fake)."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided (fake).",
    ),
    403: ("invalid_request_error", "permission_denied", "Permission denied (fake)."),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model does not exist (fake).",
    ),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached (fake)."),
    500: ("server_error", "server_error", "The server had an error (fake)."),
    503: ("server_error", "overloaded", "The server is overloaded (fake)."),
}
# OpenAI's answer when the account has no credit left: a 429 that waiting does not cure.
QUOTA_EXCEEDED: dict[str, Any] = {
    "status": 429,
    "error_type": "insufficient_quota",
    "error_code": "insufficient_quota",
    "error_message": "You exceeded your current quota, please check your plan and billing details (fake).",
}
_ANTHROPIC_ERRORS = {
    400: ("invalid_request_error", "Bad request (fake)."),
    401: ("authentication_error", "invalid x-api-key (fake)"),
    403: ("permission_error", "Permission denied (fake)."),
    404: ("not_found_error", "model not found (fake)"),
    413: ("request_too_large", "Request too large (fake)."),
    429: ("rate_limit_error", "Rate limit reached (fake)."),
    500: ("api_error", "Internal server error (fake)."),
    503: ("api_error", "Service unavailable (fake)."),
    529: ("overloaded_error", "Overloaded (fake)."),
}
_ANTHROPIC_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


class ClientGone(Exception):
    """The client closed the connection while we were streaming to it."""


@dataclass
class RecordedRequest:
    """One request as the server saw it, and how its response ended."""

    index: int
    path: str
    protocol: str
    model: str
    body: Any
    headers: dict[str, str]
    started_at: float
    status: str = "open"  # open | completed | disconnected | error
    disconnected_at: float | None = None
    finished_at: float | None = None
    rejection: str | None = None  # why the server refused it (a provider rule or the prompt limit)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "path": self.path,
            "protocol": self.protocol,
            "model": self.model,
            "body": self.body,
            "headers": self.headers,
            "status": self.status,
            "disconnected": self.status == "disconnected",
            "rejection": self.rejection,
            "started_at": self.started_at,
            "disconnected_at": self.disconnected_at,
            "finished_at": self.finished_at,
        }


@dataclass
class Admission:
    """The server's decision on one model request: refuse it, or serve this reply."""

    rejection: Rejection | None = None
    reply: Reply = field(default_factory=dict)
    stats: PromptStats = field(default_factory=PromptStats)
    empty_stream: bool = False  # llama.cpp-like overflow: 200 and an event stream with nothing in it


@dataclass
class FakeLLMState:
    """Thread-safe reply queue, request log and provider-side memory shared by all handler threads."""

    replies: deque[Reply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Condition = field(default_factory=threading.Condition)
    stopping: threading.Event = field(default_factory=threading.Event)
    max_prompt_chars: int | None = None
    require_key: str | None = None
    signatures: SignatureBook = field(default_factory=SignatureBook)  # survive /_reset, as real ones do
    cache: PromptCache = field(default_factory=PromptCache)
    responder: Callable[[RecordedRequest], Reply | None] | None = None
    llama_cpp: LlamaSettings | None = None  # answer the OpenAI routes as llama-cpp-python's server does
    gathered: dict[str, int] = field(default_factory=dict)  # first deltas sent, per "gather" name
    released: set[str] = field(default_factory=set)  # "hold" names the test let go
    tokenized: int = 0  # llama.cpp-like `/extras/tokenize` calls answered

    def push(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def next_reply(self) -> Reply | None:
        with self.lock:
            return self.replies.popleft() if self.replies else None

    def configure(self, options: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if "max_prompt_chars" in options:
                limit = options["max_prompt_chars"]
                self.max_prompt_chars = None if limit is None else int(limit)
            if "require_key" in options:
                key = options["require_key"]
                self.require_key = None if key is None else str(key)
            if "llama_cpp" in options:
                llama = options["llama_cpp"]
                self.llama_cpp = LlamaSettings(**llama) if isinstance(llama, dict) else llama
            llama_now = None if self.llama_cpp is None else vars(self.llama_cpp)
            return {"max_prompt_chars": self.max_prompt_chars, "require_key": self.require_key, "llama_cpp": llama_now}

    def admit(self, rec: RecordedRequest, headers: dict[str, str], query: dict[str, str]) -> Admission:
        """Check the request as the provider would; only an accepted one takes the queue's head."""
        with self.lock:
            protocol, body = rec.protocol, rec.body
            if self.llama_cpp is not None and protocol == "openai":
                return self._admit_llama(rec)
            rejection = check_auth(protocol, headers, query, self.require_key)
            rejection = rejection or validate(protocol, body, headers, self.signatures)
            if rejection is None:
                chars = prompt_chars(protocol, body)
                head = self.replies[0] if self.replies else {}
                for limit in (self.max_prompt_chars, head.get("max_prompt_chars")):
                    if limit is not None and rejection is None:
                        rejection = context_rejection(protocol, chars, int(limit))
            if rejection is not None:
                rec.rejection = rejection.reason
                _log_rejection(rec)
                return Admission(rejection)
            reply = (
                self.next_reply()
                or (self.responder(rec) if self.responder is not None else None)
                or _model_convention(rec.model)
                or default_reply(body)
            )
            return Admission(None, reply, self.cache.measure(protocol, body))

    def _admit_llama(self, rec: RecordedRequest) -> Admission:
        """llama-cpp-python's checks (`llama_cpp_like`): a refused request, or an empty stream, keeps the queue."""
        assert self.llama_cpp is not None
        head = self.replies[0] if self.replies else None
        reply = (
            head
            or (self.responder(rec) if self.responder is not None else None)
            or _model_convention(rec.model)
            or default_reply(rec.body)
        )
        decision = llama_admit(rec.body, self.llama_cpp, reply)
        if decision.rejection is not None:
            rec.rejection = decision.rejection.reason
            _log_rejection(rec)
            return Admission(decision.rejection)
        if decision.empty_stream:
            rec.rejection = f"{decision.empty_reason}: answered 200 with an empty event stream"
            return Admission(empty_stream=True)
        if is_count_request(rec.body):  # term2 asking for a count: the scripted turn replies stay queued
            return Admission(None, default_reply(rec.body), stats_for(rec.body, self.llama_cpp))
        if head is not None:
            self.replies.popleft()
        return Admission(None, reply, stats_for(rec.body, self.llama_cpp))

    def record(
        self, path: str, protocol: str, body: Any, headers: dict[str, str], model: str | None = None
    ) -> RecordedRequest:
        if model is None:
            model = str(body.get("model", "")) if isinstance(body, dict) else ""
        with self.lock:
            rec = RecordedRequest(
                len(self.requests),
                path,
                protocol,
                model,
                body,
                headers,
                time.monotonic(),
            )
            self.requests.append(rec)
            self.lock.notify_all()
            return rec

    def finish(self, rec: RecordedRequest, status: str) -> None:
        with self.lock:
            rec.status = status
            rec.finished_at = time.monotonic()
            if status == "disconnected":
                rec.disconnected_at = rec.finished_at
            self.lock.notify_all()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def reset(self) -> None:
        with self.lock:
            self.replies.clear()
            self.requests.clear()


class _Emitter(Protocol):
    def frames(self, include_usage: bool) -> Iterator[tuple[bytes, bool]]: ...

    def whole_response(self) -> Any: ...

    def error_frame(self, reply: Reply) -> bytes: ...


# --------------------------------------------------------------------------- handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"
    # Real providers' servers send each SSE frame at once; with Nagle on, the end of a reply
    # waits ~40 ms for a delayed ACK and every measured turn looks that much slower.
    disable_nagle_algorithm = True
    state: FakeLLMState  # set on the subclass built per server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging; tests read /_requests instead."""

    # ---- routing

    def do_GET(self) -> None:
        if self.path == "/_requests":
            with self.state.lock:
                data = [r.to_json() for r in self.state.requests]
            self._send_json(200, data)
        elif self.path == "/_health":
            self._send_json(200, "ok")
        elif self.path == "/_config":
            self._send_json(200, self.state.configure({}))
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        body = self._read_body()
        gemini = _GEMINI_PATH.match(path)
        if path == "/_script":
            replies = body if isinstance(body, list) else [body]
            self.state.push(*replies)
            self._send_json(200, {"queued": len(replies)})
        elif path == "/_reset":
            self.state.reset()
            self._send_json(200, {"reset": True})
        elif path == "/_config":
            self._send_json(200, self.state.configure(body if isinstance(body, dict) else {}))
        elif path in _OPENAI_PATHS:
            self._serve("openai", path, body, query)
        elif path in _ANTHROPIC_PATHS:
            self._serve("anthropic", path, body, query)
        elif path in _RESPONSES_PATHS:
            self._serve("responses", path, body, query)
        elif gemini and gemini.group(2) == "countTokens":  # not a model request: answered, not recorded
            request = body.get("generateContentRequest", body) if isinstance(body, dict) else {}
            self._send_json(200, {"totalTokens": tokens_of(prompt_chars("gemini", request))})
        elif gemini:
            self._serve("gemini", path, body, query, model=unquote(gemini.group(1)))
        elif path == "/extras/tokenize" and self.state.llama_cpp is not None:  # not a model request: not recorded
            with self.state.lock:
                self.state.tokenized += 1
            answer = llama_tokenize(body)
            self._send_json(500 if "error" in answer else 200, answer)
        else:
            self.state.record(path, "unknown", body, self._headers())
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    # ---- plumbing

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _headers(self) -> dict[str, str]:
        keep = (
            "authorization",
            "x-api-key",
            "x-goog-api-key",
            "anthropic-version",
            "anthropic-beta",
            "user-agent",
        )
        return {k.lower(): v for k, v in self.headers.items() if k.lower() in keep}

    def _send_json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        payload = encode_json(data) if self._llama() else json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def version_string(self) -> str:
        return SERVER_HEADER if self._llama() else super().version_string()

    def _llama(self) -> bool:
        """Whether this request is answered as llama-cpp-python (the llama.cpp-like mode, OpenAI routes)."""
        return self.state.llama_cpp is not None and self.path.partition("?")[0] in _OPENAI_PATHS

    def _start_stream(self, headers: dict[str, Any] | None) -> None:
        self.send_response(200)
        if self._llama():
            for name, value in SSE_HEADERS.items():
                self.send_header(name, value)
        else:
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()

    def _pause(self, seconds: float) -> None:
        """Sleep, but notice at once if the client hangs up (that is what tests assert)."""
        deadline = time.monotonic() + seconds
        while (remaining := deadline - time.monotonic()) > 0:
            if self.state.stopping.is_set():
                raise ClientGone
            ready, _, _ = select.select([self.connection], [], [], min(remaining, 0.05))
            if not ready:
                continue
            try:
                peek = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                raise ClientGone from None
            if not peek:
                raise ClientGone
            time.sleep(min(remaining, 0.05))  # pipelined bytes pending: do not spin

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        except OSError:
            raise ClientGone from None

    # ---- serving a model request

    def _serve(self, protocol: str, path: str, body: Any, query: str, model: str | None = None) -> None:
        rec = self.state.record(path, protocol, body, self._headers())  # 4 arguments: tests wrap record()
        if model is not None:
            rec.model = model
        params = dict(parse_qsl(query))
        all_headers = {k.lower(): v for k, v in self.headers.items()}
        admission = self.state.admit(rec, all_headers, params)
        try:
            if admission.rejection is not None:
                rejection = admission.rejection
                self.state.finish(rec, "error")  # before answering: a client may read the log at once
                self._send_json(rejection.status, rejection.body, rejection.headers)
                return
            if admission.empty_stream:
                self.state.finish(rec, "error")
                self._start_stream(None)
                self._write(b"")  # the terminating chunk at once: not one event
                self.close_connection = True  # as llama-cpp-python's server does after a failed stream
                return
            reply = admission.reply
            if reply.get("hold"):
                self._hold(str(reply["hold"]))
            self._pause(float(reply.get("delay_first_byte", 0.0)))
            if reply.get("status"):
                self._send_error_reply(protocol, reply)
                self.state.finish(rec, "error")
                return
            emitter = self._emitter(protocol, reply, rec, admission.stats)
            if protocol == "gemini":
                streaming = path.endswith(":streamGenerateContent")
                if streaming and params.get("alt") != "sse":  # a JSON array of the chunks
                    gemini = GeminiEmitter(reply, rec.index, rec.model, admission.stats)
                    chunks = [chunk for chunk, _ in gemini.chunks()]
                    self._send_json(200, chunks, reply.get("headers"))
                    self.state.finish(rec, "completed")
                    return
            else:
                streaming = isinstance(body, dict) and bool(body.get("stream"))
            if not streaming:
                self._send_json(200, emitter.whole_response(), reply.get("headers"))
                self.state.finish(rec, "completed")
                return
            self._start_stream(reply.get("headers"))
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(emitter, reply, include_usage)
            self._write(b"")  # terminating zero-length chunk
            self.state.finish(rec, "completed")
        except ClientGone:
            self.state.finish(rec, "disconnected")
            self.close_connection = True
        except OSError:
            self.state.finish(rec, "disconnected")
            self.close_connection = True

    def _emitter(self, protocol: str, reply: Reply, rec: RecordedRequest, stats: PromptStats) -> _Emitter:
        if protocol == "openai" and self.state.llama_cpp is not None and isinstance(rec.body, dict):
            return LlamaEmitter(reply, rec.model, rec.body, self.state.llama_cpp)
        if protocol == "openai":
            return _OpenAIEmitter(reply, rec, stats)
        if protocol == "anthropic":
            return _AnthropicEmitter(reply, rec, stats, self.state.signatures)
        if protocol == "responses":
            return ResponsesEmitter(reply, rec.index, rec.model, stats)
        return GeminiEmitter(reply, rec.index, rec.model, stats)

    def _stream(self, emitter: _Emitter, reply: Reply, include_usage: bool) -> None:
        delay = float(reply.get("chunk_delay", 0.0))
        stall_after = reply.get("stall_after")
        error_after = reply.get("error_after")
        sent = 0
        for frame, is_content in emitter.frames(include_usage):
            if is_content and error_after is not None and sent >= int(error_after):
                frame = emitter.error_frame(reply)
                if frame:  # an empty frame: the server only logs the error, and the stream just ends
                    self._write(frame)
                return
            if is_content and sent and delay:
                self._pause(delay)
            self._write(frame)
            if is_content:
                sent += 1
                if sent == 1 and reply.get("gather"):
                    self._gather(reply["gather"])
                if stall_after is not None and sent == int(stall_after):
                    self._pause(float(reply.get("stall_seconds", 30.0)))

    def _hold(self, name: str) -> None:
        """Answer nothing until the test releases `name`: a model that is slow for exactly as long as a test needs."""
        while True:
            with self.state.lock:
                if name in self.state.released:
                    return
            self._pause(0.02)  # notices a client that hangs up, and the server stopping

    def _gather(self, gather: dict[str, Any]) -> None:
        """Count this stream's first delta under the name, then hold until `count` streams have sent theirs."""
        name, count = str(gather["name"]), int(gather["count"])
        with self.state.lock:
            self.state.gathered[name] = self.state.gathered.get(name, 0) + 1
        while True:
            with self.state.lock:
                if self.state.gathered[name] >= count:
                    return
            self._pause(0.02)  # notices a client that hangs up, and the server stopping

    def _send_error_reply(self, protocol: str, reply: Reply) -> None:
        status = int(reply["status"])
        body: Any
        if protocol in ("openai", "responses"):
            etype, code, message = _OPENAI_ERRORS.get(status, ("server_error", "error", "Error (fake)."))
            body = {
                "error": {
                    "message": reply.get("error_message", message),
                    "type": reply.get("error_type", etype),
                    "param": None,
                    "code": reply.get("error_code", code),
                }
            }
        elif protocol == "gemini":
            body = {
                "error": {
                    "code": status,
                    "message": reply.get("error_message", "Error (fake)."),
                    "status": reply.get("error_type", GOOGLE_STATUS.get(status, "UNKNOWN")),
                }
            }
        else:
            etype, message = _ANTHROPIC_ERRORS.get(status, ("api_error", "Error (fake)."))
            body = {
                "type": "error",
                "error": {
                    "type": reply.get("error_type", etype),
                    "message": reply.get("error_message", message),
                },
            }
        self._send_json(status, body, reply.get("headers"))


def _log_rejection(rec: RecordedRequest) -> None:
    """With $FAKE_LLM_REJECTION_LOG set, append each rejection (and the running test) to that file.

    A suite-wide audit: tests that expect a refusal pass either way, so this shows
    which requests of a whole run a real provider would have refused.
    """
    path = os.environ.get("FAKE_LLM_REJECTION_LOG")
    if not path:
        return
    entry = {
        "test": os.environ.get("PYTEST_CURRENT_TEST"),
        "protocol": rec.protocol,
        "path": rec.path,
        "reason": rec.rejection,
    }
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _model_convention(model: str) -> Reply | None:
    match = _MODEL_STATUS.search(model)
    return {"status": int(match.group(1))} if match else None


# --------------------------------------------------------------------------- wire formats


class _OpenAIEmitter:
    """Turns a reply into chat.completion.chunk SSE frames (flag: is it a content delta)."""

    def __init__(self, reply: Reply, rec: RecordedRequest, stats: PromptStats) -> None:
        self.reply, self.rec, self.stats = reply, rec, stats
        self.base = {
            "id": f"chatcmpl-fake-{rec.index}",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": rec.model or "fake-model",
            "system_fingerprint": None,
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return b"data: " + json.dumps({**self.base, "choices": [choice]}).encode() + b"\n\n"

    def _call_id(self, i: int, call: dict[str, Any]) -> str:
        return str(call.get("id") or f"call_{self.rec.index}_{i}")

    def _usage(self, deltas: int) -> dict[str, Any]:
        usage = token_usage(self.reply, self.stats, deltas)
        return {
            "prompt_tokens": usage.input,
            "completion_tokens": usage.output,
            "total_tokens": usage.input + usage.output,
            "prompt_tokens_details": {"cached_tokens": usage.cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning, "audio_tokens": 0},
        }

    def _limit(self) -> int | None:
        """The request's output limit (a content delta counts as one token), as OpenAI enforces it."""
        body = self.rec.body if isinstance(self.rec.body, dict) else {}
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        return limit if isinstance(limit, int) and limit > 0 else None

    def frames(self, include_usage: bool) -> Iterator[tuple[bytes, bool]]:
        reply = self.reply
        yield self._chunk({"role": "assistant", "content": ""}), False
        deltas = 0
        for piece in text_pieces(reply.get("thought", ""), reply.get("thought_chunks")):
            deltas += 1
            yield self._chunk({"reasoning_content": piece}), True
        limit = self._limit()
        pieces = text_pieces(reply.get("text", ""), reply.get("chunks"))
        if reply.get("endless"):  # a model that never stops on its own: only the output limit ends it
            pieces = ["tick "] * (limit if limit is not None else _ENDLESS_CAP)
        cut = bool(reply.get("endless")) or (limit is not None and deltas + len(pieces) > limit)
        if cut:
            pieces = pieces[: max(0, limit - deltas)] if limit is not None else pieces
            reply = {**reply, "finish": "length", "tool_calls": []}
            self.reply = reply
        for piece in pieces:
            deltas += 1
            yield self._chunk({"content": piece}), True
        for i, call in enumerate(reply.get("tool_calls") or []):
            head = {"index": i, "id": self._call_id(i, call), "type": "function"}
            head["function"] = {"name": call["name"], "arguments": ""}
            deltas += 1
            yield self._chunk({"tool_calls": [head]}), True
            for frag in split_even(arguments_of(call), int(reply.get("arg_chunks", 3))):
                deltas += 1
                yield (
                    self._chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}),
                    True,
                )
        yield self._chunk({}, finish_of(reply)), False
        if include_usage:
            usage = self._usage(deltas)
            yield (
                b"data: " + json.dumps({**self.base, "choices": [], "usage": usage}).encode() + b"\n\n",
                False,
            )
        yield b"data: [DONE]\n\n", False

    def whole_response(self) -> dict[str, Any]:
        reply = self.reply
        calls = [
            {
                "id": self._call_id(i, c),
                "type": "function",
                "function": {"name": c["name"], "arguments": arguments_of(c)},
            }
            for i, c in enumerate(reply.get("tool_calls") or [])
        ]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.get("text", ""),
        }
        if reply.get("thought"):
            message["reasoning_content"] = reply["thought"]
        if calls:
            message["tool_calls"] = calls
        return {
            **self.base,
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_of(reply)}],
            "usage": self._usage(1),
        }

    def error_frame(self, reply: Reply) -> bytes:
        message = reply.get("error_message", "Overloaded (fake).")
        data = {"error": {"message": message, "type": "server_error", "code": "server_error"}}
        return b"data: " + json.dumps(data).encode() + b"\n\n"


class _AnthropicEmitter:
    """Turns a reply into Anthropic Messages SSE events (thinking, redacted, text, tool_use blocks)."""

    def __init__(self, reply: Reply, rec: RecordedRequest, stats: PromptStats, book: SignatureBook) -> None:
        self.reply, self.rec, self.stats = reply, rec, stats
        self.signature = book.issue(rec.index, 0, str(reply["thought"])) if reply.get("thought") else ""
        if reply.get("redacted"):
            book.issue_redacted(str(reply["redacted"]))

    @staticmethod
    def _event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    def _call_id(self, i: int, call: dict[str, Any]) -> str:
        return str(call.get("id") or f"toolu_{self.rec.index}_{i}")

    def _block(self, index: int, block: dict[str, Any], deltas: list[dict[str, Any]]) -> Iterator[tuple[bytes, bool]]:
        """One content block: start, its deltas (content deltas flagged True), stop."""
        is_tool = block["type"] == "tool_use"
        start = {"type": "content_block_start", "index": index, "content_block": block}
        yield self._event("content_block_start", start), is_tool
        for delta in deltas:
            data = {"type": "content_block_delta", "index": index, "delta": delta}
            yield (
                self._event("content_block_delta", data),
                delta["type"] != "signature_delta",
            )
        stop = {"type": "content_block_stop", "index": index}
        yield self._event("content_block_stop", stop), False

    def _blocks(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        reply = self.reply
        if thought := reply.get("thought", ""):
            pieces = text_pieces(thought, reply.get("thought_chunks"))
            deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
            deltas.append({"type": "signature_delta", "signature": self.signature})
            yield {"type": "thinking", "thinking": "", "signature": ""}, deltas
        if redacted := reply.get("redacted"):
            yield {"type": "redacted_thinking", "data": str(redacted)}, []
        if text := reply.get("text", ""):
            pieces = text_pieces(text, reply.get("chunks"))
            yield (
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": p} for p in pieces],
            )
        for i, call in enumerate(reply.get("tool_calls") or []):
            block = {
                "type": "tool_use",
                "id": self._call_id(i, call),
                "name": call["name"],
                "input": {},
            }
            frags = split_even(arguments_of(call), int(reply.get("arg_chunks", 3)))
            yield (
                block,
                [{"type": "input_json_delta", "partial_json": f} for f in frags],
            )

    def _usage(self, deltas: int, *, output: bool = True) -> dict[str, Any]:
        usage = token_usage(self.reply, self.stats, deltas, anthropic=True)
        return {
            "input_tokens": usage.input,
            "cache_creation_input_tokens": usage.cache_creation,
            "cache_read_input_tokens": usage.cached,
            "output_tokens": usage.output if output else 1,
        }

    def frames(self, include_usage: bool) -> Iterator[tuple[bytes, bool]]:
        del include_usage  # Anthropic always reports usage
        reply = self.reply
        message: dict[str, Any] = {
            "id": f"msg_fake_{self.rec.index}",
            "type": "message",
            "role": "assistant",
            "model": self.rec.model or "fake-model",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(0, output=False),
        }
        yield (
            self._event("message_start", {"type": "message_start", "message": message}),
            False,
        )
        deltas = 0
        for index, (block, block_deltas) in enumerate(self._blocks()):
            for frame, is_content in self._block(index, block, block_deltas):
                deltas += is_content
                yield frame, is_content
        out = token_usage(reply, self.stats, deltas, anthropic=True).output
        stop = _ANTHROPIC_STOP.get(finish_of(reply), finish_of(reply))
        delta_msg = {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": out},
        }
        yield self._event("message_delta", delta_msg), False
        yield self._event("message_stop", {"type": "message_stop"}), False

    def whole_response(self) -> dict[str, Any]:
        reply = self.reply
        content: list[dict[str, Any]] = []
        if reply.get("thought"):
            content.append({"type": "thinking", "thinking": reply["thought"], "signature": self.signature})
        if reply.get("redacted"):
            content.append({"type": "redacted_thinking", "data": str(reply["redacted"])})
        if reply.get("text"):
            content.append({"type": "text", "text": reply["text"]})
        for i, call in enumerate(reply.get("tool_calls") or []):
            content.append(
                {
                    "type": "tool_use",
                    "id": self._call_id(i, call),
                    "name": call["name"],
                    "input": arguments_object(call),
                }
            )
        return {
            "id": f"msg_fake_{self.rec.index}",
            "type": "message",
            "role": "assistant",
            "model": self.rec.model or "fake-model",
            "content": content,
            "stop_reason": _ANTHROPIC_STOP.get(finish_of(reply), finish_of(reply)),
            "stop_sequence": None,
            "usage": self._usage(1),
        }

    def error_frame(self, reply: Reply) -> bytes:
        message = reply.get("error_message", "Overloaded (fake).")
        data = {"type": "error", "error": {"type": "overloaded_error", "message": message}}
        return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


# --------------------------------------------------------------------------- server


class _QuietServer(ThreadingHTTPServer):
    """A client that hangs up on a kept-alive connection is normal (a cancelled turn, a killed agent)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeLLMServer:
    """In-process handle: start/stop, push replies, read requests, await disconnects."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        script: list[Reply] | None = None,
        *,
        max_prompt_chars: int | None = None,
        require_key: str | None = None,
        llama_cpp: LlamaSettings | None = None,
    ) -> None:
        self.state = FakeLLMState(max_prompt_chars=max_prompt_chars, require_key=require_key, llama_cpp=llama_cpp)
        if script:
            self.state.push(*script)
        handler = type("BoundHandler", (_Handler,), {"state": self.state})
        self.httpd = _QuietServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """Root URL; OpenAI clients want base_url + "/v1", Anthropic clients the root."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self.state.lock:
            return list(self.state.requests)

    def push(self, *replies: Reply) -> None:
        self.state.push(*replies)

    def release(self, name: str) -> None:
        """Let the replies held under `name` ("hold") answer."""
        with self.state.lock:
            self.state.released.add(name)

    @property
    def responder(self) -> Callable[[RecordedRequest], Reply | None] | None:
        """Computes the reply to an admitted request when the queue is empty (None: the default)."""
        return self.state.responder

    @responder.setter
    def responder(self, responder: Callable[[RecordedRequest], Reply | None] | None) -> None:
        self.state.responder = responder

    def configure(self, **options: Any) -> dict[str, Any]:
        """Change `max_prompt_chars` / `require_key` (None turns one off); answers the configuration."""
        unknown = set(options) - {"max_prompt_chars", "require_key", "llama_cpp"}
        if unknown:
            raise TypeError(f"unknown options: {sorted(unknown)}")
        return self.state.configure(options)

    def wait_for_request(self, count: int = 1, timeout: float = 5.0) -> bool:
        return self.state.wait_for(lambda: len(self.state.requests) >= count, timeout)

    def wait_until_closed(self, index: int = -1, timeout: float = 5.0) -> RecordedRequest | None:
        """Wait until request `index` ended (completed, errored or disconnected)."""

        def done() -> bool:
            reqs = self.state.requests
            return bool(reqs) and reqs[index].status != "open"

        return self.state.requests[index] if self.state.wait_for(done, timeout) else None

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.state.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


@contextlib.contextmanager
def start_fake_llm(
    script: list[Reply] | None = None,
    *,
    max_prompt_chars: int | None = None,
    require_key: str | None = None,
    llama_cpp: LlamaSettings | None = None,
) -> Iterator[FakeLLMServer]:
    """Run a fake LLM server on 127.0.0.1:<free port> for the duration of the block."""
    fake = FakeLLMServer(script=script, max_prompt_chars=max_prompt_chars, require_key=require_key, llama_cpp=llama_cpp)
    server = fake.start()
    try:
        yield server
    finally:
        server.stop()


def load_script(path: str | os.PathLike[str]) -> list[Reply]:
    """A script file holds a list of replies, or {"replies": [...]}."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    replies = data.get("replies", []) if isinstance(data, dict) else data
    return list(replies)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake LLM server (OpenAI, Anthropic, Responses, Gemini)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--script", help="JSON file with the initial reply queue")
    parser.add_argument("--max-prompt-chars", type=int, help="reject prompts over N characters as too long")
    parser.add_argument("--require-key", help="answer 401 unless this API key is presented")
    parser.add_argument("--llama-cpp", action="store_true", help="answer the OpenAI routes as llama-cpp-python does")
    parser.add_argument("--n-ctx", type=int, default=2048, help="the llama.cpp-like server's context, in tokens")
    args = parser.parse_args(argv)
    server = FakeLLMServer(
        args.host,
        args.port,
        load_script(args.script) if args.script else None,
        max_prompt_chars=args.max_prompt_chars,
        require_key=args.require_key,
        llama_cpp=LlamaSettings(n_ctx=args.n_ctx) if args.llama_cpp else None,
    )
    if args.port_file:
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(str(server.port), encoding="utf-8")
        tmp.replace(args.port_file)
    sys.stdout.write(f"{server.port}\n")
    sys.stdout.flush()
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.state.stopping.set()
        server.httpd.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
