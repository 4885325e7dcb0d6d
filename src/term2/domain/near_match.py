"""Where a text that is not in a file comes closest to being, for an edit the model got wrong.

A model that misremembers indentation or one word of the text it wants to
replace learns nothing from "not found" and usually reads the whole file
again; showing it the closest lines lets it fix the call at once. Bounded:
only lines that resemble the snippet's first or last line are tried as
anchors, so a large file costs a handful of comparisons, not one per line.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

MAX_ANCHORS = 8
MIN_RATIO = 0.5
MAX_LINE_CHARS = 500  # longer lines are compared by their head
MAX_CANDIDATES = 2000  # lines compared with a probe, at most


@dataclass(frozen=True, slots=True)
class NearMatch:
    first_line: int  # 1-based
    lines: tuple[str, ...]
    ratio: float


def _key(line: str) -> str:
    return line.strip()[:MAX_LINE_CHARS]


def _candidates(keys: list[str], probe: str) -> list[int]:
    """Lines worth comparing with ``probe``: all of them in a small file; else those holding its rarest word."""
    if len(keys) <= MAX_CANDIDATES:
        return list(range(len(keys)))
    words = sorted(set(re.findall(r"\w{3,}", probe)), key=lambda w: (-len(w), w))[:5]
    best: list[int] = []
    for word in words:
        hits = [i for i, key in enumerate(keys) if word in key]
        if hits and (not best or len(hits) < len(best)):
            best = hits
    return best[:MAX_CANDIDATES]


def closest_lines(text: str, snippet: str) -> NearMatch | None:
    """The span of ``text`` most like ``snippet`` (same number of lines), or None when nothing is close."""
    wanted = snippet.splitlines() or [snippet]
    lines = text.splitlines()
    if not lines or not any(line.strip() for line in wanted):
        return None
    keys = [_key(line) for line in lines]
    span = len(wanted)
    starts: set[int] = set()
    for index, probe in ((0, wanted[0]), (span - 1, wanted[-1])):
        candidates = _candidates(keys, _key(probe))
        found = difflib.get_close_matches(_key(probe), [keys[i] for i in candidates], n=MAX_ANCHORS, cutoff=MIN_RATIO)
        for position in candidates:
            if keys[position] in found:
                starts.add(max(0, position - index))
    target = "\n".join(_key(line) for line in wanted)
    best: NearMatch | None = None
    for start in sorted(starts)[: MAX_ANCHORS * 4]:
        window = lines[start : start + span]
        ratio = difflib.SequenceMatcher(None, target, "\n".join(_key(line) for line in window)).ratio()
        if ratio >= MIN_RATIO and (best is None or ratio > best.ratio):
            best = NearMatch(start + 1, tuple(window), ratio)
    return best
