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
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from itertools import pairwise

from term2.domain.bounded_match import BoundedMatcher, Budget, OverBudget
from term2.domain.line_endings import Piece, lf_only

MAX_PLACES = 20  # places of an ambiguous match named, at most
MAX_TOLERANT_LINES = 250_000  # a file of more lines is matched exactly only
TAB_WIDTHS = (4, 8, 2)
TOLERANCE_STEPS = 4_000_000  # steps for one tool call's tolerant matching

_PREFIX = re.compile(r"^ *(\d+)\t")  # read_file's `{n:>6}\t`
_ESCAPE = re.compile(r"\\([nt])")
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


@dataclass(frozen=True, slots=True)
class Found:
    """One place (or, for replace_all, every exact occurrence): what to put where."""

    pieces: tuple[Piece, ...]
    first_line: int  # 1-based, in the text searched
    count: int = 1
    tolerance: str | None = None  # what was forgiven; None: an exact match
    every: tuple[str, str] | None = None  # replace_all: (old, new), LF newlines


@dataclass(frozen=True, slots=True)
class Ambiguous:
    places: tuple[tuple[int, int], ...]  # first and last line (1-based) of each place named
    count: int  # places found; a lower bound when `more`
    more: bool
    tolerance: str | None = None


@dataclass(frozen=True, slots=True)
class Missing:
    why: str | None = None  # set when the search stopped before it could tell


Located = Found | Ambiguous | Missing


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
    search = _Search(text, budget, from_line, at_end, whole_lines)
    try:
        return _chain(search, old, new, replace_all)
    except OverBudget:
        return Missing("the file is too large to search for near matches; copy the text exactly")


def _chain(search: _Search, old: str, new: str, replace_all: bool) -> Located:
    found = search.exact(old, new, replace_all)
    if found is not None:
        return found
    lines = search.lines
    if lines is None:
        return Missing()
    snippet = _Snippet(old, new)
    for level in (1, 2, 3, 4):
        found = lines.find(snippet, level)
        if found is not None:
            return found
    numbered = _without_prefixes(old, new)
    if numbered is not None:
        found = _variant(search, numbered, "read_file's line-number prefixes removed")
        if found is not None:
            return found
    found = lines.find(snippet, 5)
    if found is not None:
        return found
    escaped = _unescaped(old, new)
    if escaped is not None:
        found = _variant(search, escaped, "literal \\n and \\t read as newlines and tabs")
        if found is not None:
            return found
    return Missing()


def _variant(search: _Search, strings: tuple[str, str], how: str) -> Located | None:
    old, new = strings
    if not old.strip():
        return None
    found: Located | None = search.exact(old, new, False)
    if found is None and search.lines is not None:
        snippet = _Snippet(old, new)
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


def _without_prefixes(old: str, new: str) -> tuple[str, str] | None:
    """Both strings without read_file's prefixes, when every line of `old` has one, numbered in order."""
    lines = _split(old)[0]
    numbers = [_PREFIX.match(line) for line in lines]
    if not lines or any(m is None for m in numbers):
        return None
    first = int(numbers[0].group(1)) if numbers[0] else 0
    if [int(m.group(1)) for m in numbers if m] != list(range(first, first + len(lines))):
        return None

    def strip(text: str) -> str:
        return "\n".join(_PREFIX.sub("", line, count=1) for line in text.split("\n"))

    return strip(old), strip(new)


def _unescaped(old: str, new: str) -> tuple[str, str] | None:
    if "\n" in old or not _ESCAPE.search(old):
        return None

    def unescape(text: str) -> str:
        return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else "\t", text)

    return unescape(old), unescape(new)


# --- the exact stage -------------------------------------------------------------------


class _Search:
    """The text searched, its limits, and (for the line stages, when it is small enough) its lines."""

    def __init__(self, text: str, budget: Budget, from_line: int, at_end: bool, whole_lines: bool) -> None:
        self.text = text
        self.budget = budget
        self.from_line = from_line
        self.at_end = at_end
        self.whole_lines = whole_lines

    @cached_property
    def lines(self) -> _FileLines | None:
        if self.text.count("\n") >= MAX_TOLERANT_LINES:
            return None
        return _FileLines(self)

    def _offset_of_line(self, line: int) -> int:
        at = 0
        for _ in range(line):
            at = self.text.find("\n", at) + 1
            if at == 0:
                return len(self.text)
        return at

    def exact(self, old: str, new: str, replace_all: bool) -> Located | None:
        text = self.text
        start = self._offset_of_line(self.from_line) if self.from_line else 0
        if replace_all and not (self.from_line or self.at_end or self.whole_lines):
            count = text.count(old)
            if count == 0:
                return None
            if count == 1:
                return self._one(old, new, text.find(old))
            return Found((), text.count("\n", 0, text.find(old)) + 1, count, None, (old, new))
        places: list[tuple[int, int, int]] = []  # (offset, first line, last line), 0-based lines
        count = 0
        line, seen = self.from_line, start
        span = old[:-1].count("\n")
        at = text.find(old, start)
        while at != -1:
            line += text.count("\n", seen, at)
            seen = at
            if self._accepts(at, old, line + span):
                count += 1
                places.append((at, line, line + span))
                if count > MAX_PLACES:
                    break
            at = text.find(old, at + 1)
        if count == 0:
            return None
        if count == 1:
            return self._one(old, new, places[0][0])
        shown = tuple((first + 1, last + 1) for _, first, last in places[:MAX_PLACES])
        return Ambiguous(shown, count, count > MAX_PLACES)

    def _accepts(self, at: int, old: str, last: int) -> bool:
        text = self.text
        if self.whole_lines and at > 0 and text[at - 1] != "\n":
            return False
        if self.at_end:
            end = at + len(old)
            rest = text[end:]
            return rest in ("", "\n") and not (old.endswith("\n") and rest)
        return True

    def _one(self, old: str, new: str, at: int) -> Found:
        return Found((Piece(at, at + len(old), new),), self.text.count("\n", 0, at) + 1)


# --- the line stages -------------------------------------------------------------------


def _split(text: str) -> tuple[list[str], bool]:
    """Lines of `text` and whether it ends with a newline (which starts no line of its own)."""
    if text == "":
        return [], False
    lines = text.split("\n")
    ended = lines[-1] == ""
    if ended:
        lines.pop()
    return lines, ended


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _columns(indent: str, width: int) -> int:
    column = 0
    for char in indent:
        column = (column // width + 1) * width if char == "\t" else column + 1
    return column


def fold_line(line: str) -> str:
    """A line with typographic punctuation and Unicode spaces made plain, runs of dashes and spaces one."""
    folded = line.translate(_FOLD).strip()
    return _SPACES.sub(" ", _DASHES.sub("-", folded))


@dataclass(frozen=True, slots=True)
class _Indent:
    """How the file's indentation differs from old_string's, and so how new lines are re-indented."""

    add: str = ""
    remove: str = ""
    width: int = 0  # > 0: compared in columns, a tab as this many
    shift: int = 0  # columns added (negative: removed)
    tabs: bool = False  # the place indents with tabs (columns mode)
    mixed_style: bool = False  # old_string indents with the other character
    scale: Fraction = Fraction(1)  # columns mode: the file's columns per column of old_string's

    def apply(self, line: str) -> str:
        if not line.strip():
            return line
        indent = _indent(line)
        body = line[len(indent) :]
        if self.width:
            column = max(0, round(_columns(indent, self.width) * self.scale) + self.shift)
            lead = "\t" * (column // self.width) + " " * (column % self.width) if self.tabs else " " * column
            return lead + body
        if self.add:
            return self.add + line
        if self.remove:
            if indent.startswith(self.remove):
                return line[len(self.remove) :]
            return line.lstrip(" \t")
        return line

    def described(self) -> list[str]:
        said: list[str] = []
        if self.add or self.remove:
            said.append(f"re-indenting by {_amount(self.add or self.remove, -1 if self.remove else 1)}")
        if self.scale != 1:
            said.append(f"re-flowing indentation ({self.scale} columns in the file for each of old_string's)")
        if self.width and self.shift:
            said.append(f"re-indenting by {self.shift:+d} columns")
        if self.width and self.mixed_style:
            style = "tabs" if self.tabs else "spaces"
            said.append(f"indenting with {style} as the file does (a tab as {self.width} columns)")
        return said


def _amount(prefix: str, sign: int) -> str:
    tabs, spaces = prefix.count("\t"), prefix.count(" ")
    parts = [f"{n} {word}{'s' if n != 1 else ''}" for n, word in ((spaces, "space"), (tabs, "tab")) if n]
    return ("+" if sign > 0 else "-") + " and ".join(parts)


class _Snippet:
    """old_string and new_string as lines; `solid` indexes old's non-blank ones."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.old_nl = _split(old)
        self.new, self.new_nl = _split(new)
        self.solid = [k for k, line in enumerate(self.old) if line.strip()]

    @cached_property
    def stripped(self) -> list[str]:
        return [line.strip() for line in self.old]

    @cached_property
    def folded(self) -> list[str]:
        return [fold_line(line) for line in self.old]


@dataclass(frozen=True, slots=True)
class _Fit:
    """One place a line stage found: the file lines old_string's lines stand for, and what differed."""

    first: int
    last: int
    mapping: tuple[int | None, ...]  # old line -> file line (None: a blank line the file lacks)
    indent: _Indent
    trailing: bool = False
    punctuation: bool = False
    blank: bool = False

    def tolerance(self) -> str | None:
        said: list[str] = []
        if self.trailing:
            said.append("ignoring trailing whitespace")
        said += self.indent.described()
        if self.punctuation:
            said.append("matching typographic punctuation and Unicode spaces loosely")
        if self.blank:
            said.append("allowing a blank line more or less")
        return ", ".join(said) or None


class _FileLines:
    def __init__(self, search: _Search) -> None:
        self.search = search
        self.lines, self.ended = _split(search.text)
        search.budget.spend(len(self.lines) + 1)
        self.starts: list[int] = []
        at = 0
        for line in self.lines:
            self.starts.append(at)
            at += len(line) + 1
        self.terminated = len(self.lines) if self.ended else len(self.lines) - 1

    @cached_property
    def rstripped(self) -> list[str]:
        self.search.budget.spend(len(self.lines))
        return [line.rstrip() for line in self.lines]

    @cached_property
    def stripped(self) -> list[str]:
        self.search.budget.spend(len(self.lines))
        return [line.strip() for line in self.lines]

    @cached_property
    def folded(self) -> list[str]:
        self.search.budget.spend(len(self.lines))
        return [fold_line(line) for line in self.lines]

    @cached_property
    def solid(self) -> list[int]:
        return [i for i, key in enumerate(self.stripped) if key]

    def find(self, snippet: _Snippet, level: int) -> Located | None:
        if not snippet.solid or len(snippet.solid) > len(self.lines):
            return None
        fits: list[_Fit] = []
        count = 0
        for fit in self._fits(snippet, level):
            count += 1
            if len(fits) <= MAX_PLACES:
                fits.append(fit)
            if count > MAX_PLACES:
                break
        if count == 0:
            return None
        if count == 1:
            return self._applied(snippet, fits[0])
        shown = tuple((fit.first + 1, fit.last + 1) for fit in fits[:MAX_PLACES])
        return Ambiguous(shown, count, count > MAX_PLACES, _ambiguous_tolerance(fits))

    def _fits(self, snippet: _Snippet, level: int) -> Iterator[_Fit]:
        anchor = snippet.solid[0]
        if level == 5:
            yield from self._loose_fits(snippet)
            return
        if level == 1:
            keys, key = self.rstripped, snippet.old[anchor].rstrip()
        elif level == 4:
            keys, key = self.folded, snippet.folded[anchor]
        else:
            keys, key = self.stripped, snippet.stripped[anchor]
        m = len(snippet.old)
        for position, line_key in enumerate(keys):
            if line_key != key:
                continue
            first = position - anchor
            if first < self.search.from_line or first + m > len(self.lines):
                continue
            fit = self._fit(snippet, level, first)
            if fit is not None and self._accepts(fit):
                yield fit

    def _accepts(self, fit: _Fit) -> bool:
        return not self.search.at_end or fit.last == len(self.lines) - 1

    def _fit(self, snippet: _Snippet, level: int, first: int) -> _Fit | None:
        m = len(snippet.old)
        self.search.budget.spend(m)
        window = range(first, first + m)
        if level == 1:
            if any(self.rstripped[f] != snippet.old[k].rstrip() for k, f in enumerate(window)):
                return None
            trailing = any(self.lines[f] != snippet.old[k] for k, f in enumerate(window))
            return _Fit(first, first + m - 1, tuple(window), _Indent(), trailing=trailing)
        keys = self.folded if level == 4 else self.stripped
        mine = snippet.folded if level == 4 else snippet.stripped
        if any(keys[f] != mine[k] for k, f in enumerate(window)):
            return None
        pairs = [(snippet.old[k], self.lines[f]) for k, f in enumerate(window) if mine[k]]
        indent = _indent_fit(pairs, columns=level >= 3)
        if indent is None:
            return None
        return _Fit(
            first,
            first + m - 1,
            tuple(window),
            indent,
            trailing=_trailing_differs(pairs),
            punctuation=level == 4 and _punctuation_differs(pairs),
        )

    def _loose_fits(self, snippet: _Snippet) -> Iterator[_Fit]:
        """Level 5: old's non-blank lines against consecutive non-blank file lines, one blank line apart."""
        solid = self.solid
        want = [snippet.folded[k] for k in snippet.solid]
        folded = self.folded
        for index, line in enumerate(solid):
            if folded[line] != want[0] or index + len(want) > len(solid):
                continue
            self.search.budget.spend(len(want))
            chosen = solid[index : index + len(want)]
            if any(folded[f] != w for f, w in zip(chosen, want, strict=True)):
                continue
            fit = self._blank_fit(snippet, chosen)
            if fit is not None and fit.first >= self.search.from_line and self._accepts(fit):
                yield fit

    def _blank_fit(self, snippet: _Snippet, chosen: list[int]) -> _Fit | None:
        mapping: list[int | None] = [None] * len(snippet.old)
        differ = 0
        for k, f in zip(snippet.solid, chosen, strict=True):
            mapping[k] = f
        placed = list(zip(snippet.solid, chosen, strict=True))
        for (k1, f1), (k2, f2) in pairwise(placed):
            old_gap, file_gap = k2 - k1 - 1, f2 - f1 - 1
            differ += abs(old_gap - file_gap)
            for step in range(min(old_gap, file_gap)):
                mapping[k1 + 1 + step] = f1 + 1 + step
        first, last = chosen[0], chosen[-1]
        lead = snippet.solid[0]
        above = 0
        while above < lead and first - above - 1 >= 0 and not self.stripped[first - above - 1]:
            above += 1
        for step in range(above):
            mapping[lead - 1 - step] = first - 1 - step
        differ += lead - above
        first -= above
        tail = len(snippet.old) - 1 - snippet.solid[-1]
        below = 0
        while below < tail and last + below + 1 < len(self.lines) and not self.stripped[last + below + 1]:
            below += 1
        for step in range(below):
            mapping[snippet.solid[-1] + 1 + step] = last + 1 + step
        differ += tail - below
        last += below
        if differ != 1:
            return None
        pairs = [(snippet.old[k], self.lines[f]) for k, f in zip(snippet.solid, chosen, strict=True)]
        indent = _indent_fit(pairs, columns=True)
        if indent is None:
            return None
        return _Fit(
            first,
            last,
            tuple(mapping),
            indent,
            trailing=_trailing_differs(pairs),
            punctuation=_punctuation_differs(pairs),
            blank=True,
        )

    def _applied(self, snippet: _Snippet, fit: _Fit) -> Found:
        start = self.starts[fit.first]
        end = self.starts[fit.last] + len(self.lines[fit.last])
        if snippet.old_nl and fit.last < self.terminated:
            end += 1
        text = _transplant(snippet, fit, self.lines, self.search.budget)
        return Found((Piece(start, end, text),), fit.first + 1, 1, fit.tolerance())


def _ambiguous_tolerance(fits: list[_Fit]) -> str | None:
    return fits[0].tolerance() if fits else None


def _trailing_differs(pairs: list[tuple[str, str]]) -> bool:
    return any(o[len(o.rstrip()) :] != f[len(f.rstrip()) :] for o, f in pairs)


def _punctuation_differs(pairs: list[tuple[str, str]]) -> bool:
    return any(o.strip() != f.strip() for o, f in pairs)


def _indent_fit(pairs: list[tuple[str, str]], *, columns: bool) -> _Indent | None:
    """One consistent re-indentation taking old's lines to the file's, or None."""
    indents = [(_indent(o), _indent(f)) for o, f in pairs]
    if not indents:
        return _Indent()
    if not columns:
        o0, f0 = indents[0]
        if f0.endswith(o0):
            prefix = f0[: len(f0) - len(o0)]
            if all(f == prefix + o for o, f in indents):
                return _Indent(add=prefix)
        if o0.endswith(f0):
            prefix = o0[: len(o0) - len(f0)]
            if all(o == prefix + f for o, f in indents):
                return _Indent(remove=prefix)
        return None
    tabs = any("\t" in f for _, f in indents)
    mixed = tabs != any("\t" in o for o, _ in indents)
    for width in TAB_WIDTHS:
        columns_ = [(_columns(o, width), _columns(f, width)) for o, f in indents]
        shifts = {f - o for o, f in columns_}
        if len(shifts) == 1:
            return _Indent(width=width, shift=shifts.pop(), tabs=tabs, mixed_style=mixed)
        scale = _scale(columns_)
        if scale is not None:
            return _Indent(width=width, shift=scale[1], tabs=tabs, mixed_style=mixed, scale=scale[0])
    return None


def _scale(columns: list[tuple[int, int]]) -> tuple[Fraction, int] | None:
    """old's indentation re-flowed (2 columns a level where the file has 4, say): file = scale * old + shift,
    the same for every line, and at least two levels deep so that the scale is seen, not guessed."""
    levels = sorted(set(columns))
    olds = sorted({o for o, _ in levels})
    if len(olds) < 2 or len(levels) != len(olds):
        return None
    (o1, f1), (o2, f2) = levels[0], levels[-1]
    scale = Fraction(f2 - f1, o2 - o1)
    if scale <= 0 or scale == 1:
        return None
    shift = f1 - scale * o1
    if shift.denominator != 1 or any(scale * o + shift != f for o, f in levels):
        return None
    return scale, int(shift)


def _transplant(snippet: _Snippet, fit: _Fit, lines: list[str], budget: Budget) -> str:
    """The place's new text: the file's own lines where the model kept its old ones, its new lines elsewhere."""
    old, new = snippet.old, snippet.new
    try:
        codes = BoundedMatcher(old, new, budget).get_opcodes()
    except OverBudget:
        codes = [("replace", 0, len(old), 0, len(new))]
    mapping = fit.mapping
    out: list[str] = []
    cursor = fit.first

    def keep_until(line: int) -> None:  # the file's own lines (extra blank ones) before `line`
        nonlocal cursor
        out.extend(lines[cursor:line])
        cursor = max(cursor, line)

    for tag, a1, a2, b1, b2 in codes:
        if tag == "equal":
            for k in range(a1, a2):
                line = mapping[k]
                if line is not None:
                    keep_until(line)
                    out.append(lines[line])
                    cursor = line + 1
            continue
        gone = [line for line in mapping[a1:a2] if line is not None]
        if gone:
            keep_until(gone[0])
            cursor = gone[-1] + 1  # extra blank lines among removed ones go with them
        out.extend(fit.indent.apply(line) for line in new[b1:b2])
    keep_until(fit.last + 1)
    text = "\n".join(out)
    if snippet.new_nl:
        text += "\n"
    return text
