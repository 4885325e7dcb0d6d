"""Render a whole-file change as a git-style patch.

ACP v2 clients render diffs from patch text, and a patch is proportional to
the change rather than to the file. Paths stay absolute (`a/<abs>` and
`b/<abs>` with the leading slash folded into the prefix) because every path
in the protocol is absolute and there is no repository root to be relative to.
"""

from __future__ import annotations

import difflib

CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file\n"


def git_patch(
    path: str, old: str | None, new: str | None, context: int = CONTEXT_LINES
) -> str:
    """A `diff --git` patch turning `old` into `new`; None means the file is absent.

    Returns "" when nothing changed.
    """
    if old == new:
        return ""
    name = _quote(path.lstrip("/"))
    a_name, b_name = _prefixed("a/", name), _prefixed("b/", name)
    header = [f"diff --git {a_name} {b_name}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    elif new is None:
        header.append("deleted file mode 100644\n")
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    hunks = _hunks(old_lines, new_lines, context)
    if not hunks:  # created or deleted empty file
        return "".join(header)
    header.append(f"--- {'/dev/null' if old is None else a_name}\n")
    header.append(f"+++ {'/dev/null' if new is None else b_name}\n")
    return "".join(header + hunks)


def _hunks(old: list[str], new: list[str], context: int) -> list[str]:
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        first, last = group[0], group[-1]
        old_range = _range(first[1], last[2])
        new_range = _range(first[3], last[4])
        out.append(f"@@ -{old_range} +{new_range} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out.extend(_lines(" ", old[i1:i2]))
                continue
            if tag in ("replace", "delete"):
                out.extend(_lines("-", old[i1:i2]))
            if tag in ("replace", "insert"):
                out.extend(_lines("+", new[j1:j2]))
    return out


def _lines(prefix: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(prefix + line)
        else:
            out.append(prefix + line + "\n" + NO_NEWLINE)
    return out


def _range(start: int, stop: int) -> str:
    """Unified-diff range: 1-based start, length omitted when 1, start-1 when empty."""
    length = stop - start
    begin = start + 1
    if length == 1:
        return f"{begin}"
    if not length:
        begin -= 1
    return f"{begin},{length}"


def _quote(name: str) -> str:
    """Quote like git does for names with quotes, backslashes or control characters."""
    if not any(c in name for c in '"\\') and all(
        ord(c) >= 0x20 and c != "\x7f" for c in name
    ):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    body = "".join(
        escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or c == "\x7f" else c)
        for c in name
    )
    return f'"{body}"'


def _prefixed(prefix: str, name: str) -> str:
    return f'"{prefix}{name[1:]}' if name.startswith('"') else prefix + name


def change_summary(old: str | None, new: str | None) -> tuple[int, int]:
    """(added, removed) line counts, for one-line summaries."""
    added = removed = 0
    old_lines = (old or "").splitlines()
    new_lines = (new or "").splitlines()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
        None, old_lines, new_lines, autojunk=False
    ).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed
