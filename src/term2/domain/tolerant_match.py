"""Where the text an edit replaces is, forgiving the model's near-misses but never guessing.

A model copies the text it wants to replace slightly wrong: trailing spaces
dropped, the block shifted left or right, spaces for the file's tabs, straight
quotes for curly ones, read_file's line-number prefixes, a blank line more
or less, `\\n` typed as two characters. Refusing each of those costs a round
trip; applying a guess costs far more. So the match is a chain of stages,
each looser than the one before it and tried only when every earlier one
found nothing. The first stage that finds anything decides: exactly one
place is applied (and the caller is told what was forgiven), two or more
are refused with each place named. The line stages are cumulative (each
forgives what the earlier ones did as well), so a looser stage never finds
fewer places than a stricter one: a place found alone was the only one any
earlier stage could see.

The chain (on the file with CRLF as LF, line_endings.py):
1. exact, as a substring (overlapping occurrences counted);
2. trailing whitespace ignored;
3. indentation shifted by one prefix (new_string re-indented by it);
4. tabs against spaces (indentation compared in columns, a tab as 4, 8 or 2);
5. typographic punctuation (curly quotes, dashes, ellipses, no-break and other Unicode spaces) folded;
6. when every line of old_string starts with read_file's `{n:>6}\\t` prefix, numbered n, n+1…: the
   prefixes stripped from both strings and stages 1-5 and 7 tried on that;
7. a blank line more or less;
8. when old_string has no newline but literal `\\n` (or `\\t`): both strings unescaped and stages 1-7
   tried on that.

Stages 2-7 match whole lines. Their result keeps the file's own text for
every line the model did not change (its indentation, trailing spaces and
punctuation) and writes the model's new lines, re-indented to fit, in place
of the changed ones: new_string's own characters are kept, never "curled".
The work is bounded in steps (bounded_match.py); a search that runs out of
steps refuses rather than answers.

Each part has its own module: the answers (tolerant_outcome.py), the exact
stage and the text searched (tolerant_exact.py), the line stages
(tolerant_line_stages.py), the place found and the text written there
(tolerant_fit.py), indentation (tolerant_indent.py), line splitting and
folding (tolerant_lines.py), and the rewritten copies of old_string
(tolerant_variants.py). This module is the chain that orders them, and the
one callers import from.
"""

from __future__ import annotations

from term2.domain.bounded_match import Budget, OverBudget
from term2.domain.line_endings import lf_only
from term2.domain.tolerant_exact import Search
from term2.domain.tolerant_fit import Snippet
from term2.domain.tolerant_lines import fold_line
from term2.domain.tolerant_outcome import Ambiguous, Found, Located, Missing
from term2.domain.tolerant_variants import unescaped, without_prefixes

__all__ = ["TOLERANCE_STEPS", "Ambiguous", "Found", "Located", "Missing", "fold_line", "locate"]

TOLERANCE_STEPS = 4_000_000  # steps for one tool call's tolerant matching


def locate(
    text: str,
    old: str,
    new: str,
    *,
    budget: Budget,
    replace_all: bool = False,
    from_line: int = 0,
    at_end: bool = False,
    whole_lines: bool = False,
) -> Located:
    """Find `old` in `text` (LF newlines) and say what replacing it by `new` puts where.

    `from_line` (0-based) and `at_end` (the place must end the text) narrow
    the search, as a patch's hunk order and `*** End of File` do;
    `whole_lines` accepts only places that start a line (a patch's hunks).
    """
    old, new = lf_only(old), lf_only(new)
    search = Search(text, budget, from_line, at_end, whole_lines)
    try:
        return _chain(search, old, new, replace_all)
    except OverBudget:
        return Missing("the file is too large to search for near matches; copy the text exactly")


def _chain(search: Search, old: str, new: str, replace_all: bool) -> Located:
    found = search.exact(old, new, replace_all)
    if found is not None:
        return found
    lines = search.lines
    if lines is None:
        return Missing()
    snippet = Snippet(old, new)
    for level in (1, 2, 3, 4):
        found = lines.find(snippet, level)
        if found is not None:
            return found
    numbered = without_prefixes(old, new)
    if numbered is not None:
        found = _variant(search, numbered, "read_file's line-number prefixes removed")
        if found is not None:
            return found
    found = lines.find(snippet, 5)
    if found is not None:
        return found
    escaped = unescaped(old, new)
    if escaped is not None:
        found = _variant(search, escaped, "literal \\n and \\t read as newlines and tabs")
        if found is not None:
            return found
    return Missing()


def _variant(search: Search, strings: tuple[str, str], how: str) -> Located | None:
    old, new = strings
    if not old.strip():
        return None
    found: Located | None = search.exact(old, new, False)
    if found is None and search.lines is not None:
        snippet = Snippet(old, new)
        for level in (1, 2, 3, 4, 5):
            found = search.lines.find(snippet, level)
            if found is not None:
                break
    if isinstance(found, Found):
        return Found(found.pieces, found.first_line, found.count, _joined(how, found.tolerance), found.every)
    if isinstance(found, Ambiguous):
        return Ambiguous(found.places, found.count, found.more, _joined(how, found.tolerance))
    return found


def _joined(first: str, rest: str | None) -> str:
    return first if rest is None else f"{first}; {rest}"
