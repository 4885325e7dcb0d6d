"""SQLite session store: durable, multi-process, one file per user.

Concurrency inside a process: one connection guarded by a ``threading.Lock``.
Every blocking call runs in a worker thread via ``anyio.to_thread.run_sync``
and takes the lock for one short unit of work, so concurrent async callers
are serialised without ever blocking the event loop, and no statement is
left half-read while another caller uses the connection. Across processes,
WAL mode plus ``busy_timeout`` serialise writers (see ``sqlite_schema``).

Failure handling: any ``sqlite3`` or OS error is reported as the domain's
``StoreUnavailable`` naming the file, and the connection is dropped; the next
call reopens it, so a transient condition (full disk, a file briefly
read-only, a locked database) does not disable the store for the rest of the
process.

History is append-only: every snapshot is a new row, committed on its own
(autocommit), so a killed process loses at most the append in flight.
Compaction happens on read, in two phases that keep memory bounded:

1. One query over the covering index ``(session_id, key, seq)`` returns, per
   key, the sequence number of its last snapshot ordered by the key's first
   sequence number. Only integers are loaded, never bodies.
2. Bodies are then fetched by rowid in batches of ``HISTORY_BATCH`` and
   decoded and yielded one batch at a time; the lock is released between
   batches, so a long replay does not starve other callers.

A snapshot appended after phase 1 is not seen by that iteration, which is the
same "as of the moment you asked" view the in-memory store gives.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

import anyio.to_thread

from term2.adapters.store.codec import (
    CodecError,
    decode_entry,
    encode_entry,
    from_micros,
    to_micros,
)
from term2.adapters.store.sqlite_schema import is_writable, open_database
from term2.domain.approval import approval_mode
from term2.domain.errors import InvalidInput, NotFound, StoreUnavailable
from term2.domain.session import Session, SessionPage, SessionState

if TYPE_CHECKING:  # histories (turns) and list cursors (the first list) load where used, after a first session
    from term2.adapters.store.cursor import CursorSigner
    from term2.domain.history import HistoryEntry

T = TypeVar("T")

HISTORY_BATCH: Final = 200

_SESSION_COLUMNS: Final = "id, cwd, title, state, created_at, updated_at, model, effort, mode, roots"

# One statement per (cwd filter?, cursor?) combination, so each can use its
# index for both the filter and the ORDER BY instead of an "? IS NULL OR ..."
# predicate that defeats the planner.
_LIST_SQL: Final = {
    (False, False): f"SELECT {_SESSION_COLUMNS} FROM sessions ORDER BY updated_at DESC, id DESC LIMIT :limit",
    (False, True): f"SELECT {_SESSION_COLUMNS} FROM sessions"
    " WHERE (updated_at, id) < (:u, :i) ORDER BY updated_at DESC, id DESC LIMIT :limit",
    (True, False): f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE cwd = :cwd"
    " ORDER BY updated_at DESC, id DESC LIMIT :limit",
    (True, True): f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE cwd = :cwd"
    " AND (updated_at, id) < (:u, :i) ORDER BY updated_at DESC, id DESC LIMIT :limit",
}

_COMPACTION_PLAN_SQL: Final = (
    "SELECT MAX(seq) FROM history WHERE session_id = ? AND seq <= ? GROUP BY key ORDER BY MIN(seq)"
)
_LAST_SEQ_SQL: Final = "SELECT MAX(seq) FROM history WHERE session_id = ?"
_TAIL_SQL: Final = "SELECT seq, body FROM history WHERE session_id = ? AND seq > ? ORDER BY seq"


def _session_from_row(row: Sequence[object]) -> Session:
    session_id, cwd, title, state, created_at, updated_at, model, effort, mode, roots = row
    assert isinstance(session_id, str) and isinstance(cwd, str)
    assert title is None or isinstance(title, str)
    assert model is None or isinstance(model, str)
    assert effort is None or isinstance(effort, str)
    assert mode is None or isinstance(mode, str)
    assert roots is None or isinstance(roots, str)
    assert isinstance(state, str)
    assert isinstance(created_at, int) and isinstance(updated_at, int)
    return Session(
        session_id=session_id,
        cwd=cwd,
        created_at=from_micros(created_at),
        updated_at=from_micros(updated_at),
        title=title,
        state=SessionState(state),
        model=model,
        effort=effort,
        mode=approval_mode(mode),  # unknown (a newer term2's) or none: ask, the mode that asks everything
        additional_directories=_roots_from(roots),
    )


def _roots_from(stored: str | None) -> tuple[str, ...]:
    """The stored list, as it was written; anything else (a hand-edited row) is read as none."""
    if stored is None:
        return ()
    try:
        value = json.loads(stored)
    except ValueError:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ()
    return tuple(value)


def _roots_column(session: Session) -> str | None:
    return json.dumps(list(session.additional_directories)) if session.additional_directories else None


class SqliteSessionStore:
    """A SessionStore in one SQLite file, opened lazily on first use."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._secret: bytes | None = None  # the cursors' key, read with the database
        self._signer: CursorSigner | None = None  # made by the first list: opening a session signs nothing
        self._writable = False

    @property
    def path(self) -> Path:
        return self._path

    # -- plumbing -------------------------------------------------------

    def _open_locked(self, write: bool) -> sqlite3.Connection:
        if write and self._conn is not None and not self._writable:
            # Opened while the file was read-only: reopen, it may be fixed.
            self._drop_locked()
        if self._conn is None:
            try:
                conn, secret = open_database(self._path)
                try:
                    self._writable = is_writable(conn)
                except BaseException:
                    conn.close()
                    raise
            except (sqlite3.Error, OSError) as exc:
                raise StoreUnavailable(f"cannot open the session store at {self._path}: {exc}") from exc
            self._conn, self._secret, self._signer = conn, secret, None
        if write and not self._writable:
            raise StoreUnavailable(f"session store at {self._path} is read-only (file or disk not writable)")
        return self._conn

    def _signer_locked(self) -> CursorSigner:
        """The cursors' signer for the open database's secret (its module loads with the first list)."""
        if self._signer is None:
            from term2.adapters.store.cursor import CursorSigner

            assert self._secret is not None, "the database is opened first"
            self._signer = CursorSigner(self._secret)
        return self._signer

    def _drop_locked(self) -> None:
        conn, self._conn, self._secret, self._signer = self._conn, None, None, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass  # already broken; nothing more to release

    def _call_locked(
        self,
        action: str,
        work: Callable[[sqlite3.Connection], T],
        write: bool,
    ) -> T:
        with self._lock:
            conn = self._open_locked(write)
            try:
                return work(conn)
            except (sqlite3.Error, OSError) as exc:
                self._drop_locked()
                raise StoreUnavailable(f"session store at {self._path}: {action} failed: {exc}") from exc
            except CodecError as exc:
                raise StoreUnavailable(f"session store at {self._path}: {action} found unreadable data: {exc}") from exc

    async def _call(
        self,
        action: str,
        work: Callable[[sqlite3.Connection], T],
        *,
        write: bool = False,
    ) -> T:
        call = partial(self._call_locked, action, work, write)
        return await anyio.to_thread.run_sync(call)

    # -- SessionStore ---------------------------------------------------

    async def create(self, session: Session) -> None:
        row = (
            session.session_id,
            session.cwd,
            session.title,
            session.state.value,
            to_micros(session.created_at),
            to_micros(session.updated_at),
            session.model,
            session.effort,
            session.mode.value,
            _roots_column(session),
        )

        def work(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({', '.join('?' * 10)}) ON CONFLICT (id) DO NOTHING",
                row,
            )
            if cursor.rowcount == 0:
                raise InvalidInput(f"session {session.session_id!r} already exists")

        await self._call("create session", work, write=True)

    async def get(self, session_id: str) -> Session | None:
        def work(conn: sqlite3.Connection) -> Session | None:
            row = conn.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
            return None if row is None else _session_from_row(row)

        return await self._call("read session", work)

    async def save(self, session: Session) -> None:
        values = (
            session.title,
            session.state.value,
            to_micros(session.updated_at),
            session.model,
            session.effort,
            session.mode.value,
            _roots_column(session),
            session.session_id,
        )

        def work(conn: sqlite3.Connection) -> None:
            cursor = conn.execute(
                "UPDATE sessions SET title = ?, state = ?, updated_at = ?, model = ?, effort = ?, mode = ?,"
                " roots = ? WHERE id = ?",
                values,
            )
            if cursor.rowcount == 0:
                raise NotFound(f"session {session.session_id!r} does not exist")

        await self._call("save session", work, write=True)

    async def delete(self, session_id: str) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            # secure_delete: the freed pages are overwritten, so the rows are not left readable in the file's
            # free list (the WAL keeps the old pages only until its next checkpoint, forced here).
            conn.execute("PRAGMA secure_delete = ON")
            # One autocommit statement: the history goes with the session (ON DELETE CASCADE).
            cursor = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return cursor.rowcount > 0

        return await self._call("delete session", work, write=True)

    async def append(self, session_id: str, entry: HistoryEntry) -> int:
        from term2.domain.history import entry_key

        values = (session_id, entry_key(entry), encode_entry(entry), session_id)

        def work(conn: sqlite3.Connection) -> int:
            # One autocommit statement: the existence check and the insert
            # are a single committed transaction.
            cursor = conn.execute(
                "INSERT INTO history (session_id, key, body)"
                " SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)",
                values,
            )
            if cursor.rowcount == 0:
                raise NotFound(f"session {session_id!r} does not exist")
            return int(cursor.lastrowid or 0)

        return await self._call("append history", work, write=True)

    async def history(self, session_id: str) -> AsyncIterator[HistoryEntry]:
        last_seqs, _ = await self._plan(session_id)
        for start in range(0, len(last_seqs), HISTORY_BATCH):
            for entry in await self._batch(last_seqs[start : start + HISTORY_BATCH], {}):
                yield entry

    async def appended(
        self, session_id: str, after: int, known: Mapping[int, HistoryEntry] | None = None
    ) -> tuple[list[HistoryEntry], int]:
        mine = known or {}
        if after <= 0:
            last_seqs, reached = await self._plan(session_id)
            entries: list[HistoryEntry] = []
            for start in range(0, len(last_seqs), HISTORY_BATCH):
                entries += await self._batch(last_seqs[start : start + HISTORY_BATCH], mine)
            return entries, reached

        def tail(conn: sqlite3.Connection) -> tuple[list[HistoryEntry], int]:
            rows = conn.execute(_TAIL_SQL, (session_id, after)).fetchall()
            reached = int(rows[-1][0]) if rows else after
            return [_entry(seq, body, mine) for seq, body in rows], reached

        return await self._call("read history", tail)

    async def _plan(self, session_id: str) -> tuple[list[int], int]:
        """The compacted history's rows (the last snapshot of each key, in first-seen order) and the position read.

        The position first, then the plan up to it, in one call: an append in between is read next time.
        """

        def plan(conn: sqlite3.Connection) -> tuple[list[int], int]:
            (reached,) = conn.execute(_LAST_SEQ_SQL, (session_id,)).fetchone()
            rows = conn.execute(_COMPACTION_PLAN_SQL, (session_id, reached or 0))
            return [seq for (seq,) in rows], int(reached or 0)

        return await self._call("read history", plan)

    async def _batch(self, seqs: list[int], known: Mapping[int, HistoryEntry]) -> list[HistoryEntry]:
        return await self._call("read history", partial(_load_bodies, seqs, known))

    async def list(self, cwd: str | None, cursor: str | None, limit: int) -> SessionPage:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")

        def work(conn: sqlite3.Connection) -> SessionPage:
            from term2.adapters.store.cursor import Keyset

            signer = self._signer_locked()
            params: dict[str, object] = {"limit": limit + 1, "cwd": cwd}
            if cursor is not None:
                after = signer.open(cwd, cursor)
                params.update(u=after.updated_at_us, i=after.session_id)
            sql = _LIST_SQL[(cwd is not None, cursor is not None)]
            rows = conn.execute(sql, params).fetchall()
            page = tuple(_session_from_row(row) for row in rows[:limit])
            next_cursor = None
            if len(rows) > limit:
                updated_at = rows[limit - 1][5]
                next_cursor = signer.issue(cwd, Keyset(updated_at, page[-1].session_id))
            return SessionPage(sessions=page, next_cursor=next_cursor)

        return await self._call("list sessions", work)

    async def aclose(self) -> None:
        """Close the connection; a later call would reopen it."""

        def close() -> None:
            with self._lock:
                self._drop_locked()

        await anyio.to_thread.run_sync(close)


def _load_bodies(seqs: list[int], known: Mapping[int, HistoryEntry], conn: sqlite3.Connection) -> list[HistoryEntry]:
    placeholders = ",".join("?" * len(seqs))
    bodies = dict(conn.execute(f"SELECT seq, body FROM history WHERE seq IN ({placeholders})", seqs))
    return [_entry(seq, bodies[seq], known) for seq in seqs if seq in bodies]


def _entry(seq: int, body: str, known: Mapping[int, HistoryEntry]) -> HistoryEntry:
    """What the caller appended itself is given back as it was, not decoded again (the decoder is pydantic's
    schema, which a process that only wrote need not build: ADR 0053)."""
    entry = known.get(seq)
    return entry if entry is not None else decode_entry(body)
