"""An incremental server-sent-events decoder for the native HTTP adapters.

Why our own: both OpenAI and Anthropic stream responses as SSE, and the parts
of the format they use are small (``event:``/``data:`` fields, multi-line data,
``:`` comments, blank-line dispatch). A decoder fed raw bytes as they arrive
lets the provider translate each event the moment it is complete, handles
lines and UTF-8 sequences split across network chunks, and keeps the adapters
free of an SDK. See https://html.spec.whatwg.org/multipage/server-sent-events.html.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Any

from term2.ports.llm import LLMError

__all__ = ["DONE", "WHOLE_EVENT", "SSEDecoder", "SSEEvent", "event_json"]

DONE = "[DONE]"  # OpenAI's end-of-stream sentinel, sent as a data line


WHOLE_EVENT = "term2-whole-answer"  # not a server's event name: a non-streamed JSON answer, as one event


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its ``event:`` name ("message" when none was given) and joined ``data:`` lines."""

    event: str
    data: str

    @property
    def is_done(self) -> bool:
        return self.data == DONE


class SSEDecoder:
    """Feed bytes, get complete events; state is kept between calls.

    Lines may end in LF, CRLF or CR. A CR at the very end of a chunk is held
    back until the next byte shows whether an LF follows, so a CRLF split
    across chunks is not read as two line ends (which would dispatch early).
    """

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        return self._lines(self._pending + self._text.decode(chunk), final=False)

    def flush(self) -> list[SSEEvent]:
        """End of stream: a trailing line without its newline still counts; an undispatched event does not."""
        rest = self._pending + self._text.decode(b"", final=True)
        events = self._lines(rest + "\n", final=True) if rest else []
        self._event, self._data = "", []
        return events

    def _lines(self, text: str, *, final: bool) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        start = 0
        length = len(text)
        i = 0
        while i < length:
            ch = text[i]
            if ch == "\n" or ch == "\r":
                if ch == "\r" and i + 1 == length and not final:
                    break  # maybe half of a CRLF: wait for the next chunk
                event = self._line(text[start:i])
                if event is not None:
                    events.append(event)
                if ch == "\r" and i + 1 < length and text[i + 1] == "\n":
                    i += 1
                start = i + 1
            i += 1
        self._pending = text[start:]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive ": ping"
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        # "id" and "retry" matter only to reconnecting EventSource clients; unknown fields are ignored.
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(self._event or "message", "\n".join(self._data))
        self._event, self._data = "", []
        return event


def event_json(data: str, model: str) -> dict[str, Any]:
    """One SSE event's JSON object; a non-object is empty, unreadable data a provider error.

    A lone surrogate the provider escaped (`"\\udc00"`) is left in: a pair split across two events is
    joined, and every lone one mended, on the port's events (`stream_events`, `mended_events`, ADR 0035).
    """
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise LLMError(f"Provider error from {model}: unreadable stream data {data[:80]!r}") from exc
    return payload if isinstance(payload, dict) else {}
