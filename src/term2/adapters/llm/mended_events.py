"""Port events with no lone surrogate in their text, for the path whose JSON litellm decodes.

The native wires mend each event's JSON as they decode it (`sse.event_json`); litellm
decodes its providers' JSON itself and hands over objects, so their strings are mended
here, one event at a time, before they leave the adapter (`term2.domain.mended_text`).
A string without a lone surrogate is kept as it is (one regex search), and so is an
event none of whose strings changed.
"""

from __future__ import annotations

from dataclasses import replace

from term2.domain.mended_text import mend_text
from term2.ports.llm import LLMEvent, ReasoningReady, TextDelta, ThoughtDelta, ToolCallReady


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
