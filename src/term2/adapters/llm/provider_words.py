"""What providers say when the account is out of credit or the prompt does not fit, in their own words.

Both kinds are told apart from a plain 429 or 400 by codes where a body has
them and by wording everywhere else, because providers (and gateways in front
of them) word the same failure differently and some send no code at all. Every
adapter reads them from here so that the same failure maps to the same port
error whichever adapter saw it.
"""

from __future__ import annotations

import re

QUOTA_CODE = "insufficient_quota"
CONTEXT_CODES = frozenset({"context_length_exceeded", "string_above_max_length"})

_QUOTA_WORDS = re.compile(r"insufficient_quota|exceeded your current quota", re.IGNORECASE)
_CONTEXT_WORDS = re.compile(
    r"prompt is too long|maximum context length|context window|context length|too many tokens"
    r"|input is too long|exceeds? the model'?s? (?:maximum|context)",
    re.IGNORECASE,
)


_UNSUPPORTED_WORDS = re.compile(r"\bnot (?:supported|implemented)\b|\bunsupported\b", re.IGNORECASE)


def says_unsupported(text: str) -> bool:
    """A server error that names a feature it lacks (llama-cpp-python: "Automatic streaming tool choice is
    not supported"): the same request fails the same way, so it is not worth more than one retry."""
    return bool(_UNSUPPORTED_WORDS.search(text))


def says_quota(text: str) -> bool:
    return bool(_QUOTA_WORDS.search(text))


def says_too_long(text: str) -> bool:
    return bool(_CONTEXT_WORDS.search(text))
