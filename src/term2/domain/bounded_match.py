"""difflib's matcher with a bound on the work it may do.

`difflib.SequenceMatcher` is roughly quadratic, and worse on repetitive input:
7,000 identical lines took seconds to diff, and a long snippet against a large
file took tens of seconds to score. The model chooses both inputs, so every
comparison term2 makes on its behalf runs under a `Budget` counted in the
matcher's own steps (one per candidate pair it visits), not in seconds: the
same input always costs the same, on any machine, and a caller that runs out
falls back to a coarser answer instead of a slower one.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from typing import Any


class OverBudget(Exception):
    """The comparison would take more steps than its budget allows."""


class Budget:
    """Steps left for one task; shared by every matcher the task makes."""

    def __init__(self, steps: int) -> None:
        self.left = steps
        self.spent = 0

    def spend(self, steps: int) -> None:
        """Take `steps` for work about to be done, or raise OverBudget and let it not be done."""
        if steps > self.left:
            self.left = -1  # nothing more fits, however small
            raise OverBudget
        self.spent += steps
        self.left -= steps


class BoundedMatcher(difflib.SequenceMatcher[Any]):
    """A SequenceMatcher that charges each longest-match search to a budget before it runs.

    The charge is an upper bound of the search's inner loop (every position of
    `b` holding each element of `a`'s range; junk positions included, so never
    less), so a search that would overrun raises OverBudget before doing the
    work. Building the indexes of `b` is charged too (one step an element).
    """

    def __init__(self, a: Sequence[Any], b: Sequence[Any], budget: Budget, *, autojunk: bool = False) -> None:
        budget.spend(2 * (len(a) + len(b)))
        self._budget = budget
        self._first = a
        self._counts = Counter(b)
        super().__init__(None, a, b, autojunk=autojunk)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        stop = len(self._first) if ahi is None else ahi
        counts = self._counts
        steps = stop - alo
        for item in self._first[alo:stop]:
            steps += counts[item]
        self._budget.spend(steps)
        return super().find_longest_match(alo, stop, blo, bhi)
