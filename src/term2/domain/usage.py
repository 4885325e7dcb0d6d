"""Tokens a session spent and what they cost, from the provider's counts and the catalog's prices.

Prices are per token in US dollars, as litellm's bundled catalog lists them.
Cached input is billed at the cache-read price and cache writes at the
cache-write price where the catalog has them (Anthropic bills writes above
plain input), else at the plain input price: never less than the provider
would charge for the tokens we know of.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CURRENCY = "USD"


@dataclass(frozen=True, slots=True)
class Prices:
    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Totals over one or more responses; ``input`` includes the cached and cache-written parts."""

    input: int = 0
    output: int = 0
    cached: int = 0
    cache_write: int = 0
    reasoning: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.input + other.input,
            self.output + other.output,
            self.cached + other.cached,
            self.cache_write + other.cache_write,
            self.reasoning + other.reasoning,
        )


def cost(usage: TokenUsage, prices: Prices) -> float:
    plain = max(usage.input - usage.cached - usage.cache_write, 0)
    read = prices.cache_read if prices.cache_read is not None else prices.input
    write = prices.cache_write if prices.cache_write is not None else prices.input
    return plain * prices.input + usage.cached * read + usage.cache_write * write + usage.output * prices.output


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """What one turn spent, in the session's history (never replayed), so totals survive a restart."""

    turn_id: str
    usage: TokenUsage
    cost: float | None  # None when the catalog has no price for the model
    entry: Literal["turn_usage"] = "turn_usage"
