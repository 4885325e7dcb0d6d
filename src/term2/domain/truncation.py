"""Cutting text to a size, with the cut always marked.

Tool results, replays, titles and error details are all cut somewhere; each
place picks its limit and its marker, but the cutting is done here so that a
cut is never silent and an off-by-one at the edge happens nowhere.
A marker may say how much was dropped with ``{cut}`` (a count of characters).
"""

from __future__ import annotations

ELLIPSIS = "…"


def keep_head(text: str, limit: int, marker: str) -> str:
    """The first `limit` characters and then `marker`; `text` itself if it fits."""
    if len(text) <= limit:
        return text
    return text[:limit] + marker.format(cut=len(text) - limit)


def keep_ends(text: str, limit: int, marker: str) -> str:
    """The first third and the last two thirds of `limit`, `marker` between them.

    The end is kept longer because that is where a build log says what failed.
    """
    if len(text) <= limit:
        return text
    head = limit // 3
    tail = limit - head
    return text[:head] + marker.format(cut=len(text) - limit) + text[len(text) - tail :]


def ellipsize(text: str, limit: int) -> str:
    """At most `limit` characters, the last one an ellipsis when `text` was cut; for titles."""
    return text if len(text) <= limit else text[: limit - 1] + ELLIPSIS
