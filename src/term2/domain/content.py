"""Prompt content as term2 understands it, independent of any wire format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from term2.domain.images import Image
from term2.domain.uris import printable, target_of

# An embedded resource costs what a read costs: the same cap as read_file's (app/tools/read.py,
# READ_LIMIT_TOKENS x BYTES_PER_TOKEN; a unit test keeps the two equal), so an @-mentioned file is
# shown to the model as fully as the model could have read it itself, and no more.
EMBED_LIMIT_BYTES = 36_000
_BYTES_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ResourceLink:
    """A link the model may read through its tools; term2 never fetches it from a network."""

    uri: str
    name: str
    type: Literal["resource_link"] = "resource_link"


@dataclass(frozen=True, slots=True)
class EmbeddedResource:
    """Context the client put in the prompt itself (an @-mention's text, or a file's bytes).

    Kept whole, as it came, so that a replay shows the user what they sent;
    what the model sees of it is bounded when the prompt is rendered. `blob`
    is the client's base64 text, never shown to the model.
    """

    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None
    type: Literal["resource"] = "resource"


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image the client attached (an `image` block, or a `resource` blob of an image type), checked
    by `domain.images` on the way in; `uri` is where it came from, when the client said."""

    data: str  # base64
    mime_type: str
    uri: str | None = None
    embedded: bool = False  # it came as a `resource` blob, and is replayed as one
    type: Literal["image"] = "image"


ContentBlock = TextBlock | ResourceLink | EmbeddedResource | ImageBlock


def images_of(blocks: tuple[ContentBlock, ...]) -> tuple[Image, ...]:
    """The prompt's images, in order, as the model is sent them after the prompt's text."""
    return tuple(Image(b.mime_type, b.data) for b in blocks if isinstance(b, ImageBlock))


def render_for_model(blocks: tuple[ContentBlock, ...]) -> str:
    """Flatten prompt blocks into the text handed to the model.

    A file link becomes a path the model can open with its read tool, so that
    the agent never dereferences a URI on its own initiative; embedded text
    comes with its URI (and path) and is cut like a read would be.
    """
    parts: list[str] = []
    shown = 0
    for block in blocks:
        if isinstance(block, ImageBlock):
            shown += 1
            parts.append(_image(block, shown))
        elif isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceLink):
            parts.append(_link(block))
        elif block.text is not None:
            parts.append(_embedded_text(block, block.text))
        else:
            parts.append(_embedded_blob(block))
    return "\n".join(parts)


def _named(uri: str) -> str:
    """A local file as its decoded path (and the part of it meant), anything else as its URI."""
    target = target_of(uri)
    if target.path is None:
        return printable(uri)
    return printable(target.path + (f" ({target.part})" if target.part else ""))


def _link(link: ResourceLink) -> str:
    name = printable(link.name)
    if target_of(link.uri).path is None:
        return f"[attached: {name} -> {printable(link.uri)} (not a local file; term2 does not open it)]"
    return f"[attached: {name} -> {_named(link.uri)}]"


def _label(block: EmbeddedResource) -> str:
    named = _named(block.uri)
    label = named if named == printable(block.uri) else f"{named} <{printable(block.uri)}>"
    return label + (f", {printable(block.mime_type)}" if block.mime_type else "")


def _embedded_text(block: EmbeddedResource, text: str) -> str:
    shown, total_lines, shown_lines = _cut(text, EMBED_LIMIT_BYTES)
    body = shown if shown.endswith("\n") or not shown else shown + "\n"
    head = f"[attached text of {_label(block)}:]\n"
    if shown_lines is None:
        return f"{head}{body}[end of attached text]"
    tokens = EMBED_LIMIT_BYTES // _BYTES_PER_TOKEN
    path = target_of(block.uri).path
    rest = (
        f"; read {printable(path)} from line {shown_lines + 1} for the rest (as saved on disk)"
        if path is not None
        else ""
    )
    return (
        f"{head}{body}[attached text cut at about {tokens:,} tokens: {shown_lines:,} of {total_lines:,} "
        f"lines shown{rest}]"
    )


def _cut(text: str, limit_bytes: int) -> tuple[str, int, int | None]:
    """(what is shown, how many lines there are, how many whole lines were shown or None when all were).

    Whole lines while they fit, as a read shows them; a first line longer
    than the cap is shown up to it, so the model never gets nothing.
    """
    lines = text.splitlines(keepends=True)
    if len(text.encode("utf-8")) <= limit_bytes:
        return text, len(lines), None
    used = 0
    kept: list[str] = []
    for line in lines:
        size = len(line.encode("utf-8"))
        if used + size > limit_bytes:
            break
        kept.append(line)
        used += size
    if not kept:
        head = lines[0].encode("utf-8")[:limit_bytes].decode("utf-8", "ignore")
        return head + "\n[line 1 was cut]\n", len(lines), 0
    return "".join(kept), len(lines), len(kept)


def _image(block: ImageBlock, number: int) -> str:
    source = f" {_named(block.uri)}" if block.uri else ""
    size = decoded_size(block.data)
    return f"[attached image {number}{source} ({block.mime_type}, {size:,} bytes): sent with this message]"


def _embedded_blob(block: EmbeddedResource) -> str:
    kind = printable(block.mime_type) if block.mime_type else "unknown type"
    size = decoded_size(block.blob or "")
    return f"[attached binary data: {_named(block.uri)} ({kind}, {size:,} bytes); its content is not shown to you]"


def decoded_size(blob: str) -> int:
    """The byte count of base64 text, without decoding it."""
    return len(blob) * 3 // 4 - len(blob) + len(blob.rstrip("="))
