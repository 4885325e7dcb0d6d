"""Session store port: sessions and their history, durable across processes.

Implementations must tolerate several processes on the same store at once and
must make each append durable before returning, so a killed process loses at
most what was still in flight.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Protocol

from term2.domain.session import Session, SessionPage

if TYPE_CHECKING:  # loaded by what reads or writes a history: turns and replays (ADR 0052)
    from term2.domain.history import HistoryEntry


class InvalidCursor(Exception):
    """A list cursor this store did not issue, or can no longer honour."""


class SessionStore(Protocol):
    async def create(self, session: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(self, session: Session) -> None:
        """Persist title, state and updated_at of an existing session."""
        ...

    async def append(self, session_id: str, entry: HistoryEntry) -> int:
        """Record one history snapshot, and answer its position; later snapshots of the same identity
        supersede it."""
        ...

    def history(self, session_id: str) -> AsyncIterator[HistoryEntry]:
        """Yield the compacted history in order, streamed rather than loaded whole."""
        ...

    async def appended(
        self, session_id: str, after: int, known: Mapping[int, HistoryEntry] | None = None
    ) -> tuple[list[HistoryEntry], int]:
        """What was appended after position ``after``, and the position reached.

        ``after`` 0 gives the compacted history so far; a later position gives
        every snapshot appended since, in order, raw (so the caller compacts
        what it kept with what it got). Positions only grow, whichever process
        appended, so a caller that keeps what it read never reads it again.
        ``known`` holds snapshots the caller appended itself, by the position
        `append` answered: those are given back as they are, not read again.
        """
        ...

    async def delete(self, session_id: str) -> bool:
        """Remove the session and its whole history, durably; False when there was no such session.

        After it returns, `get` is None, `list` leaves it out and `append`/`save` raise NotFound,
        in every process on the store.
        """
        ...

    async def list(self, cwd: str | None, cursor: str | None, limit: int) -> SessionPage:
        """Newest first by updated_at; raises InvalidCursor for a forged or stale cursor."""
        ...

    async def aclose(self) -> None: ...
