"""old_string and new_string as the model meant them when it copied read_file's output or typed escapes.

Two slips change the strings themselves rather than how their lines compare:
read_file's `{n:>6}\\t` prefixes copied along with the text, and `\\n` typed
as two characters. Each rewrite is offered only when the slip is certain
(every line numbered in order; no real newline at all), and the chain
(tolerant_match.py) then searches the rewritten pair with its other stages.
"""

from __future__ import annotations

import re

from term2.domain.tolerant_lines import split_lines

_PREFIX = re.compile(r"^ *(\d+)\t")  # read_file's `{n:>6}\t`
_ESCAPE = re.compile(r"\\([nt])")


def without_prefixes(old: str, new: str) -> tuple[str, str] | None:
    """Both strings without read_file's prefixes, when every line of `old` has one, numbered in order."""
    lines = split_lines(old)[0]
    numbers = [_PREFIX.match(line) for line in lines]
    if not lines or any(m is None for m in numbers):
        return None
    first = int(numbers[0].group(1)) if numbers[0] else 0
    if [int(m.group(1)) for m in numbers if m] != list(range(first, first + len(lines))):
        return None

    def strip(text: str) -> str:
        return "\n".join(_PREFIX.sub("", line, count=1) for line in text.split("\n"))

    return strip(old), strip(new)


def unescaped(old: str, new: str) -> tuple[str, str] | None:
    if "\n" in old or not _ESCAPE.search(old):
        return None

    def unescape(text: str) -> str:
        return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else "\t", text)

    return unescape(old), unescape(new)
