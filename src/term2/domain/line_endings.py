"""A file's line endings, byte-order mark and final newline, kept through a change the model wrote.

Models write "\\n" whatever the file uses. Matching and editing happen on
a view of the file with every CRLF as LF and no BOM (`Body.lf`); the
result is put back into the file's own bytes around what changed: text
outside the changed spans is copied from the file as it was, and each
newline of the new text takes the ending of the line it stands for
(CRLF files stay CRLF, a file with mixed endings keeps each line's). A
final newline the file had (or lacked) is kept, and so is a UTF-8 BOM.
A lone "\\r" is ordinary text.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

BOM = "\ufeff"
CRLF = "\r\n"


@dataclass(frozen=True, slots=True)
class Piece:
    """Put `text` (LF newlines) where `start:end` of the LF view was.

    `endings` gives each newline of `text` its ending; None: each takes the
    ending of the replaced span's newline at the same position (the line
    after the span's for those beyond them).
    """

    start: int
    end: int
    text: str
    endings: tuple[str, ...] | None = None


def lf_only(text: str) -> str:
    """A string the model wrote, with CRLF as LF (the view it is matched in)."""
    return text.replace(CRLF, "\n")


class Body:
    """A file's text as edits see it, and the way back to its own bytes."""

    def __init__(self, text: str) -> None:
        self.bom = text.startswith(BOM)
        raw = text[1:] if self.bom else text
        self.raw = raw
        self._crlf = array("q")  # LF-view offsets of the newlines that are CRLF in the file
        if CRLF in raw:
            self.lf = raw.replace(CRLF, "\n")
            for shift, found in enumerate(re.finditer(CRLF, raw)):
                self._crlf.append(found.start() - shift)
        else:
            self.lf = raw
        newlines = self.lf.count("\n")
        self.has_crlf = bool(self._crlf)
        self.all_crlf = newlines > 0 and len(self._crlf) == newlines
        self.newline = CRLF if len(self._crlf) * 2 > newlines else "\n"  # for a line with no ending of its own
        self.final_newline = self.lf.endswith("\n")

    def original(self, position: int) -> int:
        """The offset in the file (BOM aside) of an offset in the LF view."""
        return position + bisect_left(self._crlf, position)

    def ending_at(self, position: int) -> str:
        """The file's ending of the newline at `position` of the LF view."""
        index = bisect_left(self._crlf, position)
        return CRLF if index < len(self._crlf) and self._crlf[index] == position else "\n"

    def ending_after(self, position: int) -> str:
        """The ending of the line that `position` is in, or the file's usual one at its end."""
        found = self.lf.find("\n", position)
        return self.newline if found == -1 else self.ending_at(found)

    def rebuilt(self, pieces: Sequence[Piece]) -> str:
        """The file's text (BOM included) with `pieces` (sorted, not overlapping) put in place."""
        out: list[str] = [BOM] if self.bom else []
        cursor = 0
        for piece in pieces:
            out.append(self.raw[self.original(cursor) : self.original(piece.start)])
            out.append(self._ended(piece))
            cursor = piece.end
        out.append(self.raw[self.original(cursor) :])
        return keep_final_newline("".join(out), had=self.final_newline, newline=self.newline)

    def replaced_all(self, old: str, new: str) -> str:
        """Every (non-overlapping) `old` of the LF view replaced by `new`, both with LF newlines."""
        if not self._crlf:
            text = self.lf.replace(old, new)
        elif self.all_crlf:
            text = self.raw.replace(old.replace("\n", CRLF), new.replace("\n", CRLF))
        else:
            return self.rebuilt(tuple(_every(self.lf, old, new)))
        text = (BOM if self.bom else "") + text
        return keep_final_newline(text, had=self.final_newline, newline=self.newline)

    def _ended(self, piece: Piece) -> str:
        if "\n" not in piece.text:
            return piece.text
        if piece.endings is not None:
            parts = piece.text.split("\n")
            out = [parts[0]]
            for ending, part in zip(piece.endings, parts[1:], strict=True):
                out += (ending, part)
            return "".join(out)
        if not self._crlf:
            return piece.text
        if self.all_crlf:
            return piece.text.replace("\n", CRLF)
        spanned = [self.ending_at(at) for at in _newlines(self.lf, piece.start, piece.end)]
        after = self.ending_after(piece.end)
        parts = piece.text.split("\n")
        out = [parts[0]]
        for index, part in enumerate(parts[1:]):
            out += (spanned[index] if index < len(spanned) else after, part)
        return "".join(out)

    def line_ending(self, line_start: int, line_end: int) -> str | None:
        """The ending of the line whose content spans `line_start:line_end` in the LF view; None at the end."""
        if line_end >= len(self.lf):
            return None
        return self.ending_at(line_end)


def _newlines(text: str, start: int, end: int) -> list[int]:
    found: list[int] = []
    at = text.find("\n", start, end)
    while at != -1:
        found.append(at)
        at = text.find("\n", at + 1, end)
    return found


def _every(text: str, old: str, new: str) -> list[Piece]:
    pieces: list[Piece] = []
    at = text.find(old)
    while at != -1:
        pieces.append(Piece(at, at + len(old), new))
        at = text.find(old, at + len(old))
    return pieces


def keep_final_newline(text: str, *, had: bool, newline: str) -> str:
    """`text` ending with a newline exactly when the file did (an emptied file stays empty)."""
    body = text.removeprefix(BOM)
    if had and body and not body.endswith("\n"):
        return text + newline
    if not had and body.endswith("\n"):
        return text[: -len(CRLF)] if text.endswith(CRLF) else text[:-1]
    return text


def styled_like(old: str | None, content: str) -> str:
    """What write_file writes over `old`: CRLF kept for a file that uses only CRLF, unless `content` has a
    CRLF itself (then it says which endings it wants), and a BOM the file had kept."""
    if not old:
        return content
    body = Body(old)
    if body.all_crlf and CRLF not in content:
        content = content.replace("\n", CRLF)
    if body.bom and not content.startswith(BOM):
        content = BOM + content
    return content
