"""Wire pieces shared by both ACP versions: the names term2's domain values have on the wire.

The tables are typed with the schema's literal types, so mypy checks every value
term2 sends for a tool kind or a stop reason. They are typed with v1's literals and
used in v2 messages too, where mypy checks that v2 still names each of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from term2.domain.content import EmbeddedResource
from term2.domain.history import Location, ToolCall, ToolKind
from term2.domain.turn import StopReason
from term2.domain.usage import CURRENCY, TokenUsage
from term2.ports.updates import Spent, UsageChanged

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1, v2

TOOL_KINDS: dict[ToolKind, v1.ToolKind] = {
    ToolKind.READ: "read",
    ToolKind.EDIT: "edit",
    ToolKind.DELETE: "delete",
    ToolKind.MOVE: "move",
    ToolKind.SEARCH: "search",
    ToolKind.EXECUTE: "execute",
    ToolKind.THINK: "think",
    ToolKind.FETCH: "fetch",
    ToolKind.OTHER: "other",
}

# Not StopReason.ERROR: v1 reports a failed turn as an error answer, v2 as an extension value.
STOP_REASONS: dict[StopReason, v1.StopReason] = {
    StopReason.END_TURN: "end_turn",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.MAX_TURN_REQUESTS: "max_turn_requests",
    StopReason.REFUSAL: "refusal",
    StopReason.CANCELLED: "cancelled",
}


def parent_meta(call: ToolCall) -> dict[str, Any] | None:
    """A nested run_code call names its parent in `_meta`, ACP's place for extensions."""
    if call.parent_id is None:
        return None
    return {"term2": {"parentToolCallId": call.parent_id}}


def locations(locs: tuple[Location, ...]) -> list[v1.ToolCallLocation]:
    """Where a tool call acts; the same shape in v1 and v2 (mypy checks it against both)."""
    out: list[v1.ToolCallLocation] = []
    for loc in locs:
        item: v1.ToolCallLocation = {"path": loc.path}
        if loc.line is not None:
            item["line"] = loc.line
        out.append(item)
    return out


def turn_usage(spent: Spent) -> v2.Usage:
    """The turn's tokens in the schema's `Usage` (the v2 idle update; v1's prompt response, where the
    2.4.0 schema keeps it among the unstable fields, so v1's stable types no longer name it)."""
    turn = spent.turn
    return {
        "totalTokens": turn.input + turn.output,
        "inputTokens": turn.input,
        "outputTokens": turn.output,
        "thoughtTokens": turn.reasoning,
        "cachedReadTokens": turn.cached,
        "cachedWriteTokens": turn.cache_write,
    }


def spent_meta(spent: Spent) -> dict[str, Any]:
    """What the schema has no field for: costs and the session's totals, under term2's own `_meta` key."""

    def tokens(usage: TokenUsage) -> dict[str, int]:
        return {
            "inputTokens": usage.input,
            "outputTokens": usage.output,
            "cachedReadTokens": usage.cached,
            "cachedWriteTokens": usage.cache_write,
            "thoughtTokens": usage.reasoning,
        }

    return {
        "term2": {
            "turn": {**tokens(spent.turn), "cost": spent.turn_cost, "reported": spent.reported},
            "session": {**tokens(spent.session), "cost": spent.session_cost},
            "currency": CURRENCY,
        }
    }


def usage_meta(event: UsageChanged) -> dict[str, Any]:
    """Whether `used` is the provider's count or term2's estimate: the schema has no field for it.

    A server that reports no usage (llama-cpp-python while streaming) leaves
    term2 only its estimate; a client that shows `used` as measured would mislead.
    """
    return {"term2": {"usage": "estimated" if event.estimated else "reported"}}


def cost_of(amount: float | None) -> v1.Cost | None:
    return None if amount is None else {"amount": round(amount, 6), "currency": CURRENCY}


def resource_contents(block: EmbeddedResource) -> v1.EmbeddedResourceResource:
    """An embedded resource as the client sent it (a replay shows the user their own prompt); v1's type,
    which v2's messages take too."""
    if block.text is not None:
        text: v1.TextResourceContents = {"uri": block.uri, "text": block.text}
        if block.mime_type is not None:
            text["mimeType"] = block.mime_type
        return text
    blob: v1.BlobResourceContents = {"uri": block.uri, "blob": block.blob or ""}
    if block.mime_type is not None:
        blob["mimeType"] = block.mime_type
    return blob
