"""Opaque, tamper-evident keyset cursors for ``SessionStore.list``.

A cursor is ``base64url(JSON keyset) "." base64url(HMAC-SHA256 tag)``. The
tag is keyed with a per-store secret and covers both the keyset and the cwd
filter the page was listed with, so a client can neither forge a position nor
replay a cursor against a different filter (which would silently skip or
repeat sessions). The cwd itself is not written into the cursor, so a cursor
does not leak paths.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Final

from term2.ports.session_store import InvalidCursor

_DOMAIN: Final = b"term2/session-list-cursor/v1\x00"
_MAX_CURSOR_CHARS: Final = 4096


@dataclass(frozen=True, slots=True)
class Keyset:
    """The last row of a page: listing continues strictly below it."""

    updated_at_us: int
    session_id: str


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    padded = text + "=" * (-len(text) % 4)
    return base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)


class CursorSigner:
    """Issues and checks cursors under one secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("cursor secret must be at least 16 bytes")
        self._secret = secret

    def _tag(self, cwd: str | None, payload: bytes) -> bytes:
        scope = json.dumps(cwd).encode()
        message = _DOMAIN + scope + b"\x00" + payload
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def issue(self, cwd: str | None, keyset: Keyset) -> str:
        payload = json.dumps([keyset.updated_at_us, keyset.session_id], separators=(",", ":")).encode()
        return f"{_b64encode(payload)}.{_b64encode(self._tag(cwd, payload))}"

    def open(self, cwd: str | None, cursor: str) -> Keyset:
        """The keyset inside ``cursor``; raises InvalidCursor unless we issued it for ``cwd``."""
        if not isinstance(cursor, str) or len(cursor) > _MAX_CURSOR_CHARS:
            raise InvalidCursor("malformed cursor")
        payload_text, dot, tag_text = cursor.partition(".")
        if not dot:
            raise InvalidCursor("malformed cursor")
        try:
            payload = _b64decode(payload_text)
            tag = _b64decode(tag_text)
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursor("malformed cursor") from exc
        if not hmac.compare_digest(tag, self._tag(cwd, payload)):
            raise InvalidCursor("cursor was not issued by this store for this listing")
        try:
            updated_at_us, session_id = json.loads(payload)
        except (ValueError, TypeError) as exc:
            raise InvalidCursor("malformed cursor") from exc
        if type(updated_at_us) is not int or not isinstance(session_id, str):
            raise InvalidCursor("malformed cursor")
        return Keyset(updated_at_us, session_id)
