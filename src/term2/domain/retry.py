"""When a failed model request is worth sending again, and how long to wait first.

Why here: one 429 or 503 used to end a turn that may have run many tools, and
hidden SDK retries would leave the user staring at a silent turn. The rule is
pure so it can be tested with pinned randomness and no clock: the agent loop
(`app/agent_loop.py`) supplies the random draw, does the sleeping (inside the
turn's cancel scope) and tells the client. The loop also owns the other half of
the rule: only a request that failed before its first content delta is retried.
"""

from __future__ import annotations

from dataclasses import dataclass

# Failures that pass with time. Authentication, quota, bad requests and context-window
# errors do not: sending the same request again can only fail the same way.
_TRANSIENT_KINDS = frozenset({"rate_limit", "connection", "timeout"})
_MAX_EXPONENT = 32  # far beyond any useful wait; keeps factor ** n a finite float


def is_transient(kind: str, status: int | None) -> bool:
    """Rate limits, unreachable providers, timeouts and server errors (5xx, Anthropic's 529 too)."""
    if kind in _TRANSIENT_KINDS:
        return True
    return kind == "provider_error" and status is not None and 500 <= status <= 599


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Capped, jittered exponential backoff; `max_attempts` counts the first request too."""

    max_attempts: int = 6
    max_wait: float = 120.0  # seconds slept in total for one request, over all its retries
    base_delay: float = 1.0
    factor: float = 2.0

    def delay(self, failed_attempts: int, waited: float, floor: float | None, jitter: float) -> float | None:
        """Seconds to wait before attempt `failed_attempts + 1`, or None to give up now.

        Equal jitter (half the step fixed, half scaled by `jitter`, drawn from
        [0, 1)) spreads clients that failed together without ever retrying at
        once. The provider's own hint (`floor`, from Retry-After or its message)
        wins when it is longer: retrying earlier only earns another 429. A wait
        that would overrun `max_wait` gives up at once, so the user hears the
        error now instead of after a sleep that cannot help.
        """
        if failed_attempts >= self.max_attempts:
            return None
        step = self.base_delay * self.factor ** min(failed_attempts - 1, _MAX_EXPONENT)
        wait = step / 2 + step / 2 * jitter
        if floor is not None and floor > wait:
            wait = floor
        if waited + wait > self.max_wait:
            return None
        return wait


_REASONS = {
    "rate_limit": "rate limited by the provider",
    "connection": "cannot reach the provider",
    "timeout": "the provider did not answer in time",
}


def retry_notice(wait: float, next_attempt: int, policy: RetryPolicy, kind: str, status: int | None) -> str:
    """What the user reads while the turn waits, e.g. "Retrying in 4 s (2/6): rate limited by the provider"."""
    reason = _REASONS.get(kind) or "the provider failed" + (f" (HTTP {status})" if status is not None else "")
    seconds = f"{wait:.0f}" if wait >= 10 else f"{wait:.1f}".removesuffix(".0")
    return f"Retrying in {seconds} s ({next_attempt}/{policy.max_attempts}): {reason}"
