"""A glob over one file name, as a regular expression: what a walk's `name_glob` means.

The workspace search port filters files by name with this syntax (`*` and
`?` for any characters, `[...]` classes with `!` or `^` to negate, `{a,b}`
alternatives, `\\` to take the next character as it is), the syntax of
ripgrep's file types and of git's own wildmatch within one name. Adapters
whose engine cannot take a glob as it is check names with this one.
"""

from __future__ import annotations

import functools
import re


@functools.lru_cache(maxsize=64)
def name_glob_regex(glob: str) -> re.Pattern[str]:
    """The expression `fullmatch`ing exactly the names `glob` names (a surrogateescape str for other bytes)."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(glob):
        char = glob[i]
        if char == "\\" and i + 1 < len(glob):
            i += 1
            out.append(re.escape(glob[i]))
        elif char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and "]" in glob[i + 2 :]:
            end = glob.index("]", i + 2)
            body = glob[i + 1 : end]
            negated = body[:1] in ("!", "^")
            body = body[1:] if negated else body
            out.append("[" + ("^" if negated else "") + body.replace("\\", "\\\\").replace("[", "\\[") + "]")
            i = end
        elif char == "{":
            depth += 1
            out.append("(?:")
        elif char == "}" and depth:
            depth -= 1
            out.append(")")
        elif char == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(char))
        i += 1
    out.extend(")" * depth)  # an unclosed `{` closes at the end rather than failing
    return re.compile("".join(out), re.DOTALL)
