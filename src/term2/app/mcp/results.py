"""What the model reads of an MCP tool's result.

The model gets text: the tool's text parts as they are, embedded text
resources with their URI, links and blobs named, images as images to a model
that takes them (checked and bounded as a pasted one, ADR 0046), audio and
images for other models as a placeholder. Structured content
is added as JSON only when the tool gave no text, since MCP asks tools that
return structured content to repeat it as text and it would otherwise be paid
for twice. The agent loop then bounds the whole and archives it like any tool
output (`app/results.py`); `MAX_RENDERED` only keeps a hostile server from
making term2 hold an unbounded string before that.
"""

from __future__ import annotations

import json

from term2.app.mcp.names import escaped
from term2.domain.images import Image, InvalidImage, checked_image
from term2.domain.truncation import keep_ends
from term2.ports.mcp import MediaPart, RemoteResult, ResultPart, TextPart

MAX_RENDERED = 10_000_000  # characters kept of one result before the ordinary bound applies


def _render_part(part: ResultPart, images: list[Image] | None) -> str:
    """``images``: where the model takes images, the list a valid image part is added to."""
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, MediaPart) and part.kind == "image" and images is not None:
        try:
            image = checked_image(part.data, part.mime_type, "the tool's image")
        except InvalidImage as exc:
            return f"[image ({escaped(part.mime_type)}) returned by the tool, not shown: {exc}]"
        images.append(image)
        return f"[image {len(images)} ({image.mime_type}) returned by the tool: attached to this result]"
    if isinstance(part, MediaPart):
        why = "the model in use does not take images" if part.kind == "image" else "term2 does not show audio"
        return f"[{part.kind} ({escaped(part.mime_type)}) returned by the tool; {why}]"
    mime = f", {part.mime_type}" if part.mime_type else ""
    if part.linked:
        return f"[resource link: {part.uri}{mime}]"
    if part.text is None:
        return f"[binary resource {part.uri}{mime}; not shown]"
    return f"[resource {part.uri}{mime}]\n{part.text}"


def render_result(result: RemoteResult, takes_images: bool = False) -> tuple[str, tuple[Image, ...]]:
    """The text the model reads, and the images it is sent beside it (none unless it takes images)."""
    images: list[Image] | None = [] if takes_images else None
    pieces = [_render_part(part, images) for part in result.parts]
    if result.structured is not None and not any(isinstance(part, TextPart) for part in result.parts):
        pieces.append(json.dumps(result.structured, ensure_ascii=False, default=str))
    text = "\n".join(pieces) if pieces else "(the tool returned no content)"
    if result.is_error:
        text = f"Error: the tool reported a failure:\n{text}"
    return keep_ends(text, MAX_RENDERED, "\n[... {cut} characters cut ...]\n"), tuple(images or ())
