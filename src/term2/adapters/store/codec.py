"""JSON and column encodings for history entries, and the timestamps of sessions.

The domain stays free of pydantic: the schemas here are derived from the
domain dataclasses by pydantic's ``TypeAdapter``, so a new field on a domain
type is picked up without a parallel model to keep in sync. Writing needs no
schema: pydantic-core serialises a dataclass by its fields, which is what the
adapter's serializer writes for these types, byte for byte (a contract test
checks it over every kind of entry); so a turn's records never wait for
pydantic's import and the schema build (~55 ms), which only reading needs
(ADR 0053).

Union resolution: the top-level ``HistoryEntry`` union is explicitly
discriminated on ``entry``. The nested unions (``ContentBlock`` on ``type``,
``ToolOutput`` on ``kind``) are declared in the domain without a pydantic
annotation, so pydantic resolves them in smart-union mode; because every
variant carries its tag as a ``Literal`` field and the encoder always writes
the tag, exactly one variant can accept a stored object, which makes the
result the same as a tagged union (a contract test pins this down).

Timestamps are stored as integer microseconds since the Unix epoch (UTC): the
integer orders correctly in SQL, survives a round trip exactly, and decodes to
a timezone-aware UTC ``datetime``. Naive datetimes are rejected rather than
guessed at.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Final

from term2.domain.session import Session
from term2.support.pydantic_core_native import native

if TYPE_CHECKING:
    from pydantic import TypeAdapter
    from pydantic_core import ValidationError, to_json

    from term2.domain.history import HistoryEntry  # loaded with the schema: a session opens before either

__all__ = [
    "CodecError",
    "decode_entry",
    "encode_entry",
    "from_micros",
    "normalise_session",
    "to_micros",
    "warm",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


if not TYPE_CHECKING:  # the compiled module alone (see term2.support.pydantic_core_native)
    ValidationError, to_json = native().ValidationError, native().to_json

_BUILDING = threading.Lock()  # one build: a read waits for the background warm-up instead of repeating it


@functools.cache
def _entries() -> TypeAdapter[HistoryEntry]:
    """Built on first read: its schema costs ~7 MB and ~20 ms, and pydantic's import ~35 ms more,
    that a process answering `initialize`, `session/new`, `session/list` or its first prompt never
    needs (pydantic is imported here for that reason, not at the top)."""
    with _BUILDING:
        return _build_entries()


@functools.cache
def _build_entries() -> TypeAdapter[HistoryEntry]:
    from pydantic import Field, TypeAdapter

    from term2.domain.history import HistoryEntry

    return TypeAdapter(Annotated[HistoryEntry, Field(discriminator="entry")])


def warm() -> None:
    """Build the reading schema ahead, in a worker thread, once the first turn is over (ADR 0053)."""
    _entries()


class CodecError(ValueError):
    """A stored document does not decode to a domain value."""


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch; raises ValueError for a naive datetime."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"timestamps must be timezone-aware, got naive {moment.isoformat()}")
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The UTC datetime for an integer produced by :func:`to_micros`."""
    return _EPOCH + timedelta(microseconds=micros)


def _utc(moment: datetime) -> datetime:
    return from_micros(to_micros(moment))


def normalise_session(session: Session) -> Session:
    """The session with both timestamps converted to UTC (the stored form)."""
    return dataclasses.replace(
        session,
        created_at=_utc(session.created_at),
        updated_at=_utc(session.updated_at),
    )


def encode_entry(entry: HistoryEntry) -> str:
    """Compact JSON for one history snapshot, tags included: what `TypeAdapter.dump_json` writes."""
    return to_json(entry).decode()


def decode_entry(document: str | bytes) -> HistoryEntry:
    """The history snapshot stored as ``document``; raises CodecError if it is not one."""
    try:
        return _entries().validate_json(document)
    except ValidationError as exc:
        raise CodecError(f"stored history entry does not decode: {exc}") from exc
