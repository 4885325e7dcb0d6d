"""The retry rule (which failures, how long) and the provider hints it reads, with no clock at all."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from term2.adapters.llm import retry_hints
from term2.domain.retry import RetryPolicy, is_transient, retry_notice

POLICY = RetryPolicy(max_attempts=6, max_wait=120.0, base_delay=1.0, factor=2.0)


@pytest.mark.parametrize(
    ("kind", "status", "expected"),
    [
        ("rate_limit", 429, True),
        ("connection", None, True),
        ("timeout", 408, True),
        ("provider_error", 500, True),
        ("provider_error", 503, True),
        ("provider_error", 529, True),  # Anthropic: overloaded
        ("provider_error", None, False),  # e.g. the library failed to load: time cures nothing
        ("provider_error", 409, False),
        ("quota", 429, False),
        ("authentication", 401, False),
        ("authentication", 403, False),
        ("bad_request", 400, False),
        ("context_window", 400, False),
    ],
)
def test_only_failures_that_pass_with_time_are_transient(kind: str, status: int | None, expected: bool) -> None:
    assert is_transient(kind, status) is expected


def test_backoff_doubles_within_equal_jitter_bounds() -> None:
    lowest = [POLICY.delay(n, 0.0, None, jitter=0.0) for n in range(1, 6)]
    highest = [POLICY.delay(n, 0.0, None, jitter=0.999) for n in range(1, 6)]
    assert lowest == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert all(h is not None and 2 * low > h > low for low, h in zip(lowest, highest, strict=True) if low)


def test_attempts_are_capped_counting_the_first_request() -> None:
    assert POLICY.delay(5, 0.0, None, jitter=0.5) is not None  # 5 failed: the 6th may still go
    assert POLICY.delay(6, 0.0, None, jitter=0.5) is None
    assert RetryPolicy(max_attempts=1).delay(1, 0.0, None, jitter=0.5) is None  # 1 turns retries off


def test_the_providers_hint_is_a_floor_not_a_ceiling() -> None:
    assert POLICY.delay(1, 0.0, floor=7.5, jitter=0.0) == 7.5
    assert POLICY.delay(5, 0.0, floor=0.2, jitter=0.0) == 8.0
    assert POLICY.delay(1, 0.0, floor=-3.0, jitter=0.0) == 0.5  # an HTTP date in the past


def test_a_wait_that_would_overrun_the_total_cap_gives_up_at_once() -> None:
    assert POLICY.delay(1, 0.0, floor=121.0, jitter=0.0) is None
    assert POLICY.delay(2, 119.5, None, jitter=0.0) is None
    assert POLICY.delay(2, 119.0, None, jitter=0.0) == 1.0
    many = RetryPolicy(max_attempts=10_000, max_wait=1e9)
    assert many.delay(5000, 0.0, None, jitter=0.0) is None  # no overflow, just over the cap


def test_the_notice_says_when_which_attempt_and_why() -> None:
    assert retry_notice(4.0, 2, POLICY, "rate_limit", 429) == "Retrying in 4 s (2/6): rate limited by the provider"
    assert retry_notice(1.5, 3, POLICY, "provider_error", 503).endswith("(3/6): the provider failed (HTTP 503)")
    assert retry_notice(1.5, 3, POLICY, "provider_error", 503).startswith("Retrying in 1.5 s")
    timed_out = retry_notice(60.4, 2, POLICY, "timeout", None)
    assert timed_out == "Retrying in 60 s (2/6): the provider did not answer in time"


# --------------------------------------------------------------------------- provider hints


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"Retry-After": "1.5"}, 1.5),
        ({"retry-after-ms": "2500", "retry-after": "9"}, 2.5),  # milliseconds first, as the SDKs do
        ({"retry-after": "soon"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    assert retry_hints.from_headers(headers) == expected


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    now = 1_800_000_000.0
    headers = {"retry-after": formatdate(now + 30, usegmt=True)}
    assert retry_hints.from_headers(headers, now=lambda: now) == 30.0
    assert retry_hints.from_headers(headers, now=lambda: now + 60) == 0.0


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Rate limit reached for gpt-4 on tokens per min. Please try again in 1.5s. Visit ...", 1.5),
        ("Please try again in 20ms.", 0.02),
        ("Please try again in 1m30s.", 90.0),
        ("try again in 2m", 120.0),
        ("Please try again later.", None),
        ("Overloaded", None),
    ],
)
def test_try_again_phrases(message: str, expected: float | None) -> None:
    assert retry_hints.from_message(message) == expected
