"""Time and identifiers, kept behind tiny seams so tests can pin them."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_session_id() -> str:
    """128 bits from the OS CSPRNG: session ids must not be guessable."""
    return "sess_" + secrets.token_urlsafe(16)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"
