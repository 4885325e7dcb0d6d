"""Counting what a session spends: per turn and for the whole session, across restarts.

Each response's `Usage` is added as it arrives (a cancelled or failed turn
spent its tokens too); the turn's total is recorded as a `TurnUsage` entry
when the turn settles, and the next turn starts from the sum of those, so the
session's total survives a restart without a table of its own.
"""

from __future__ import annotations

from collections.abc import Iterable

from term2.domain.history import HistoryEntry
from term2.domain.usage import Prices, TokenUsage, TurnUsage, cost
from term2.ports.llm import Usage
from term2.ports.updates import Spent


class Meter:
    def __init__(self) -> None:
        self._prior = TokenUsage()
        self._prior_cost: float | None = 0.0
        self._prices: Prices | None = None
        self.turn = TokenUsage()
        self.reported = False  # whether the provider reported any usage this turn
        self.requests = 0  # model requests this turn (`term2 exec --json`'s `turns`)
        self.answered = False  # whether any model answered anything this turn (an event of a stream)

    def start(self, history: Iterable[HistoryEntry], prices: Prices | None) -> None:
        """Take the session's totals so far from its recorded turns."""
        self._prices = prices
        records = [e for e in history if isinstance(e, TurnUsage)]
        self._prior = sum((r.usage for r in records), TokenUsage())
        costs = [r.cost for r in records]
        self._prior_cost = None if prices is None or None in costs else sum(c for c in costs if c is not None)

    def add(self, usage: Usage) -> None:
        self.reported = True
        self.turn = self.turn + TokenUsage(
            usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.cache_write_tokens,
            usage.reasoning_tokens,
        )  # fmt: skip

    @property
    def turn_cost(self) -> float | None:
        return None if self._prices is None else cost(self.turn, self._prices)

    @property
    def session_cost(self) -> float | None:
        turn = self.turn_cost
        return None if turn is None or self._prior_cost is None else self._prior_cost + turn

    def spent(self) -> Spent:
        return Spent(
            self.turn, self._prior + self.turn, self.turn_cost, self.session_cost, self.reported, self.requests
        )

    def record(self, turn_id: str) -> TurnUsage | None:
        """The entry to keep for this turn, or None when it spent nothing."""
        if self.turn == TokenUsage():
            return None
        return TurnUsage(turn_id, self.turn, self.turn_cost)
