"""Time and identifiers, kept behind tiny seams so tests can pin them."""

from __future__ import annotations

import secrets
import string
from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def new_session_id() -> str:
    """128 bits from the OS CSPRNG: session ids must not be guessable."""
    return "sess_" + secrets.token_urlsafe(16)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


_ALNUM = string.ascii_letters + string.digits


def new_wire_call_id() -> str:
    """A tool call id for a provider's transcript, in the one shape every provider takes back.

    Nine letters and digits: Mistral requires exactly that, Anthropic allows
    ``[A-Za-z0-9_-]+``, OpenAI up to 40 characters.
    """
    return "".join(secrets.choice(_ALNUM) for _ in range(9))
