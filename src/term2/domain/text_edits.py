"""Edits and patch hunks applied to a file's text: all of them, in order, or none.

Each edit (or hunk) is found with the tolerance chain (tolerant_match.py) in
the text the earlier ones left, so a later edit may rely on an earlier one;
the first that cannot be placed stops the whole change, and nothing of it is
kept. The file's line endings, BOM and final newline survive
(line_endings.py). A result larger than the caller's limit is refused before
it is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from term2.domain.bounded_match import Budget
from term2.domain.line_endings import Body, Piece
from term2.domain.patch_grammar import Chunk
from term2.domain.tolerant_match import Ambiguous, Found, Missing, fold_line, locate


@dataclass(frozen=True, slots=True)
class Edit:
    old: str
    new: str
    replace_all: bool = False


@dataclass(frozen=True, slots=True)
class Applied:
    text: str
    first_line: int  # 1-based line of the first change, in the original text
    count: int  # replacements made (replace_all may make many)
    tolerances: tuple[tuple[int, str], ...]  # (edit or hunk index, what was forgiven), for the inexact ones


@dataclass(frozen=True, slots=True)
class Refused:
    index: int  # the edit or hunk that could not be placed
    why: Ambiguous | Missing
    text: str  # the text it was looked for in (the earlier ones applied), LF newlines
    header: str | None = None  # a hunk's "@@" line, when it was that line that was not found


@dataclass(frozen=True, slots=True)
class TooLarge:
    size: int  # characters the result would have (at least)


Result = Applied | Refused | TooLarge


def apply_edits(text: str, edits: Sequence[Edit], budget: Budget, limit: int) -> Result:
    first_line = 0
    count = 0
    tolerances: list[tuple[int, str]] = []
    for index, edit in enumerate(edits):
        body = Body(text)
        found = locate(body.lf, edit.old, edit.new, budget=budget, replace_all=edit.replace_all)
        if not isinstance(found, Found):
            return Refused(index, found, body.lf)
        size = len(text) + _growth(found, body)
        if size > limit:
            return TooLarge(size)
        text = body.replaced_all(*found.every) if found.every is not None else body.rebuilt(found.pieces)
        first_line = first_line or found.first_line
        count += found.count
        if found.tolerance is not None:
            tolerances.append((index, found.tolerance))
    return Applied(text, first_line, count, tuple(tolerances))


def _growth(found: Found, body: Body) -> int:
    """How much longer the text gets, counting a CRLF newline as two (an upper bound in a mixed file)."""

    def size(text: str) -> int:
        return len(text) + (text.count("\n") if body.has_crlf else 0)

    if found.every is not None:
        old, new = found.every
        return found.count * (size(new) - size(old))
    return sum(size(piece.text) - (piece.end - piece.start) for piece in found.pieces)


def apply_chunks(text: str, chunks: Sequence[Chunk], budget: Budget, limit: int) -> Result:
    """A patch's hunks for one file, in file order: each is looked for below the one before it."""
    body = Body(text)
    lf = body.lf
    work = lf + "\n" if lf and not lf.endswith("\n") else lf  # hunk lines all end with a newline
    cursor = 0  # the first line the next hunk may touch
    delta = 0  # how much longer the work text is than the file's, before the cursor
    pieces: list[Piece] = []
    tolerances: list[tuple[int, str]] = []
    first_line = 0
    for index, chunk in enumerate(chunks):
        from_line = cursor
        if chunk.header is not None:
            hits = _header_lines(work, chunk.header, cursor)
            if not hits:
                return Refused(index, Missing(), work, header=chunk.header)
            if not chunk.old and len(hits) > 1:
                places = tuple((hit + 1, hit + 1) for hit in hits[:20])
                return Refused(index, Ambiguous(places, len(hits), len(hits) > 20), work, header=chunk.header)
            from_line = hits[0] + 1
        if not chunk.old:
            at = _offset_of_line(work, from_line) if chunk.header is not None else len(work)
            piece = Piece(at, at, "".join(line + "\n" for line in chunk.new))
            line = work.count("\n", 0, at) + 1
        else:
            old = "\n".join(chunk.old) + "\n"
            new = "\n".join(chunk.new) + "\n" if chunk.new else ""
            found = locate(work, old, new, budget=budget, from_line=from_line, at_end=chunk.at_end, whole_lines=True)
            if not isinstance(found, Found):
                return Refused(index, found, work)
            piece, line = found.pieces[0], found.first_line
            if found.tolerance is not None:
                tolerances.append((index, found.tolerance))
        work = work[: piece.start] + piece.text + work[piece.end :]
        if len(work) > limit:
            return TooLarge(len(work))
        pieces.append(Piece(piece.start - delta, piece.end - delta, piece.text))
        first_line = first_line or line
        delta += len(piece.text) - (piece.end - piece.start)
        cursor = work.count("\n", 0, piece.start + len(piece.text))
    return Applied(body.rebuilt([_clamped(piece, len(lf)) for piece in pieces]), first_line, len(pieces),
                   tuple(tolerances))  # fmt: skip


def _clamped(piece: Piece, size: int) -> Piece:
    """A piece in the text as the file has it, when the file lacks the final newline the hunks assumed."""
    if piece.start > size:
        return Piece(size, size, "\n" + piece.text)
    return Piece(piece.start, min(piece.end, size), piece.text)


def _header_lines(text: str, header: str, cursor: int) -> list[int]:
    """Lines from `cursor` on that are the `@@` line: equal when stripped, else with punctuation folded."""
    lines = text.split("\n")
    wanted = header.strip()
    hits = [i for i in range(cursor, len(lines)) if lines[i].strip() == wanted]
    if hits:
        return hits
    folded = fold_line(wanted)
    return [i for i in range(cursor, len(lines)) if fold_line(lines[i]) == folded]


def _offset_of_line(text: str, line: int) -> int:
    at = 0
    for _ in range(line):
        found = text.find("\n", at)
        if found == -1:
            return len(text)
        at = found + 1
    return at
