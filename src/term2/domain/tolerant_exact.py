"""The text the tolerance chain searches, and its first, exact stage.

The exact stage is a substring search over the whole text (overlapping
occurrences counted), narrowed as a patch's hunks narrow it; the looser line
stages (tolerant_line_stages.py) start from the same limits, and only on a
text small enough to split into lines.
"""

from __future__ import annotations

from functools import cached_property

from term2.domain.bounded_match import Budget
from term2.domain.line_endings import Piece
from term2.domain.tolerant_line_stages import FileLines
from term2.domain.tolerant_outcome import MAX_PLACES, Ambiguous, Found, Located

MAX_TOLERANT_LINES = 250_000  # a file of more lines is matched exactly only


class Search:
    """The text searched, its limits, and (for the line stages, when it is small enough) its lines."""

    def __init__(self, text: str, budget: Budget, from_line: int, at_end: bool, whole_lines: bool) -> None:
        self.text = text
        self.budget = budget
        self.from_line = from_line
        self.at_end = at_end
        self.whole_lines = whole_lines

    @cached_property
    def lines(self) -> FileLines | None:
        if self.text.count("\n") >= MAX_TOLERANT_LINES:
            return None
        return FileLines(self)

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
