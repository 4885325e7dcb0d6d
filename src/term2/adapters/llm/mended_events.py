"""Port events with no lone surrogate in their text: every adapter's stream passes through a `StreamMender`.

A provider may escape a lone surrogate in its JSON (`"\\udc00"`), which decodes to text no store or
client can encode (ADR 0035). Mending happens on the port's events rather than on each decoded chunk,
for two reasons: litellm decodes its providers' JSON itself and hands over objects, and a server that
cuts its text by UTF-16 units (a JavaScript one slicing a string) can split a pair across two deltas,
each then holding one lone half. A delta ending in a high surrogate keeps it back until the next delta
of its kind, which joins it to its low half; a tool call's arguments are mended once whole, so their
fragments join the same way (`mend_text`). A string without a lone surrogate is kept as it is (one
regex search), and so is an event none of whose strings changed.
"""

from __future__ import annotations

from dataclasses import replace

from term2.domain.mended_text import mend_text
from term2.ports.llm import LLMEvent, ReasoningReady, TextDelta, ThoughtDelta, ToolCallReady

Delta = TextDelta | ThoughtDelta


def mended_event(event: LLMEvent) -> LLMEvent:
    """`event` with every lone surrogate in its text replaced by U+FFFD (the same object when none was)."""
    if isinstance(event, (TextDelta, ThoughtDelta)):
        text = mend_text(event.text)
        return event if text is event.text else replace(event, text=text)
    if isinstance(event, ToolCallReady):
        call = event.call
        fields = {"call_id": call.call_id, "name": call.name, "arguments": call.arguments}
        mended = {key: mend_text(value) for key, value in fields.items()}
        if all(mended[key] is fields[key] for key in fields):
            return event
        return ToolCallReady(replace(call, **mended))
    if isinstance(event, ReasoningReady):
        block = event.block
        text = mend_text(block.text)
        signature = None if block.signature is None else mend_text(block.signature)
        if text is block.text and signature is block.signature:
            return event
        return ReasoningReady(replace(block, text=text, signature=signature))
    return event


class StreamMender:
    """Mends one stream's events in order; a pair split across two deltas of one kind is joined, not lost.

    A held half goes out as U+FFFD with the first event of another sort (a tool call, the usage, the
    `Finished` that always ends a stream), so nothing is held past the end and the order is kept.
    """

    def __init__(self) -> None:
        self._held: dict[type[Delta], str] = {}

    def feed(self, event: LLMEvent) -> list[LLMEvent]:
        if isinstance(event, (TextDelta, ThoughtDelta)):
            return self._delta(event)
        return [*self._release(), mended_event(event)]

    def _delta(self, event: Delta) -> list[LLMEvent]:
        kind = type(event)
        held = self._held.pop(kind, "")
        text = held + event.text
        if text and "\ud800" <= text[-1] <= "\udbff":  # a high half: its low half may open the next delta
            self._held[kind] = text[-1]
            text = text[:-1]
        if not text:
            return []
        mended = mend_text(text)
        return [event] if mended is event.text else [kind(mended)]

    def _release(self) -> list[LLMEvent]:
        out: list[LLMEvent] = [kind(mend_text(text)) for kind, text in self._held.items()]
        self._held.clear()
        return out
