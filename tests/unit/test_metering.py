"""Usage and cost: per turn, per session, across a restart (the totals come back from the history)."""

from __future__ import annotations

import pytest

from term2.app.metering import Meter
from term2.domain.usage import Prices, TokenUsage, TurnUsage, cost
from term2.ports.llm import Usage

PRICES = Prices(input=3e-6, output=15e-6, cache_read=0.3e-6, cache_write=3.75e-6)


def test_cached_and_written_input_are_priced_apart() -> None:
    usage = TokenUsage(input=1_000, output=100, cached=600, cache_write=300)
    assert cost(usage, PRICES) == pytest.approx(100 * 3e-6 + 600 * 0.3e-6 + 300 * 3.75e-6 + 100 * 15e-6)
    assert cost(usage, Prices(3e-6, 15e-6)) == pytest.approx(1_000 * 3e-6 + 100 * 15e-6)  # no cache prices


def test_a_turn_adds_up_its_responses_and_the_session_its_turns() -> None:
    earlier = [TurnUsage("t1", TokenUsage(input=500, output=50), 0.01), TurnUsage("t2", TokenUsage(10, 1), 0.002)]
    meter = Meter()
    meter.start(earlier, PRICES)
    meter.add(Usage(1_000, 100, cached_input_tokens=600, reasoning_tokens=40))
    meter.add(Usage(1_200, 80))
    spent = meter.spent()
    assert spent.turn == TokenUsage(input=2_200, output=180, cached=600, reasoning=40)
    assert spent.session == spent.turn + TokenUsage(510, 51)
    assert spent.session_cost == pytest.approx(0.012 + cost(spent.turn, PRICES))
    record = meter.record("t3")
    assert record is not None and record.usage == spent.turn and record.cost == spent.turn_cost


def test_without_prices_there_is_no_cost_and_an_idle_turn_records_nothing() -> None:
    meter = Meter()
    meter.start([], None)
    assert meter.spent().session_cost is None and meter.record("t1") is None
    meter.add(Usage(10, 1))
    assert meter.turn_cost is None and meter.record("t1") is not None
