"""Render a whole-file change as a git-style patch, in work bounded by the change.

ACP v2 clients render diffs from patch text, and a patch is proportional to
the change rather than to the file. Paths stay absolute (`a/<abs>` and
`b/<abs>` with the leading slash folded into the prefix) because every path
in the protocol is absolute and there is no repository root to be relative to.

The texts come from the model (a write, a replace_all) and from files it
points at, so the work is bounded: the common head and tail are skipped with
string comparisons (C speed, no line lists), only the changed middle is split
into lines, and the line matcher runs under a step budget (bounded_match.py).
Past the budget the middle becomes one hunk (still a correct patch); past
`max_chars` of changed text there is no patch, only the line counts.
Lines end at "\n" only, as git's do.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Literal

from term2.domain.bounded_match import BoundedMatcher, Budget, OverBudget

CONTEXT_LINES = 3
NO_NEWLINE = "\\ No newline at end of file\n"
MATCH_STEPS = 1_000_000  # line-matcher steps for one diff; past them the changed middle is one hunk
PATCH_INPUT_CHARS = 1024 * 1024  # changed text split into lines for a patch; past it, counts only

DIFF_CONTENT_BYTES = 256 * 1024  # old + new text (UTF-8) one diff in a client update may carry

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


@dataclass(frozen=True, slots=True)
class Change:
    """What a change did: lines added and removed, and its patch (None: too large to render)."""

    added: int
    removed: int
    patch: str | None


def describe_change(
    path: str,
    old: str | None,
    new: str | None,
    *,
    context: int = CONTEXT_LINES,
    max_chars: int | None = PATCH_INPUT_CHARS,
    steps: int = MATCH_STEPS,
) -> Change:
    """The change from `old` to `new` (None: the file is absent), with its `diff --git` patch.

    The patch is "" when nothing changed.
    """
    if old == new:
        return Change(0, 0, "")
    before, after = old or "", new or ""
    span = _Span.of(before, after)
    old_mid, new_mid = before[span.start : span.old_end], after[span.start : span.new_end]
    if max_chars is not None and len(old_mid) + len(new_mid) > max_chars:
        return Change(_line_count(new_mid), _line_count(old_mid), None)
    old_lines, new_lines = split_lines(old_mid), split_lines(new_mid)
    codes = _opcodes(old_lines, new_lines, Budget(steps))
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag in ("replace", "insert"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag in ("replace", "delete"))
    return Change(added, removed, _patch(path, old, new, span, old_lines, new_lines, codes, context))


def git_patch(path: str, old: str | None, new: str | None, context: int = CONTEXT_LINES) -> str:
    """A `diff --git` patch turning `old` into `new`; None means the file is absent. "" when nothing changed."""
    patch = describe_change(path, old, new, context=context, max_chars=None).patch
    assert patch is not None  # no max_chars: always rendered
    return patch


def fits_an_update(old: str | None, new: str) -> bool:
    """Whether a diff of these texts is small enough to send a client whole (both texts travel in v1)."""
    if len(old or "") + len(new) > DIFF_CONTENT_BYTES:  # characters never outnumber bytes
        return False
    return len((old or "").encode("utf-8", "surrogatepass")) + len(new.encode("utf-8", "surrogatepass")) <= (
        DIFF_CONTENT_BYTES
    )


def too_large_note(path: str, change: Change | None = None) -> str:
    """What a client is shown instead of a diff too large for an update."""
    counts = f": +{change.added} -{change.removed} lines" if change is not None else ""
    return f"{path}{counts} (too large to show as a diff)\n"


def text_diff(name: str, patch: str) -> str:
    """A diff to show but not act on (a file whose name has no exact text form): a fenced block after the
    name as shown, the fence longer than any run of backticks in the patch."""
    longest = max((len(run) for run in re.findall("`+", patch)), default=0)
    fence = "`" * max(3, longest + 1)
    body = patch if patch.endswith("\n") or not patch else patch + "\n"
    return f"{name} (its name is not UTF-8, so it is shown escaped):\n{fence}diff\n{body}{fence}\n"


def change_summary(old: str | None, new: str | None) -> tuple[int, int]:
    """(added, removed) line counts, for one-line summaries."""
    change = describe_change("", old, new)
    return change.added, change.removed


def split_lines(text: str) -> list[str]:
    """`text`'s lines as git counts them: ended by "\n" only, ends kept."""
    lines = text.split("\n")
    tail = lines.pop()
    out = [line + "\n" for line in lines]
    if tail:
        out.append(tail)
    return out


def _line_count(text: str) -> int:
    return text.count("\n") + (0 if not text or text.endswith("\n") else 1)


@dataclass(frozen=True, slots=True)
class _Span:
    """The changed middle, on line boundaries: old[start:old_end] became new[start:new_end]."""

    start: int
    old_end: int
    new_end: int

    @staticmethod
    def of(old: str, new: str) -> _Span:
        head = _common_prefix(old, new)
        start = old.rfind("\n", 0, head) + 1  # the "\n" is in the common head: both have it
        tail = _common_prefix(old[start:][::-1], new[start:][::-1]) if old and new else 0
        old_end, new_end = len(old) - tail, len(new) - tail
        at_line_start = (old_end == 0 or old[old_end - 1] == "\n") and (new_end == 0 or new[new_end - 1] == "\n")
        if tail and not at_line_start:
            newline = old.find("\n", old_end)  # inside the common tail: both have it
            shift = (newline + 1 if newline != -1 else len(old)) - old_end
            old_end, new_end = old_end + shift, new_end + shift
        return _Span(start, old_end, new_end)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by halving: slice comparisons run at C speed."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _opcodes(old: list[str], new: list[str], budget: Budget) -> list[Opcode]:
    try:
        return BoundedMatcher(old, new, budget).get_opcodes()
    except OverBudget:
        return _whole(old, new)


def _whole(old: list[str], new: list[str]) -> list[Opcode]:
    """One opcode for the whole middle: what a patch says when matching would cost too much."""
    if old and new:
        return [("replace", 0, len(old), 0, len(new))]
    if old:
        return [("delete", 0, len(old), 0, 0)]
    return [("insert", 0, 0, 0, len(new))] if new else []


class _Fixed(difflib.SequenceMatcher[str]):
    """difflib's hunk grouping over opcodes computed elsewhere."""

    def __init__(self, codes: list[Opcode]) -> None:
        super().__init__(None, [], [])
        self._codes = codes

    def get_opcodes(self) -> list[Opcode]:
        return list(self._codes)


def _patch(
    path: str,
    old: str | None,
    new: str | None,
    span: _Span,
    old_mid: list[str],
    new_mid: list[str],
    codes: list[Opcode],
    context: int,
) -> str:
    name = _quote(path.lstrip("/"))
    a_name, b_name = _prefixed("a/", name), _prefixed("b/", name)
    header = [f"diff --git {a_name} {b_name}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    elif new is None:
        header.append("deleted file mode 100644\n")
    if not codes:  # created or deleted empty file
        return "".join(header)
    before = old or ""
    lead = _last_lines(before[: span.start], context)
    trail = _first_lines(before[span.old_end :], context)
    first = before.count("\n", 0, span.start) - len(lead)  # 0-based line of the first line shown
    old_lines, new_lines = lead + old_mid + trail, lead + new_mid + trail
    shifted: list[Opcode] = [("equal", 0, len(lead), 0, len(lead))] if lead else []
    shifted += [(tag, i1 + len(lead), i2 + len(lead), j1 + len(lead), j2 + len(lead)) for tag, i1, i2, j1, j2 in codes]
    if trail:
        i, j = len(lead) + len(old_mid), len(lead) + len(new_mid)
        shifted.append(("equal", i, i + len(trail), j, j + len(trail)))
    header.append(f"--- {'/dev/null' if old is None else a_name}\n")
    header.append(f"+++ {'/dev/null' if new is None else b_name}\n")
    return "".join(header + _hunks(old_lines, new_lines, shifted, context, first))


def _last_lines(text: str, count: int) -> list[str]:
    start = len(text)
    for _ in range(count):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return split_lines(text[start:])


def _first_lines(text: str, count: int) -> list[str]:
    end = 0
    for _ in range(count):
        newline = text.find("\n", end)
        if newline == -1:
            end = len(text)
            break
        end = newline + 1
    return split_lines(text[:end])


def _hunks(old: list[str], new: list[str], codes: list[Opcode], context: int, first: int) -> list[str]:
    out: list[str] = []
    for group in _Fixed(codes).get_grouped_opcodes(context):
        head, last = group[0], group[-1]
        out.append(f"@@ -{_range(first + head[1], first + last[2])} +{_range(first + head[3], first + last[4])} @@\n")
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
    if not any(c in name for c in '"\\') and all(ord(c) >= 0x20 and c != "\x7f" for c in name):
        return name
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    body = "".join(escapes.get(c, f"\\{ord(c):03o}" if ord(c) < 0x20 or c == "\x7f" else c) for c in name)
    return f'"{body}"'


def _prefixed(prefix: str, name: str) -> str:
    return f'"{prefix}{name[1:]}' if name.startswith('"') else prefix + name
