"""What a URI from the client names, in words the model can act on.

Editors send file URIs percent-encoded (`file:///a%20b.py`); a model handed
the raw URI would look for a file called `a%20b.py`. Only a local file URI
becomes a path: every other scheme (and a file URI on another host) is named
to the model and never opened, so that a prompt cannot make term2 fetch
anything on its own initiative.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

_LINES = re.compile(r"L(\d+)(?::(\d+))?")


@dataclass(frozen=True, slots=True)
class Target:
    """`path` is the local file a URI names (None when it names no local file); `part` what of it
    (a line range or a symbol from the URI's query or fragment), empty for the whole file."""

    path: str | None
    part: str = ""


def target_of(uri: str) -> Target:
    try:
        parts = urlsplit(uri)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return Target(None)
    if parts.scheme.lower() != "file" or parts.netloc.lower() not in ("", "localhost"):
        return Target(None)
    try:
        path = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:  # not a name this system could have
        return Target(None)
    if not path.startswith("/") or "\x00" in path:
        return Target(None)
    return Target(path, _part(unquote(parts.query), unquote(parts.fragment)))


def _part(query: str, fragment: str) -> str:
    """Zed marks a selection `#L10:20` (1-based lines) and a symbol `?symbol=name`; others pass as written."""
    words: list[str] = []
    if query:
        words.append(f"symbol {query.removeprefix('symbol=')}" if query.startswith("symbol=") else f"?{query}")
    lines = _LINES.fullmatch(fragment)
    if lines:
        first, last = lines.group(1), lines.group(2)
        words.append(f"lines {first}-{last}" if last and last != first else f"line {first}")
    elif fragment:
        words.append(f"#{fragment}")
    return ", ".join(words)


def printable(text: str) -> str:
    """`text` with control characters escaped: a name or URI must not break the line it is quoted on."""
    if not any(unicodedata.category(ch) == "Cc" for ch in text):
        return text
    return "".join(
        ch if unicodedata.category(ch) != "Cc" else ch.encode("unicode_escape").decode("ascii") for ch in text
    )
