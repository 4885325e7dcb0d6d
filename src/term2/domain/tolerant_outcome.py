"""What the tolerance chain answers: one place to write, places too many to choose from, or none.

Its own module so that every stage (tolerant_exact.py, tolerant_line_stages.py)
answers in the same terms without importing the chain that calls it; callers
import these names from tolerant_match.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from term2.domain.line_endings import Piece

MAX_PLACES = 20  # places of an ambiguous match named, at most


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
