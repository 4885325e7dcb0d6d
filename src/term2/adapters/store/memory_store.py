"""In-memory session store: the alternate adapter for tests and ephemeral runs.

It mirrors the SQLite store's semantics exactly (UTC-normalised timestamps,
keyset ordering, signed cursors bound to the cwd filter, error types) so that
use-case tests written against it hold for the real store; the contract suite
runs against both.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator, Mapping

from term2.adapters.store.codec import normalise_session, to_micros
from term2.adapters.store.cursor import CursorSigner, Keyset
from term2.domain.errors import InvalidInput, NotFound
from term2.domain.history import HistoryEntry, compact
from term2.domain.session import Session, SessionPage


def _sort_key(session: Session) -> tuple[int, str]:
    return (to_micros(session.updated_at), session.session_id)


class InMemorySessionStore:
    """A SessionStore that lives and dies with the process."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._history: dict[str, list[HistoryEntry]] = {}
        self._signer = CursorSigner(secrets.token_bytes(32))

    async def create(self, session: Session) -> None:
        if session.session_id in self._sessions:
            raise InvalidInput(f"session {session.session_id!r} already exists")
        self._sessions[session.session_id] = normalise_session(session)
        self._history[session.session_id] = []

    async def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    async def save(self, session: Session) -> None:
        current = self._sessions.get(session.session_id)
        if current is None:
            raise NotFound(f"session {session.session_id!r} does not exist")
        stored = normalise_session(session)
        self._sessions[session.session_id] = dataclasses.replace(
            current,
            title=stored.title,
            state=stored.state,
            updated_at=stored.updated_at,
            model=stored.model,
            effort=stored.effort,
            mode=stored.mode,
            additional_directories=stored.additional_directories,
        )

    async def delete(self, session_id: str) -> bool:
        self._history.pop(session_id, None)
        return self._sessions.pop(session_id, None) is not None

    async def append(self, session_id: str, entry: HistoryEntry) -> int:
        entries = self._history.get(session_id)
        if entries is None:
            raise NotFound(f"session {session_id!r} does not exist")
        entries.append(entry)
        return len(entries)

    async def history(self, session_id: str) -> AsyncIterator[HistoryEntry]:
        # Compact a snapshot taken now, so appends made while the caller is
        # iterating do not change what this iteration yields.
        for entry in compact(list(self._history.get(session_id, ()))):
            yield entry

    async def appended(
        self, session_id: str, after: int, known: Mapping[int, HistoryEntry] | None = None
    ) -> tuple[list[HistoryEntry], int]:
        entries = list(self._history.get(session_id, ()))  # kept as objects: nothing to decode, `known` or not
        if after <= 0:
            return compact(entries), len(entries)
        return entries[after:], max(after, len(entries))

    async def list(self, cwd: str | None, cursor: str | None, limit: int) -> SessionPage:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        after = self._signer.open(cwd, cursor) if cursor is not None else None
        candidates = [s for s in self._sessions.values() if cwd is None or s.cwd == cwd]
        if after is not None:
            bound = (after.updated_at_us, after.session_id)
            candidates = [s for s in candidates if _sort_key(s) < bound]
        candidates.sort(key=_sort_key, reverse=True)
        page = tuple(candidates[:limit])
        next_cursor = None
        if len(candidates) > limit:
            last = page[-1]
            next_cursor = self._signer.issue(cwd, Keyset(to_micros(last.updated_at), last.session_id))
        return SessionPage(sessions=page, next_cursor=next_cursor)

    async def aclose(self) -> None:
        """Nothing to release; kept for the port."""
