"""Opening and migrating the SQLite session database.

Pragmas, and why:

* ``journal_mode=WAL``: readers never block the writer and vice versa, so a
  second term2 process listing sessions does not stall a running prompt, and
  a killed writer leaves at most an uncommitted WAL tail that is ignored on
  the next open.
* ``synchronous=NORMAL``: in WAL mode a commit is written to the WAL before
  ``append`` returns, so it survives the process being killed (the failure
  the port asks us to tolerate); only an OS crash or power cut can lose the
  last few commits, and never corrupts the file. ``FULL`` would add an fsync
  per append, and appends are frequent (every tool-call status change).
* ``busy_timeout`` of 10 s: concurrent processes queue behind each other's
  short write transactions instead of failing with "database is locked".
* ``foreign_keys=ON``: history rows cannot outlive their session.

The schema version lives in ``PRAGMA user_version``; migrations run inside
``BEGIN IMMEDIATE`` and re-read the version under the lock, so two processes
opening a fresh file at once do not both try to create it.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

SCHEMA_VERSION: Final = 4
BUSY_TIMEOUT_S: Final = 10.0
SECRET_KEY: Final = "cursor_secret"

_SCHEMA_V1: Final = (
    """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value BLOB NOT NULL
    )
    """,
    """
    CREATE TABLE sessions (
        id         TEXT PRIMARY KEY,
        cwd        TEXT NOT NULL,
        title      TEXT,
        state      TEXT NOT NULL,
        created_at INTEGER NOT NULL,  -- microseconds since the epoch, UTC
        updated_at INTEGER NOT NULL   -- microseconds since the epoch, UTC
    )
    """,
    "CREATE INDEX sessions_by_updated ON sessions (updated_at, id)",
    "CREATE INDEX sessions_by_cwd_updated ON sessions (cwd, updated_at, id)",
    # seq is the rowid: assigned max+1 on insert and never reused while the
    # newest row exists, so it orders appends within a session without a
    # per-session counter to keep consistent across processes.
    """
    CREATE TABLE history (
        seq        INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
        key        TEXT NOT NULL,
        body       TEXT NOT NULL  -- JSON, see codec.py
    )
    """,
    # Covering index for compaction: (first seq, last seq) per key without
    # touching the bodies.
    "CREATE INDEX history_by_key ON history (session_id, key, seq)",
)
# Version 2: the model and effort a session runs with (ADR 0043); NULL in older rows: the launcher's.
_SCHEMA_V2: Final = (
    "ALTER TABLE sessions ADD COLUMN model TEXT",
    "ALTER TABLE sessions ADD COLUMN effort TEXT",
)
# Version 3: the approval mode (ADR 0044); NULL in older rows: ask.
_SCHEMA_V3: Final = ("ALTER TABLE sessions ADD COLUMN mode TEXT",)
# Version 4: the additional directories the editor last opened the session with, a JSON array; NULL: none.
_SCHEMA_V4: Final = ("ALTER TABLE sessions ADD COLUMN roots TEXT",)


class SchemaTooNew(sqlite3.DatabaseError):
    """The file was written by a newer term2 whose schema we do not know."""


def open_database(path: Path) -> tuple[sqlite3.Connection, bytes]:
    """Open (creating if needed) the database at ``path``; return it and the cursor secret.

    Raises ``OSError`` or ``sqlite3.Error``; the caller maps them to the
    domain's StoreUnavailable.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _opening_alone(path):
        return _open(path)


@contextmanager
def _opening_alone(path: Path) -> Iterator[None]:
    """One process at a time through creation, WAL switch and migration.

    Two processes opening a new, empty database at once can both hold a shared
    lock while each wants to write the first page; SQLite then answers one of
    them "database is locked" at once, without waiting (it would deadlock).
    An advisory lock beside the database serialises that short first step. A
    store on a read-only folder has no lock file and needs none: it cannot be
    created or migrated there anyway.
    """
    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _open(path: Path) -> tuple[sqlite3.Connection, bytes]:
    _create_private(path)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot enable WAL journal (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn)
        secret = _load_secret(conn)
        _tighten(path)
    except BaseException:
        conn.close()
        raise
    return conn, secret


def _create_private(path: Path) -> None:
    """Create the database file 0600 before SQLite opens it.

    SQLite gives its ``-wal`` and ``-shm`` files the database file's mode, so a
    file created by SQLite itself (0644 under the usual umask) and tightened
    afterwards leaves the journal world-readable: transcripts hold whatever
    the model read.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def _tighten(path: Path) -> None:
    """0600 on the database and its journal files (older term2 versions left 0644 ones)."""
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        try:
            if target.stat().st_mode & 0o077:
                os.chmod(target, 0o600)
        except FileNotFoundError:
            continue
        except PermissionError:
            continue  # not ours (a read-only share): opening read-only still works


def is_writable(conn: sqlite3.Connection) -> bool:
    """Whether this connection can write.

    SQLite silently falls back to a read-only open when the file cannot be
    opened for writing (immutable file, read-only mount). Such a connection
    stays read-only even after the condition is fixed, so the store must know
    to reopen it before the next write instead of failing that write too.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        # BEGIN alone succeeds on a read-only file in WAL mode; a real
        # (rolled back) page write is what fails.
        conn.execute("UPDATE meta SET value = value WHERE key = ?", (SECRET_KEY,))
    except sqlite3.OperationalError as exc:
        if "readonly" in str(exc) or "read-only" in str(exc):
            return False
        raise
    finally:
        conn.execute("ROLLBACK")
    return True


def _user_version(conn: sqlite3.Connection) -> int:
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    return int(version)


def _migrate(conn: sqlite3.Connection) -> None:
    if _user_version(conn) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _user_version(conn)
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(f"schema version {version} is newer than this term2 supports ({SCHEMA_VERSION})")
        if version == 0:
            for statement in _SCHEMA_V1:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                (SECRET_KEY, secrets.token_bytes(32)),
            )
        if version < 2:
            for statement in _SCHEMA_V2:
                conn.execute(statement)
        if version < 3:
            for statement in _SCHEMA_V3:
                conn.execute(statement)
        if version < 4:
            for statement in _SCHEMA_V4:
                conn.execute(statement)
        if version < SCHEMA_VERSION:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _load_secret(conn: sqlite3.Connection) -> bytes:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (SECRET_KEY,)).fetchone()
    if row is None or not isinstance(row[0], bytes) or len(row[0]) < 16:
        raise sqlite3.DatabaseError("cursor secret missing from meta table")
    return row[0]
