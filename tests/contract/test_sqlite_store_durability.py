"""SQLite-only guarantees: several processes, killed processes, broken disks.

Child processes run ``_WORKER`` with ``sys.executable`` so they are real OS
processes with their own connections, exactly like two term2 instances.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from term2.adapters.store import SqliteSessionStore
from term2.domain.approval import ApprovalMode
from term2.domain.errors import StoreUnavailable
from term2.domain.history import AgentMessage, HistoryEntry, ToolStatus
from term2.domain.session import Session

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 6, 1, tzinfo=UTC)

_WORKER = r"""
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio

from term2.adapters.store import SqliteSessionStore
from term2.domain.content import TextBlock
from term2.domain.history import AgentMessage, ToolCall, ToolKind, ToolStatus, UserMessage
from term2.domain.session import Session


async def bulk(store, prefix, count):
    for i in range(count):
        sid = f"{prefix}-{i:03}"
        now = datetime.now(UTC)
        await store.create(Session(sid, f"/work/{prefix}", now, now))
        await store.append(sid, UserMessage("u", (TextBlock(sid),)))
        for status in (ToolStatus.PENDING, ToolStatus.COMPLETED):
            await store.append(sid, ToolCall("t", "run", ToolKind.EXECUTE, status))
        await store.append(sid, AgentMessage("a", sid))
        if i % 50 == 0:
            await store.list(None, None, 50)


async def stream(store, start):
    filler = "x" * 4000
    i = start
    while True:
        await store.append("victim", AgentMessage(f"m{i:06}", filler))
        sys.stdout.write(f"{i}\n")
        sys.stdout.flush()
        i += 1


async def main():
    mode, path = sys.argv[1], Path(sys.argv[2])
    store = SqliteSessionStore(path)
    if mode == "bulk":
        await bulk(store, sys.argv[3], int(sys.argv[4]))
    else:
        await stream(store, int(sys.argv[3]))
    await store.aclose()


anyio.run(main)
"""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )


def _integrity(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


async def _history(store: SqliteSessionStore, sid: str) -> list[HistoryEntry]:
    return [entry async for entry in store.history(sid)]


# -- (a) several processes -------------------------------------------------


async def test_two_processes_writing_concurrently_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "fresh" / "sessions.sqlite3"  # both race to create the schema
    children = [_spawn("bulk", str(path), prefix, "200") for prefix in ("p1", "p2")]
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err

    _integrity(path)
    store = SqliteSessionStore(path)
    try:
        for prefix in ("p1", "p2"):
            ids: list[str] = []
            cursor: str | None = None
            while True:
                page = await store.list(f"/work/{prefix}", cursor, 64)
                ids += [s.session_id for s in page.sessions]
                if (cursor := page.next_cursor) is None:
                    break
            assert sorted(ids) == [f"{prefix}-{i:03}" for i in range(200)]
            assert len(set(ids)) == 200
        for sid in ("p1-000", "p1-199", "p2-000", "p2-117", "p2-199"):
            history = await _history(store, sid)
            assert [type(e).__name__ for e in history] == [
                "UserMessage",
                "ToolCall",
                "AgentMessage",
            ]
            assert getattr(history[1], "status", None) is ToolStatus.COMPLETED
    finally:
        await store.aclose()


# -- (b) a killed process --------------------------------------------------


def _run_and_kill(path: Path, start: int, kill_after: int) -> list[int]:
    """Start an appender, SIGKILL it mid-stream; return the appends it reported as committed."""
    child = _spawn("stream", str(path), str(start))
    assert child.stdout is not None
    reported: list[int] = []
    for line in child.stdout:
        reported.append(int(line))
        if len(reported) >= kill_after:
            break
    if not reported:
        child.wait(timeout=30)
        pytest.fail(f"appender died early: {child.stderr.read() if child.stderr else ''}")
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    # Read on through the same buffered file: lines it already buffered are reports too
    # (communicate() reads the raw pipe and would drop them, making the test flaky).
    rest = child.stdout.read()
    if child.stderr is not None:
        child.stderr.read()
    assert child.returncode == -signal.SIGKILL
    # Lines the child wrote before dying were written after their commit; a
    # line cut short by the kill is not a report.
    reported += [int(line) for line in rest.splitlines(keepends=True) if line.endswith("\n")]
    return reported


async def test_sigkilled_writer_loses_at_most_the_append_in_flight(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    await store.create(Session("victim", "/work", NOW, NOW))
    await store.aclose()

    present = 0
    for kill_after in (150, 400, 90):  # kill, recover, continue, kill again...
        reported = _run_and_kill(path, present, kill_after)
        assert reported[0] == present

        _integrity(path)
        store = SqliteSessionStore(path)
        try:
            ids = [e.message_id for e in await _history(store, "victim")]  # type: ignore[union-attr]
            await store.append("victim", AgentMessage("probe", "writable again"))
            await store.append("victim", AgentMessage("probe", "replaced"))  # same key
        finally:
            await store.aclose()
        committed = [f"m{i:06}" for i in range(reported[-1] + 1)]
        body = [i for i in ids if i != "probe"]
        assert body[: len(committed)] == committed  # every reported append survived
        assert len(body) - len(committed) <= 1  # at most the one in flight extra
        assert body == [f"m{i:06}" for i in range(len(body))]  # no holes, no junk
        assert ids.count("probe") == (1 if present else 0)  # compacted across rounds
        present = len(body)


# -- (c) unusable locations ------------------------------------------------


async def test_cannot_create_under_a_regular_file_then_recovers(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("I am a file")
    path = blocker / "state" / "sessions.sqlite3"
    store = SqliteSessionStore(path)

    with pytest.raises(StoreUnavailable) as caught:
        await store.create(Session("s1", "/w", NOW, NOW))
    assert str(path) in str(caught.value)
    with pytest.raises(StoreUnavailable):
        await store.get("s1")

    blocker.unlink()  # the condition goes away; the same object recovers
    await store.create(Session("s1", "/w", NOW, NOW))
    assert await store.get("s1") is not None
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert (path.stat().st_mode & 0o777) == 0o600
    await store.aclose()


async def test_corrupt_file_is_reported_then_recovers(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"this is not a database\n" * 512)
    store = SqliteSessionStore(path)

    with pytest.raises(StoreUnavailable) as caught:
        await store.list(None, None, 10)
    assert str(path) in str(caught.value)
    assert "not a database" in str(caught.value)

    path.unlink()
    assert (await store.list(None, None, 10)).sessions == ()
    await store.aclose()


async def test_a_version_1_store_is_migrated_and_keeps_its_sessions(tmp_path: Path) -> None:
    """Schema 2 adds each session's model and effort (ADR 0043); a store term2 wrote before keeps every
    session, which runs the launcher's model (NULL) until one is chosen, and the choice is then kept."""
    from term2.adapters.store import sqlite_schema

    path = tmp_path / "sessions.sqlite3"
    conn = sqlite3.connect(path)
    for statement in sqlite_schema._SCHEMA_V1:
        conn.execute(statement)
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (sqlite_schema.SECRET_KEY, b"k" * 32))
    conn.execute(
        "INSERT INTO sessions (id, cwd, title, state, created_at, updated_at) VALUES ('s1', '/w', 'old', 'idle', 1, 2)"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()

    store = SqliteSessionStore(path)
    old = await store.get("s1")
    assert old is not None and old.title == "old" and (old.model, old.effort) == (None, None)
    assert old.mode is ApprovalMode.ASK  # schema 3 (ADR 0044): a session from before modes asks
    assert old.additional_directories == ()  # schema 4 (ADR 0051): a session from before them has none
    await store.save(old.with_model("anthropic/claude-sonnet-4-5", "high").with_mode(ApprovalMode.AUTO))
    await store.aclose()
    again = SqliteSessionStore(path)
    kept = await again.get("s1")
    assert kept is not None and (kept.model, kept.effort) == ("anthropic/claude-sonnet-4-5", "high")
    assert kept.mode is ApprovalMode.AUTO
    assert [s.session_id for s in (await again.list(None, None, 10)).sessions] == ["s1"]
    await again.aclose()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (sqlite_schema.SCHEMA_VERSION,)
    conn.close()


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()

    with pytest.raises(StoreUnavailable, match="newer"):
        await SqliteSessionStore(path).get("x")


def _chattr_works(probe: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    probe.write_text("probe")
    ok = subprocess.run(["chattr", "+i", str(probe)], check=False, capture_output=True).returncode == 0
    if ok:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    return ok


@contextmanager
def _immutable(*paths: Path) -> Iterator[None]:
    subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


async def test_database_turning_read_only_is_reported_then_recovers(
    tmp_path: Path,
) -> None:
    """Make the files immutable under a live store, then lift it.

    Tests run as root, which ignores permission bits, so chmod cannot make a
    file read-only here; the immutable attribute (``chattr +i``) binds root
    too. It is applied to the database and its WAL, not to the ``-shm``
    file: that one is memory-mapped, and making a mapped file immutable
    kills the process with SIGBUS rather than failing a write.
    """
    if not _chattr_works(tmp_path / "probe"):
        pytest.skip("chattr +i is not available on this filesystem")
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    await store.create(Session("s1", "/w", NOW, NOW))
    await store.append("s1", AgentMessage("before", "ok"))

    with _immutable(path, path.with_name(path.name + "-wal")):
        with pytest.raises(StoreUnavailable) as live:
            await store.append("s1", AgentMessage("lost-1", "x"))  # fails on the open connection
        assert str(path) in str(live.value)
        with pytest.raises(StoreUnavailable) as reopened:
            await store.append("s1", AgentMessage("lost-2", "x"))  # fails after reopening
        assert "readonly" in str(reopened.value) or "read-only" in str(reopened.value)
        assert await store.get("s1") is not None  # reads still work meanwhile

    await store.append("s1", AgentMessage("after", "ok"))
    ids = [e.message_id for e in await _history(store, "s1")]  # type: ignore[union-attr]
    assert ids == ["before", "after"]
    await store.aclose()
    _integrity(path)


async def test_data_and_cursors_survive_reopening(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    first = SqliteSessionStore(path)
    for n in range(5):
        at = datetime(2025, 1, 1, n, tzinfo=UTC)
        await first.create(Session(f"s{n}", "/w", at, at))
    await first.append("s3", AgentMessage("m", "kept"))
    page = await first.list(None, None, 2)
    await first.aclose()

    second = SqliteSessionStore(path)
    try:
        assert page.next_cursor is not None
        rest = await second.list(None, page.next_cursor, 10)
        assert [s.session_id for s in rest.sessions] == ["s2", "s1", "s0"]
        assert await _history(second, "s3") == [AgentMessage("m", "kept")]
    finally:
        await second.aclose()


async def test_journal_files_are_private_from_the_first_write(tmp_path: Path) -> None:
    """The -wal and -shm files hold recent transcript pages: 0600 like the database, under any umask."""
    path = tmp_path / "state" / "sessions.sqlite3"
    old = os.umask(0o022)
    try:
        store = SqliteSessionStore(path)
        await store.create(Session("s1", "/w", NOW, NOW))
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
    assert set(modes) >= {"sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"}, modes
    assert set(modes.values()) == {0o600}, modes
    await store.aclose()


async def test_journal_files_left_world_readable_are_tightened(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    store = SqliteSessionStore(path)
    await store.create(Session("s1", "/w", NOW, NOW))
    await store.aclose()
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        if target.exists():
            target.chmod(0o644)
    reopened = SqliteSessionStore(path)
    assert await reopened.get("s1") is not None
    for suffix in ("", "-wal", "-shm"):
        target = Path(f"{path}{suffix}")
        if target.exists():
            assert target.stat().st_mode & 0o777 == 0o600, target
    await reopened.aclose()
