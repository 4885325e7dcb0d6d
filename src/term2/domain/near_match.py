"""Where a text that is not in a file comes closest to being, for an edit the model got wrong.

A model that misremembers indentation or one word of the text it wants to
replace learns nothing from "not found" and usually reads the whole file
again; showing it the closest lines lets it fix the call at once.

Both texts come from the model (the snippet, and the file it points at), so
the search is bounded in steps, not seconds (bounded_match.py): only lines
that resemble the snippet's first or last line are tried as anchors, each
comparison sees at most a few thousand characters, and when the budget runs
out the best span found so far is the answer. A file of more lines than a
hint is worth splitting gets no hint. Lines end at "\n", as read_file numbers
them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from term2.domain.bounded_match import BoundedMatcher, Budget, OverBudget

MAX_ANCHORS = 8
MIN_RATIO = 0.5
MAX_LINE_CHARS = 300  # longer lines are compared by their head
MAX_CANDIDATES = 2000  # lines compared with a probe, at most
SAMPLED_LINES = 16  # line pairs compared to score a span, at most
MAX_FILE_LINES = 250_000  # a larger file gets no hint
HINT_STEPS = 1_000_000  # matcher steps for one hint


@dataclass(frozen=True, slots=True)
class NearMatch:
    first_line: int  # 1-based
    lines: tuple[str, ...]
    ratio: float


def _key(line: str) -> str:
    return line.strip()[:MAX_LINE_CHARS]


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _ratio(a: str, b: str, budget: Budget) -> float:
    """difflib's ratio of two lines, 0.0 at once when even its cheap upper bound is below MIN_RATIO."""
    if not a and not b:
        return 1.0
    matcher = BoundedMatcher(a, b, budget)
    if matcher.real_quick_ratio() < MIN_RATIO or matcher.quick_ratio() < MIN_RATIO:
        return 0.0
    return matcher.ratio()


def _window_ratio(wanted: list[str], window: list[str], budget: Budget) -> float:
    """How alike two spans are: the mean ratio of their lines, pairwise, over at most SAMPLED_LINES of them."""
    pairs = list(zip(wanted, window, strict=False))  # a window cut by the file's end scores its lines only
    if len(pairs) > SAMPLED_LINES:
        step = len(pairs) / SAMPLED_LINES
        pairs = [pairs[int(i * step)] for i in range(SAMPLED_LINES)]
    mean = sum(_ratio(a, b, budget) for a, b in pairs) / len(pairs)
    return mean * len(window) / len(wanted)


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


def _anchors(keys: list[str], probe: str, budget: Budget) -> list[int]:
    """The lines most like ``probe`` (at most MAX_ANCHORS, best first), as far as the budget reaches."""
    scored: list[tuple[float, int]] = []
    try:
        for position in _candidates(keys, probe):
            ratio = _ratio(probe, keys[position], budget)
            if ratio >= MIN_RATIO:
                scored.append((ratio, position))
    except OverBudget:
        pass
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [position for _, position in scored[:MAX_ANCHORS]]


def closest_lines(text: str, snippet: str, *, steps: int = HINT_STEPS) -> NearMatch | None:
    """The span of ``text`` most like ``snippet`` (same number of lines), or None when nothing is close."""
    wanted = _lines(snippet) or [snippet]
    if not any(line.strip() for line in wanted) or text.count("\n") >= MAX_FILE_LINES:
        return None
    lines = _lines(text)
    if not lines:
        return None
    budget = Budget(steps)
    keys = [_key(line) for line in lines]
    span = len(wanted)
    starts: set[int] = set()
    for index, probe in ((0, wanted[0]), (span - 1, wanted[-1])):
        starts.update(max(0, position - index) for position in _anchors(keys, _key(probe), budget))
    target = [_key(line) for line in wanted]
    best: NearMatch | None = None
    for start in sorted(starts):
        window = lines[start : start + span]
        try:
            ratio = _window_ratio(target, [_key(line) for line in window], budget)
        except OverBudget:
            break
        if ratio >= MIN_RATIO and (best is None or ratio > best.ratio):
            best = NearMatch(start + 1, tuple(window), ratio)
    return best
