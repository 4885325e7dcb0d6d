"""The fake LLM server's smaller wire formats: OpenAI Responses and Gemini generateContent.

Enough for an agent (codex, gemini-cli, the official clients) to get a streamed
reply: reasoning (`thought`), text and function calls, usage, finish reasons and
an in-stream failure (`error_after`). Every frame is flagged as a content delta
or not, as the handler's pacing (`chunk_delay`, `stall_after`) expects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.fakes.llm_replies import (
    PromptStats,
    Reply,
    TokenUsage,
    arguments_object,
    arguments_of,
    finish_of,
    split_even,
    text_pieces,
    token_usage,
)

Frame = tuple[bytes, bool]
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
_GEMINI_FINISH = {"stop": "STOP", "tool_calls": "STOP", "length": "MAX_TOKENS", "content_filter": "SAFETY"}


class ResponsesEmitter:
    """A reply as OpenAI Responses API events (`response.created` ... `response.completed`)."""

    def __init__(self, reply: Reply, index: int, model: str, stats: PromptStats) -> None:
        self.reply, self.index, self.model, self.stats = reply, index, model or "fake-model", stats
        self.seq = 0

    def _event(self, name: str, **data: Any) -> bytes:
        payload = {"type": name, **data, "sequence_number": self.seq}
        self.seq += 1
        return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()

    def _response(self, status: str, output: list[dict[str, Any]], usage: TokenUsage | None) -> dict[str, Any]:
        finish = finish_of(self.reply)
        incomplete = {"reason": _INCOMPLETE[finish]} if status == "incomplete" else None
        return {
            "id": f"resp_fake_{self.index}",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": self.model,
            "output": output,
            "error": None,
            "incomplete_details": incomplete,
            "instructions": None,
            "metadata": {},
            "parallel_tool_calls": True,
            "temperature": 1.0,
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "text": {"format": {"type": "text"}},
            "usage": _responses_usage(usage) if usage else None,
        }

    def _final_status(self) -> str:
        return "incomplete" if finish_of(self.reply) in _INCOMPLETE else "completed"

    def _items(self) -> list[dict[str, Any]]:
        reply, items = self.reply, []
        if thought := reply.get("thought", ""):
            summary = [{"type": "summary_text", "text": thought}]
            items.append({"id": f"rs_fake_{self.index}", "type": "reasoning", "summary": summary})
        if text := reply.get("text", ""):
            part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            message = {"id": f"msg_fake_{self.index}", "type": "message", "status": "completed", "role": "assistant"}
            items.append({**message, "content": [part]})
        for i, call in enumerate(reply.get("tool_calls") or []):
            items.append(
                {
                    "id": f"fc_fake_{self.index}_{i}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": str(call.get("id") or f"call_{self.index}_{i}"),
                    "name": call["name"],
                    "arguments": arguments_of(call),
                }
            )
        return items

    def frames(self, include_usage: bool) -> Iterator[Frame]:
        del include_usage  # the Responses API always reports usage
        reply, deltas = self.reply, 0
        yield self._event("response.created", response=self._response("in_progress", [], None)), False
        yield self._event("response.in_progress", response=self._response("in_progress", [], None)), False
        items = self._items()
        for out, item in enumerate(items):
            started = {**item, "status": "in_progress"}
            if item["type"] == "message":
                started["content"] = []
            elif item["type"] == "reasoning":
                started["summary"] = []
            elif item["type"] == "function_call":
                started["arguments"] = ""
            yield (
                self._event("response.output_item.added", output_index=out, item=started),
                item["type"] == "function_call",
            )
            ids = {"item_id": item["id"], "output_index": out}
            if item["type"] == "reasoning":
                text = item["summary"][0]["text"]
                part = {"type": "summary_text", "text": ""}
                yield self._event("response.reasoning_summary_part.added", **ids, summary_index=0, part=part), False
                for piece in text_pieces(text, reply.get("thought_chunks")):
                    deltas += 1
                    yield (
                        self._event("response.reasoning_summary_text.delta", **ids, summary_index=0, delta=piece),
                        True,
                    )
                yield self._event("response.reasoning_summary_text.done", **ids, summary_index=0, text=text), False
                part = {"type": "summary_text", "text": text}
                yield self._event("response.reasoning_summary_part.done", **ids, summary_index=0, part=part), False
            elif item["type"] == "message":
                text = item["content"][0]["text"]
                empty = {"type": "output_text", "text": "", "annotations": []}
                yield self._event("response.content_part.added", **ids, content_index=0, part=empty), False
                for piece in text_pieces(text, reply.get("chunks")):
                    deltas += 1
                    yield (
                        self._event("response.output_text.delta", **ids, content_index=0, delta=piece, logprobs=[]),
                        True,
                    )
                yield self._event("response.output_text.done", **ids, content_index=0, text=text, logprobs=[]), False
                yield self._event("response.content_part.done", **ids, content_index=0, part=item["content"][0]), False
            else:
                deltas += 1
                for frag in split_even(item["arguments"], int(reply.get("arg_chunks", 3))):
                    deltas += 1
                    yield self._event("response.function_call_arguments.delta", **ids, delta=frag), True
                yield (
                    self._event("response.function_call_arguments.done", **ids, arguments=item["arguments"]),
                    False,
                )
            yield self._event("response.output_item.done", output_index=out, item=item), False
        status = self._final_status()
        usage = token_usage(reply, self.stats, deltas)
        name = "response.completed" if status == "completed" else "response.incomplete"
        yield self._event(name, response=self._response(status, items, usage)), False

    def whole_response(self) -> dict[str, Any]:
        return self._response(self._final_status(), self._items(), token_usage(self.reply, self.stats, 1))

    def error_frame(self, reply: Reply) -> bytes:
        failed = self._response("failed", [], None)
        failed["error"] = {"code": "server_error", "message": reply.get("error_message", "Overloaded (fake).")}
        return self._event("response.failed", response=failed)


def _responses_usage(usage: TokenUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input,
        "input_tokens_details": {"cached_tokens": usage.cached},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.input + usage.output,
    }


class GeminiEmitter:
    """A reply as Gemini `GenerateContentResponse` chunks (SSE with `alt=sse`)."""

    def __init__(self, reply: Reply, index: int, model: str, stats: PromptStats) -> None:
        self.reply, self.index, self.model, self.stats = reply, index, model or "fake-model", stats

    def _chunk(
        self, parts: list[dict[str, Any]], finish: str | None = None, usage: TokenUsage | None = None
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        chunk: dict[str, Any] = {
            "candidates": [candidate],
            "modelVersion": self.model,
            "responseId": f"fake-{self.index}",
        }
        if usage is not None:
            chunk["usageMetadata"] = {
                "promptTokenCount": usage.input,
                "candidatesTokenCount": usage.output,
                "totalTokenCount": usage.input + usage.output + usage.reasoning,
                **({"thoughtsTokenCount": usage.reasoning} if usage.reasoning else {}),
            }
        return chunk

    def _parts(self) -> Iterator[list[dict[str, Any]]]:
        reply = self.reply
        for piece in text_pieces(reply.get("thought", ""), reply.get("thought_chunks")):
            yield [{"text": piece, "thought": True}]
        for piece in text_pieces(reply.get("text", ""), reply.get("chunks")):
            yield [{"text": piece}]
        for call in reply.get("tool_calls") or []:
            function = {"name": call["name"], "args": arguments_object(call)}
            if call.get("id"):
                function["id"] = call["id"]
            yield [{"functionCall": function}]

    def chunks(self) -> Iterator[tuple[dict[str, Any], bool]]:
        deltas = 0
        parts = list(self._parts())
        for part in parts:
            deltas += 1
            yield self._chunk(part), True
        finish = _GEMINI_FINISH.get(finish_of(self.reply), "STOP")
        yield self._chunk([{"text": ""}], finish, token_usage(self.reply, self.stats, deltas)), False

    def frames(self, include_usage: bool) -> Iterator[Frame]:
        del include_usage
        for chunk, is_content in self.chunks():
            yield b"data: " + json.dumps(chunk).encode() + b"\r\n\r\n", is_content

    def whole_response(self) -> dict[str, Any]:
        parts = [p for ps in self._parts() for p in ps]
        merged: list[dict[str, Any]] = []
        for part in parts:  # one text part (and one thought part), as the real API answers
            if merged and "text" in part and "text" in merged[-1] and part.get("thought") == merged[-1].get("thought"):
                merged[-1] = {**merged[-1], "text": merged[-1]["text"] + part["text"]}
            else:
                merged.append(part)
        finish = _GEMINI_FINISH.get(finish_of(self.reply), "STOP")
        return self._chunk(merged or [{"text": ""}], finish, token_usage(self.reply, self.stats, max(1, len(parts))))

    def error_frame(self, reply: Reply) -> bytes:
        error = {"code": 503, "message": reply.get("error_message", "Overloaded (fake)."), "status": "UNAVAILABLE"}
        return b"data: " + json.dumps({"error": error}).encode() + b"\r\n\r\n"
