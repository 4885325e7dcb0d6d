"""One place a line stage found, and the text written there: the file's own lines kept, the model's new ones added.

Kept apart from the search (tolerant_line_stages.py) because this is the
part that decides what lands in the file: every line the model did not change
stays as the file has it (its indentation, trailing spaces, punctuation), and
only the changed lines are the model's, re-indented by the fit's Indent.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from term2.domain.bounded_match import BoundedMatcher, Budget, OverBudget
from term2.domain.tolerant_indent import Indent
from term2.domain.tolerant_lines import fold_line, split_lines


class Snippet:
    """old_string and new_string as lines; `solid` indexes old's non-blank ones."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.old_nl = split_lines(old)
        self.new, self.new_nl = split_lines(new)
        self.solid = [k for k, line in enumerate(self.old) if line.strip()]

    @cached_property
    def stripped(self) -> list[str]:
        return [line.strip() for line in self.old]

    @cached_property
    def folded(self) -> list[str]:
        return [fold_line(line) for line in self.old]


@dataclass(frozen=True, slots=True)
class Fit:
    """One place a line stage found: the file lines old_string's lines stand for, and what differed."""

    first: int
    last: int
    mapping: tuple[int | None, ...]  # old line -> file line (None: a blank line the file lacks)
    indent: Indent
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


def transplant(snippet: Snippet, fit: Fit, lines: list[str], budget: Budget) -> str:
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
