"""How the tolerance chain cuts text into lines and folds away typographic differences.

Shared by the line stages (tolerant_line_stages.py), the snippet they match
(tolerant_fit.py) and the rewritten copies of old_string (tolerant_variants.py),
so that all of them see the same lines; `fold_line` is also what a patch's
context is compared with (text_edits.py).
"""

from __future__ import annotations

import re

_FOLD = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u02bc", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
                        "\u202f\u205f\u3000", " "),
        "\u2026": "...",
        "\u200b": None,
        "\ufeff": None,
    }
)  # fmt: skip
_DASHES = re.compile(r"-+")
_SPACES = re.compile(r" +")


def split_lines(text: str) -> tuple[list[str], bool]:
    """Lines of `text` and whether it ends with a newline (which starts no line of its own)."""
    if text == "":
        return [], False
    lines = text.split("\n")
    ended = lines[-1] == ""
    if ended:
        lines.pop()
    return lines, ended


def fold_line(line: str) -> str:
    """A line with typographic punctuation and Unicode spaces made plain, runs of dashes and spaces one."""
    folded = line.translate(_FOLD).strip()
    return _SPACES.sub(" ", _DASHES.sub("-", folded))
