"""A turn reads back what its own process recorded without decoding it (ADR 0053).

Decoding a stored entry needs pydantic's schema (~55 ms to build); a process that has only written
history — every session's first turns — never needs it. Run against the real SQLite store, with its
decoder replaced by one that fails, so any decode shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.adapters.store import sqlite_store
from term2.adapters.store.sqlite_store import SqliteSessionStore
from term2.app.sessions import KnownHistory
from term2.domain.content import TextBlock
from term2.domain.history import AgentMessage, HistoryEntry, UserMessage
from tests.contract.test_session_store_contract import session

pytestmark = pytest.mark.anyio


class Decoded(Exception):
    pass


def no_decoding(document: str | bytes) -> HistoryEntry:
    raise Decoded(str(document)[:40])


async def test_what_this_process_wrote_is_read_back_undecoded_and_only_that(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.sqlite3")
    try:
        await store.create(session("s1"))
        monkeypatch.setattr(sqlite_store, "decode_entry", no_decoding)
        known = KnownHistory()
        assert await known.read(store, "s1") == []
        turn = [UserMessage("u1", (TextBlock("hi"),)), AgentMessage("a1", "hello"), AgentMessage("a1", "hello!")]
        for entry in turn:
            known.wrote(await store.append("s1", entry), entry)
        assert await known.read(store, "s1") == [turn[0], turn[2]]  # compacted, nothing decoded
        assert await known.read(store, "s1") == [turn[0], turn[2]]  # nothing new: nothing read
        await store.append("s1", AgentMessage("a2", "from another process"))  # not written through `known`
        with pytest.raises(Decoded):
            await known.read(store, "s1")
    finally:
        await store.aclose()
