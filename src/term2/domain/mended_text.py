"""JSON text from outside, made into Unicode that every part of term2 can keep.

JSON may escape a lone UTF-16 surrogate (`"\\ud800"`), and Python's decoder
gives it back as a str holding one. That str is not Unicode: UTF-8 cannot
encode it, so the session store, a strict client's JSON parser, a provider's
request body and the log would each fail on it, far from where it came in.
The adapters that decode JSON from a client, a model provider or an MCP
server therefore mend it at their boundary (`loads`, or `mend_text` on the
strings a library decoded; ADR 0035): each lone surrogate becomes U+FFFD, the
character Unicode has for "something unreadable was here", and a valid pair
(`\\ud83d\\ude00`, already one character once decoded) is kept.

The cost is paid only by text that may hold one: a lone surrogate can only
come from a `\\uD800`-`\\uDFFF` escape, so a JSON text without one is never
walked (the decoded value is returned as `json.loads` made it).

A mended string is a `MendedText`: still a str for everything that shows,
stores or sends it, but marked, because it is no longer the exact text that
was sent. A field that names something to act on (a directory, a command)
refuses it instead of guessing which name was meant.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["MendedText", "loads", "may_hold_lone_surrogates", "mend", "mend_text"]

_LONE = re.compile("[\ud800-\udfff]")
# The escape a lone surrogate can come from (JSON's `u` is lower case; its hex digits are not).
_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")


class MendedText(str):
    """Text that held lone surrogates, each now U+FFFD: fine to show, store and send, not to name a file with."""

    __slots__ = ()


def may_hold_lone_surrogates(raw: str | bytes | bytearray) -> bool:
    """Whether decoding the JSON text `raw` can give a lone surrogate: it holds a surrogate's escape."""
    # A backslash (memchr) first: text without one needs no scan. Else one pass of the regex engine's
    # literal-prefix search, ~0.3-0.9 ms for a MiB of text (benchmarks/bench_mended_text.py).
    if isinstance(raw, str):
        return "\\" in raw and _ESCAPE.search(raw) is not None
    return b"\\" in raw and _ESCAPE_BYTES.search(raw) is not None


def mend_text(text: str) -> str:
    """`text` itself when it holds no lone surrogate, else a `MendedText` with each one replaced by U+FFFD.

    Two halves side by side (text put together from pieces decoded apart, such as a tool call's argument
    fragments) are joined into the character they spell; UTF-16's codec does both in one pass.
    """
    if _LONE.search(text) is None:
        return text
    return MendedText(text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace"))


def mend(value: Any) -> Any:
    """A freshly decoded JSON value with every string (object keys too) mended, its containers changed in place.

    Iterative, so a value nested as deep as the decoder allows is mended too, not a RecursionError.
    """
    if isinstance(value, str):
        return mend_text(value)
    stack: list[Any] = [value]
    while stack:
        container = stack.pop()
        if isinstance(container, list):
            for index, item in enumerate(container):
                if isinstance(item, str):
                    container[index] = mend_text(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
        elif isinstance(container, dict):
            if any(isinstance(key, str) and _LONE.search(key) for key in container):
                pairs = [(mend_text(key), item) for key, item in container.items()]
                container.clear()
                container.update(pairs)
            for key, item in container.items():
                if isinstance(item, str):
                    container[key] = mend_text(item)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
    return value


def loads(raw: str | bytes | bytearray) -> Any:
    """`json.loads(raw)`, mended; the decoded value is walked only when `raw` holds a surrogate's escape."""
    value = json.loads(raw)
    return mend(value) if may_hold_lone_surrogates(raw) else value
