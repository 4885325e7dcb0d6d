"""Read how long a provider asked us to wait, from its headers or its words.

Why here: the retry policy (`domain/retry.py`) takes the provider's hint as a
floor, and each provider says it differently. The official clients read
`retry-after-ms` first, then `retry-after` as seconds or as an HTTP date (see
openai's `_parse_retry_after_header`); OpenAI's rate-limit messages also say
"Please try again in 1.5s" (or "in 20ms", "in 1m30s") when no header is sent.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Mapping

_PHRASE = re.compile(r"try again in\s+(?:(\d+)\s*m(?!s))?\s*(\d+(?:\.\d+)?)?\s*(ms|s)?\b", re.IGNORECASE)


def from_headers(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or HTTP date); None when absent or unreadable."""
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if seconds == seconds and seconds >= 0 else None  # NaN and negatives: no hint
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now())


def from_message(message: str) -> float | None:
    """Seconds from a "try again in 1.5s" / "20ms" / "1m30s" phrase in the provider's message."""
    found = _PHRASE.search(message)
    if not found or not (found.group(1) or found.group(2)):
        return None
    minutes, amount, unit = found.group(1), found.group(2), found.group(3)
    seconds = float(minutes or 0) * 60
    if amount:
        seconds += float(amount) / (1000.0 if unit == "ms" else 1.0)
    return seconds
