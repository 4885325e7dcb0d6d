"""Prompt content as term2 understands it, independent of any wire format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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


ContentBlock = TextBlock | ResourceLink


def render_for_model(blocks: tuple[ContentBlock, ...]) -> str:
    """Flatten prompt blocks into the text handed to the model.

    A file link becomes a path the model can open with its read tool, so that
    the agent never dereferences a URI on its own initiative.
    """
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        else:
            target = block.uri.removeprefix("file://") if block.uri.startswith("file://") else block.uri
            parts.append(f"[attached: {block.name} -> {target}]")
    return "\n".join(parts)
