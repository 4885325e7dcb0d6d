"""How a prompt turn ends, and the rules that decide it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from term2.domain.retry import RetryPolicy


class StopReason(StrEnum):
    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    MAX_TURN_REQUESTS = "max_turn_requests"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"
    ERROR = "_term2_error"


class FinishReason(StrEnum):
    """Why one model response ended, as the provider port reports it."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"


@dataclass(frozen=True, slots=True)
class TurnLimits:
    max_model_requests: int = 50
    retry: RetryPolicy = field(default_factory=RetryPolicy)  # per model request; retries are not requests
    model_time: float = 1800.0  # seconds one turn may wait on the model, all requests and retry waits included
    first_token: float = 120.0  # seconds one request may wait for its first text, thought or tool call (retried)


def after_response(finish: FinishReason, requested_tools: int) -> StopReason | None:
    """Decide whether the turn ends after one model response.

    None means: run the requested tools and feed their results back. Tool
    calls win over a plain stop, since some providers report "stop" while
    still sending calls; a truncated or filtered response never runs tools.
    """
    if finish is FinishReason.LENGTH:
        return StopReason.MAX_TOKENS
    if finish is FinishReason.CONTENT_FILTER:
        return StopReason.REFUSAL
    if requested_tools == 0:
        return StopReason.END_TURN
    return None


def may_ask_again(requests_made: int, limits: TurnLimits) -> bool:
    """The cap on model requests per turn protects the user's budget from a looping model."""
    return requests_made < limits.max_model_requests
