"""Tool calls named by term2, not by the model (ADR 0021).

A tool call's id arrives from the model, so the model chooses it: a model
that gives a later call an earlier call's id (by mistake, from a proxy that
numbers calls per response, or on purpose) would make that call replace the
earlier one wherever calls are keyed by id: the session's history (a later
snapshot of an id replaces the earlier ones), a client's live view, a
terminal, an approval. So every call gets a term2-made id, fresh and random,
for everything term2 and the client see.

The provider's id is kept only where the provider needs it back: in the
transcript, on the assistant message's call and on its result. Even there it
is replaced when the provider could not take it back: an empty id, or one
already used in the transcript (Anthropic refuses a conversation whose
`tool_use` ids repeat; two results under one id answer neither clearly).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from term2.app.clock import new_id, new_wire_call_id
from term2.domain.transcript import ModelMessage, ToolCallRequest


@dataclass(frozen=True, slots=True)
class NamedCall:
    """One call under its two names."""

    sent: ToolCallRequest  # as the transcript keeps it: the provider's id, unless it could not be sent back
    call: ToolCallRequest  # under term2's id: what the toolbox runs, records and shows the client


class CallNamer:
    """Names the calls of one model response, given the ids the transcript already holds."""

    def __init__(self, transcript: Iterable[ModelMessage]) -> None:
        self._taken = {call.call_id for item in transcript for call in item.message.tool_calls}

    def name(self, call: ToolCallRequest) -> NamedCall:
        sent_id = call.call_id
        while not sent_id or sent_id in self._taken:
            sent_id = new_wire_call_id()
        self._taken.add(sent_id)
        return NamedCall(replace(call, call_id=sent_id), replace(call, call_id=new_id("call")))
