"""The names the model calls MCP tools by.

Providers accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$`` (OpenAI and
Anthropic alike), and two servers may offer tools of the same name, so the
name is ``mcp__<server>__<tool>`` with every other character replaced by
``_``. A name that would be too long, or that is already taken (two tools
sanitised alike, a server listed twice), is cut and given a suffix hashed from
the server and tool: deterministic, so the same servers give the same names in
every request (the provider's prompt cache keys on them) and every process.
Names are handed out in the order of the client's server list, not in the
order servers finish starting, for the same reason.

What the user sees is another matter: a server chooses its tools' names, and
the texts of its errors and results, and any of them may hold a line break,
ESC or U+202E. `escaped` is the one way every such text reaches an editor or
`term2 exec`'s terminal (titles, approval questions, call content, notices).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from term2.app.tools.names import said, shown
from term2.domain.visible_text import visible

MAX_NAME = 64
PREFIX = "mcp__"
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def escaped(text: str, *, lines: bool = False) -> str:
    """What an MCP server chose, as a person is shown it: nothing in it acts on the display.

    A name (``lines=False``) stays on one line, escaped as term2's tools show names (`\\x0a`,
    `\\x1b`, `\\xe2\\x80\\xae`), so it cannot end a title early or reorder it. A text (an error, a
    result) keeps its line breaks and tabs, and only what a display obeys rather than shows is escaped.
    """
    return visible(said(text)) if lines else shown(text)


def sanitise(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def _hashed(base: str, server: str, tool: str, attempt: int) -> str:
    digest = hashlib.sha256(f"{server}\x00{tool}\x00{attempt}".encode()).hexdigest()[:10]
    return f"{base[: MAX_NAME - len(digest) - 1]}_{digest}"


def tool_names(pairs: Iterable[tuple[str, str]], taken: Iterable[str] = ()) -> list[str]:
    """One name per (server, tool) pair, in order: valid, unique, and unlike any name in ``taken``."""
    used = set(taken)
    names: list[str] = []
    for server, tool in pairs:
        base = f"{PREFIX}{sanitise(server)}__{sanitise(tool)}"
        name, attempt = base, 0
        while len(name) > MAX_NAME or name in used:
            name = _hashed(base, server, tool, attempt)
            attempt += 1
        used.add(name)
        names.append(name)
    return names
