"""How a block the model shifted, flattened or re-tabbed is found to be the file's, and re-indented to fit.

Stages 3 and 4 of the tolerance chain (tolerant_match.py) accept a place only
when one consistent re-indentation takes every line of old_string to the
file's; that same re-indentation is then applied to the model's new lines, so
they land at the file's depth in the file's indentation character.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

TAB_WIDTHS = (4, 8, 2)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _columns(indent: str, width: int) -> int:
    column = 0
    for char in indent:
        column = (column // width + 1) * width if char == "\t" else column + 1
    return column


@dataclass(frozen=True, slots=True)
class Indent:
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


def indent_fit(pairs: list[tuple[str, str]], *, columns: bool) -> Indent | None:
    """One consistent re-indentation taking old's lines to the file's, or None."""
    indents = [(_indent(o), _indent(f)) for o, f in pairs]
    if not indents:
        return Indent()
    if not columns:
        o0, f0 = indents[0]
        if f0.endswith(o0):
            prefix = f0[: len(f0) - len(o0)]
            if all(f == prefix + o for o, f in indents):
                return Indent(add=prefix)
        if o0.endswith(f0):
            prefix = o0[: len(o0) - len(f0)]
            if all(o == prefix + f for o, f in indents):
                return Indent(remove=prefix)
        return None
    tabs = any("\t" in f for _, f in indents)
    mixed = tabs != any("\t" in o for o, _ in indents)
    for width in TAB_WIDTHS:
        columns_ = [(_columns(o, width), _columns(f, width)) for o, f in indents]
        shifts = {f - o for o, f in columns_}
        if len(shifts) == 1:
            return Indent(width=width, shift=shifts.pop(), tabs=tabs, mixed_style=mixed)
        scale = _scale(columns_)
        if scale is not None:
            return Indent(width=width, shift=scale[1], tabs=tabs, mixed_style=mixed, scale=scale[0])
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
