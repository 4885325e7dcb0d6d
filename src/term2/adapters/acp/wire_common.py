"""Wire pieces shared by both ACP versions."""

from __future__ import annotations

from typing import Any

from term2.domain.content import ContentBlock, TextBlock
from term2.domain.history import Location, ToolCall


def content_block(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    return {"type": "resource_link", "uri": block.uri, "name": block.name}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def locations(locs: tuple[Location, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for loc in locs:
        item: dict[str, Any] = {"path": loc.path}
        if loc.line is not None:
            item["line"] = loc.line
        out.append(item)
    return out


def parent_meta(call: ToolCall) -> dict[str, Any]:
    """A nested run_code call names its parent in `_meta`, ACP's place for extensions."""
    if call.parent_id is None:
        return {}
    return {"_meta": {"term2": {"parentToolCallId": call.parent_id}}}
