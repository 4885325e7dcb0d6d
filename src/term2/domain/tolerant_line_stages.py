"""The tolerance chain's line stages: old_string's lines against the file's, each stage forgiving more.

Level 1 ignores trailing whitespace; 2 also an indentation shifted by one
prefix; 3 also tabs against spaces (compared in columns); 4 also typographic
punctuation; 5 also a blank line more or less. Each level is cumulative, so a
looser one never finds fewer places than a stricter one; which levels run, and
in what order, is the chain's business (tolerant_match.py). Every step
counts against the call's budget (bounded_match.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from itertools import pairwise
from typing import TYPE_CHECKING

from term2.domain.line_endings import Piece
from term2.domain.tolerant_fit import Fit, Snippet, transplant
from term2.domain.tolerant_indent import Indent, indent_fit
from term2.domain.tolerant_lines import fold_line, split_lines
from term2.domain.tolerant_outcome import MAX_PLACES, Ambiguous, Found, Located

if TYPE_CHECKING:
    from term2.domain.tolerant_exact import Search


class FileLines:
    """The searched text as lines, with the keys each level compares computed once and paid for once."""

    def __init__(self, search: Search) -> None:
        self.search = search
        self.lines, self.ended = split_lines(search.text)
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

    def find(self, snippet: Snippet, level: int) -> Located | None:
        if not snippet.solid or len(snippet.solid) > len(self.lines):
            return None
        fits: list[Fit] = []
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

    def _fits(self, snippet: Snippet, level: int) -> Iterator[Fit]:
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

    def _accepts(self, fit: Fit) -> bool:
        return not self.search.at_end or fit.last == len(self.lines) - 1

    def _fit(self, snippet: Snippet, level: int, first: int) -> Fit | None:
        m = len(snippet.old)
        self.search.budget.spend(m)
        window = range(first, first + m)
        if level == 1:
            if any(self.rstripped[f] != snippet.old[k].rstrip() for k, f in enumerate(window)):
                return None
            trailing = any(self.lines[f] != snippet.old[k] for k, f in enumerate(window))
            return Fit(first, first + m - 1, tuple(window), Indent(), trailing=trailing)
        keys = self.folded if level == 4 else self.stripped
        mine = snippet.folded if level == 4 else snippet.stripped
        if any(keys[f] != mine[k] for k, f in enumerate(window)):
            return None
        pairs = [(snippet.old[k], self.lines[f]) for k, f in enumerate(window) if mine[k]]
        indent = indent_fit(pairs, columns=level >= 3)
        if indent is None:
            return None
        return Fit(
            first,
            first + m - 1,
            tuple(window),
            indent,
            trailing=_trailing_differs(pairs),
            punctuation=level == 4 and _punctuation_differs(pairs),
        )

    def _loose_fits(self, snippet: Snippet) -> Iterator[Fit]:
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

    def _blank_fit(self, snippet: Snippet, chosen: list[int]) -> Fit | None:
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
        indent = indent_fit(pairs, columns=True)
        if indent is None:
            return None
        return Fit(
            first,
            last,
            tuple(mapping),
            indent,
            trailing=_trailing_differs(pairs),
            punctuation=_punctuation_differs(pairs),
            blank=True,
        )

    def _applied(self, snippet: Snippet, fit: Fit) -> Found:
        start = self.starts[fit.first]
        end = self.starts[fit.last] + len(self.lines[fit.last])
        if snippet.old_nl and fit.last < self.terminated:
            end += 1
        text = transplant(snippet, fit, self.lines, self.search.budget)
        return Found((Piece(start, end, text),), fit.first + 1, 1, fit.tolerance())


def _ambiguous_tolerance(fits: list[Fit]) -> str | None:
    return fits[0].tolerance() if fits else None


def _trailing_differs(pairs: list[tuple[str, str]]) -> bool:
    return any(o[len(o.rstrip()) :] != f[len(f.rstrip()) :] for o, f in pairs)


def _punctuation_differs(pairs: list[tuple[str, str]]) -> bool:
    return any(o.strip() != f.strip() for o, f in pairs)
