"""Contract for every SessionStore adapter: the same suite runs against each.

The in-memory store exists so use-case tests can run without a disk; this
suite is what makes that substitution honest.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from term2.adapters.store import InMemorySessionStore, SqliteSessionStore
from term2.adapters.store.codec import decode_entry, encode_entry
from term2.domain.content import EmbeddedResource, ImageBlock, ResourceLink, TextBlock
from term2.domain.errors import InvalidInput, NotFound
from term2.domain.history import (
    AgentMessage,
    AgentThought,
    DiffOutput,
    HistoryEntry,
    Location,
    Plan,
    PlanEntry,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolKind,
    ToolStatus,
    UserMessage,
    compact,
)
from term2.domain.images import Image
from term2.domain.session import Session, SessionState
from term2.domain.transcript import ChatMessage, ContextCompaction, ModelMessage, ReasoningBlock, ToolCallRequest
from term2.domain.usage import TokenUsage, TurnUsage
from term2.ports.session_store import InvalidCursor, SessionStore

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


StoreFactory = Callable[[], SessionStore]


@pytest.fixture(params=["memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory, so tests can open a second, independent store of the same kind."""
    counter = iter(range(1_000))

    def factory() -> SessionStore:
        if request.param == "memory":
            return InMemorySessionStore()
        return SqliteSessionStore(tmp_path / f"state{next(counter)}" / "sessions.sqlite3")

    return factory


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[SessionStore]:
    s = make_store()
    yield s
    await s.aclose()


def session(sid: str, cwd: str = "/work/a", minutes: int = 0, **kw: object) -> Session:
    at = T0 + timedelta(minutes=minutes)
    return Session(session_id=sid, cwd=cwd, created_at=at, updated_at=at, **kw)  # type: ignore[arg-type]


async def collect(it: AsyncIterator[HistoryEntry]) -> list[HistoryEntry]:
    return [entry async for entry in it]


async def all_pages(store: SessionStore, cwd: str | None, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await store.list(cwd, cursor, limit)
        pages.append([s.session_id for s in page.sessions])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def tool(tid: str, status: ToolStatus, *content: object) -> ToolCall:
    return ToolCall(
        tool_call_id=tid,
        title=f"run {tid}",
        kind=ToolKind.EXECUTE,
        status=status,
        raw_input={"command": "ls -la", "nested": {"n": [1, 2.5, None, True]}},
        content=tuple(content),  # type: ignore[arg-type]
        locations=(Location("/work/a/x.py", 3), Location("/work/a/y.py")),
    )


EVERY_VARIANT: list[HistoryEntry] = [
    UserMessage(
        "u1",
        (
            TextBlock("fix the bug ✓"),
            ResourceLink("file:///work/a/main.py", "main.py"),
            EmbeddedResource("file:///work/a/b%20c.py", text="x = 1\n", mime_type="text/x-python"),
            EmbeddedResource("file:///work/a/logo.png", blob="iVBORw0KGgo=", mime_type="image/png"),
            EmbeddedResource("zed:///agent/rules/1", text=""),
        ),
    ),
    AgentMessage("a1", "Looking at it.\nLine two."),
    AgentThought("th1", "maybe the loop"),
    tool("t-diff", ToolStatus.COMPLETED, DiffOutput("/work/a/new.py", None, "print(1)\n")),
    tool("t-diff2", ToolStatus.FAILED, DiffOutput("/work/a/x.py", "a\n", "b\n")),
    tool(
        "t-term",
        ToolStatus.IN_PROGRESS,
        TerminalOutput("term-1", "pytest -q", "/work/a", "..F\n", 1, None),
        TerminalOutput("term-2", "sleep 9", "/work/a", signal="SIGKILL"),
    ),
    tool("t-text", ToolStatus.CANCELLED, TextOutput("plain result")),
    ToolCall("t-bare", "think", ToolKind.THINK, ToolStatus.PENDING),
    Plan(
        "p1",
        (
            PlanEntry("read code", "high", "completed"),
            PlanEntry("write test", "medium", "in_progress"),
            PlanEntry("ship"),
        ),
    ),
]


# -- sessions --------------------------------------------------------------


async def test_create_get_round_trip_with_tz_aware_datetimes(
    store: SessionStore,
) -> None:
    plus2 = timezone(timedelta(hours=2))
    created = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=plus2)
    original = Session(
        "s1",
        "/work/a",
        created,
        created + timedelta(seconds=1),
        "title",
        SessionState.RUNNING,
    )
    await store.create(original)

    got = await store.get("s1")

    assert got == original  # same instants
    assert got is not None
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.updated_at.utcoffset() == timedelta(0)
    assert got.created_at.tzinfo is not None
    assert (got.title, got.state, got.cwd) == ("title", SessionState.RUNNING, "/work/a")


async def test_get_unknown_session_is_none(store: SessionStore) -> None:
    assert await store.get("nope") is None


async def test_save_persists_title_state_and_updated_at(store: SessionStore) -> None:
    await store.create(session("s1"))
    later = T0 + timedelta(hours=1)
    await store.save(session("s1").titled_from("hello there").with_state(SessionState.CLOSED).touched(later))

    got = await store.get("s1")

    assert got is not None
    assert (got.title, got.state, got.updated_at, got.created_at) == (
        "hello there",
        SessionState.CLOSED,
        later,
        T0,
    )


async def test_additional_directories_are_kept_in_order_and_replaced_by_a_save(store: SessionStore) -> None:
    await store.create(session("s1", additional_directories=("/work/lib", "/work/docs")))
    got = await store.get("s1")
    assert got is not None and got.additional_directories == ("/work/lib", "/work/docs")
    listed = (await store.list("/work/a", None, 10)).sessions
    assert [s.additional_directories for s in listed] == [("/work/lib", "/work/docs")]
    await store.save(got.with_directories(()))
    again = await store.get("s1")
    assert again is not None and again.additional_directories == ()


async def test_save_unknown_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFound):
        await store.save(session("ghost"))


async def test_delete_removes_the_session_and_its_history_and_ignores_unknown_ids(store: SessionStore) -> None:
    """`term2 exec`'s session whose turn no model answered is removed whole (ADR 0045)."""
    await store.create(session("s1"))
    await store.create(session("s2", minutes=1))
    await store.append("s1", UserMessage("u1", (TextBlock("hi"),)))
    await store.delete("s1")
    await store.delete("ghost")
    assert await store.get("s1") is None
    assert await collect(store.history("s1")) == []
    assert [s.session_id for s in (await store.list(None, None, 10)).sessions] == ["s2"]
    await store.create(session("s1"))  # the id is free again, with no history behind it
    assert await collect(store.history("s1")) == []


async def test_delete_removes_the_session_and_its_history_and_nothing_else(store: SessionStore) -> None:
    """session/delete's port (ADR 0046): gone from get, list and history; later writes are NotFound."""
    await store.create(session("s1"))
    await store.create(session("s2", minutes=1))
    await store.append("s1", UserMessage("u1", (TextBlock("hello"),)))
    await store.append("s2", UserMessage("u2", (TextBlock("kept"),)))
    assert await store.delete("s1") is True
    assert await store.get("s1") is None
    assert [s.session_id for s in (await store.list(None, None, 10)).sessions] == ["s2"]
    assert await collect(store.history("s1")) == []
    with pytest.raises(NotFound):
        await store.append("s1", UserMessage("u3", (TextBlock("late"),)))
    with pytest.raises(NotFound):
        await store.save(session("s1"))
    assert await store.delete("s1") is False
    assert [e.message_id for e in await collect(store.history("s2")) if isinstance(e, UserMessage)] == ["u2"]


async def test_create_twice_is_rejected(store: SessionStore) -> None:
    await store.create(session("s1"))
    with pytest.raises(InvalidInput):
        await store.create(session("s1", cwd="/elsewhere"))
    got = await store.get("s1")
    assert got is not None and got.cwd == "/work/a"


async def test_naive_datetimes_are_rejected(store: SessionStore) -> None:
    naive = datetime(2025, 1, 1)
    with pytest.raises(ValueError, match="timezone-aware"):
        await store.create(Session("s1", "/w", naive, naive))


# -- history ---------------------------------------------------------------


async def test_history_in_order_with_tool_call_snapshots_compacted(
    store: SessionStore,
) -> None:
    await store.create(session("s1"))
    user = UserMessage("u1", (TextBlock("go"),))
    pending = tool("t1", ToolStatus.PENDING)
    running = tool("t1", ToolStatus.IN_PROGRESS, TextOutput("half"))
    done = tool("t1", ToolStatus.COMPLETED, TextOutput("all"))
    reply = AgentMessage("a1", "done")
    for entry in (user, pending, reply, running, done):
        await store.append("s1", entry)

    assert await collect(store.history("s1")) == [user, done, reply]


async def test_history_matches_domain_compaction_across_batches(
    store: SessionStore,
) -> None:
    rng = random.Random(7)
    await store.create(session("s1"))
    written: list[HistoryEntry] = []
    for i in range(700):  # crosses several of the SQLite adapter's read batches
        tid = f"t{rng.randrange(250)}"
        entry: HistoryEntry = (
            tool(tid, rng.choice(list(ToolStatus)), TextOutput(str(i))) if i % 3 else AgentMessage(f"m{i}", f"text {i}")
        )
        written.append(entry)
        await store.append("s1", entry)

    assert await collect(store.history("s1")) == compact(written)


async def test_reading_on_from_a_position_gives_the_whole_history(store: SessionStore) -> None:
    """What a process keeps plus what was appended since, compacted, is the history: no re-reading."""
    rng = random.Random(11)
    await store.create(session("s1"))
    written: list[HistoryEntry] = []
    kept: list[HistoryEntry] = []
    mine: dict[int, HistoryEntry] = {}
    position = 0
    for turn in range(12):
        count = rng.randrange(1, 40)
        for i in range(count):
            tid = f"t{rng.randrange(30)}"  # snapshots of earlier calls reappear in later turns
            entry: HistoryEntry = (
                tool(tid, rng.choice(list(ToolStatus)), TextOutput(f"{turn}.{i}"))
                if i % 2
                else AgentMessage(f"m{turn}.{i}", "x")
            )
            written.append(entry)
            at = await store.append("s1", entry)
            if rng.random() < 0.5:
                mine[at] = entry  # half of it "written by this process": given back, not read again
        new, reached = await store.appended("s1", position, mine)
        assert reached >= position
        assert position == 0 or len(new) == count  # only what came after the position, raw
        position = reached
        kept = compact([*kept, *new])
        assert kept == compact(written) == await collect(store.history("s1"))
    assert await store.appended("s1", position) == ([], position)  # nothing new: nothing read


async def test_append_answers_growing_positions_and_known_snapshots_come_back_as_they_are(
    store: SessionStore,
) -> None:
    """What a caller appended itself (ADR 0053), named by the position `append` answered, is given back as
    that very object, in its place, whether reading on from a position or from the start."""
    await store.create(session("s1"))
    first, second, third = AgentMessage("a", "one"), AgentMessage("b", "two"), AgentMessage("a", "one, edited")
    positions = [await store.append("s1", entry) for entry in (first, second, third)]
    assert positions == sorted(positions) and len(set(positions)) == 3
    mine = {positions[1]: second, positions[2]: third}
    new, reached = await store.appended("s1", positions[0], mine)
    assert reached == positions[2] and new == [second, third]
    assert new[0] is second and new[1] is third
    whole, _ = await store.appended("s1", 0, mine)  # compacted: "a" is its last snapshot, in its first place
    assert whole == [third, second] and whole[0] is third and whole[1] is second


async def test_history_of_unknown_session_is_empty(store: SessionStore) -> None:
    assert await collect(store.history("nope")) == []


async def test_history_is_per_session(store: SessionStore) -> None:
    await store.create(session("s1"))
    await store.create(session("s2"))
    await store.append("s1", AgentMessage("m", "one"))
    await store.append("s2", AgentMessage("m", "two"))

    assert await collect(store.history("s1")) == [AgentMessage("m", "one")]
    assert await collect(store.history("s2")) == [AgentMessage("m", "two")]


async def test_append_to_unknown_session_is_not_found(store: SessionStore) -> None:
    with pytest.raises(NotFound):
        await store.append("ghost", AgentMessage("m", "x"))


async def test_every_history_variant_round_trips(store: SessionStore) -> None:
    await store.create(session("s1"))
    for entry in EVERY_VARIANT:
        await store.append("s1", entry)

    assert await collect(store.history("s1")) == EVERY_VARIANT


async def test_concurrent_async_callers(store: SessionStore) -> None:
    async def worker(n: int) -> None:
        await store.create(session(f"s{n:02}", minutes=n))
        for i in range(5):
            await store.append(f"s{n:02}", AgentMessage(f"m{i}", f"{n}/{i}"))
        await store.list(None, None, 10)

    async with anyio.create_task_group() as tg:
        for n in range(30):
            tg.start_soon(worker, n)

    assert [s for page in await all_pages(store, None, 7) for s in page] == [f"s{n:02}" for n in reversed(range(30))]
    for n in range(30):
        history = await collect(store.history(f"s{n:02}"))
        assert history == [AgentMessage(f"m{i}", f"{n}/{i}") for i in range(5)]


# -- listing ---------------------------------------------------------------


async def test_list_is_newest_first_by_updated_at_then_id(store: SessionStore) -> None:
    await store.create(session("old", minutes=0))
    await store.create(session("new", minutes=10))
    await store.create(session("tie-a", minutes=5))
    await store.create(session("tie-b", minutes=5))
    await store.save(session("old").touched(T0 + timedelta(minutes=20)))

    page = await store.list(None, None, 10)

    assert [s.session_id for s in page.sessions] == ["old", "new", "tie-b", "tie-a"]
    assert page.next_cursor is None


async def test_list_filters_by_cwd(store: SessionStore) -> None:
    await store.create(session("a1", cwd="/work/a", minutes=1))
    await store.create(session("b1", cwd="/work/b", minutes=2))
    await store.create(session("a2", cwd="/work/a", minutes=3))
    await store.create(session("ab", cwd="/work/a/b", minutes=4))

    page = await store.list("/work/a", None, 10)

    assert [s.session_id for s in page.sessions] == ["a2", "a1"]
    assert [s.session_id for s in (await store.list("/nowhere", None, 10)).sessions] == []


@pytest.mark.parametrize(("count", "limit"), [(23, 5), (10, 5), (1, 1), (0, 3), (7, 50)])
async def test_pagination_has_no_duplicates_or_losses(store: SessionStore, count: int, limit: int) -> None:
    for n in range(count):
        # Several sessions share a timestamp so the id tie-breaker matters.
        await store.create(session(f"s{n:03}", cwd="/w" if n % 2 else "/v", minutes=n // 3))
    expected = sorted(
        (f"s{n:03}" for n in range(count)),
        key=lambda sid: (int(sid[1:]) // 3, sid),
        reverse=True,
    )

    pages = await all_pages(store, None, limit)

    assert [sid for page in pages for sid in page] == expected
    assert all(len(page) == limit for page in pages[:-1])
    assert len(pages) == max(1, -(-count // limit))
    filtered = [sid for page in await all_pages(store, "/w", 2) for sid in page]
    assert filtered == [sid for sid in expected if int(sid[1:]) % 2]


async def test_pagination_is_stable_under_concurrent_inserts(
    store: SessionStore,
) -> None:
    for n in range(10):
        await store.create(session(f"s{n}", minutes=n))
    first = await store.list(None, None, 4)
    await store.create(session("newest", minutes=100))  # lands before the cursor
    assert first.next_cursor is not None

    rest = await store.list(None, first.next_cursor, 100)

    assert [s.session_id for s in first.sessions] == ["s9", "s8", "s7", "s6"]
    assert [s.session_id for s in rest.sessions] == ["s5", "s4", "s3", "s2", "s1", "s0"]


async def test_list_rejects_a_non_positive_limit(store: SessionStore) -> None:
    with pytest.raises(ValueError):
        await store.list(None, None, 0)


# -- cursors ---------------------------------------------------------------


async def _cursor(store: SessionStore, cwd: str | None = None) -> str:
    for n in range(6):
        await store.create(session(f"s{n}", minutes=n))
    page = await store.list(cwd, None, 2)
    assert page.next_cursor is not None
    return page.next_cursor


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


async def test_forged_cursor_is_rejected(store: SessionStore) -> None:
    cursor = await _cursor(store)
    payload, _, tag = cursor.partition(".")
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    decoded[0] += 60_000_000  # move the position: would re-list sessions
    forged = f"{_b64(json.dumps(decoded).encode())}.{tag}"

    with pytest.raises(InvalidCursor):
        await store.list(None, forged, 2)
    with pytest.raises(InvalidCursor):
        await store.list(None, f"{payload}.{_b64(b'0' * 32)}", 2)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        ".",
        "garbage",
        "a.b.c",
        "!!!!.????",
        "eyJ4IjoxfQ",
        "x" * 10_000,
        "é.é",
        "bnVsbA.bnVsbA",
    ],
)
async def test_malformed_cursor_is_rejected(store: SessionStore, bad: str) -> None:
    await _cursor(store)
    with pytest.raises(InvalidCursor):
        await store.list(None, bad, 2)


async def test_cursor_for_another_cwd_filter_is_rejected(store: SessionStore) -> None:
    unfiltered = await _cursor(store)
    filtered = (await store.list("/work/a", None, 2)).next_cursor
    assert filtered is not None

    with pytest.raises(InvalidCursor):
        await store.list("/work/a", unfiltered, 2)
    with pytest.raises(InvalidCursor):
        await store.list(None, filtered, 2)
    with pytest.raises(InvalidCursor):
        await store.list("/work/b", filtered, 2)
    assert len((await store.list("/work/a", filtered, 2)).sessions) == 2


async def test_cursor_from_another_store_is_rejected(store: SessionStore, make_store: StoreFactory) -> None:
    other = make_store()
    try:
        cursor = await _cursor(other)
        await _cursor(store)
        with pytest.raises(InvalidCursor):
            await store.list(None, cursor, 2)
    finally:
        await other.aclose()


# -- codec -----------------------------------------------------------------

_text = st.text(max_size=40)
# What a tool call's arguments can hold: JSON values. JSON has no NaN or infinity (the store writes
# them as null, like the wire does), so they are not generated.
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_output = st.one_of(
    st.builds(TextOutput, _text),
    st.builds(DiffOutput, _text, st.none() | _text, _text),
    st.builds(
        TerminalOutput,
        _text,
        _text,
        _text,
        _text,
        st.none() | st.integers(),
        st.none() | _text,
    ),
)
_entry = st.one_of(
    st.builds(
        UserMessage,
        _text,
        st.lists(
            st.builds(TextBlock, _text)
            | st.builds(ResourceLink, _text, _text)
            | st.builds(EmbeddedResource, _text, st.none() | _text, st.none() | _text, st.none() | _text)
            | st.builds(ImageBlock, _text, _text, st.none() | _text, st.booleans())
        ).map(tuple),
    ),
    st.builds(AgentMessage, _text, _text),
    st.builds(AgentThought, _text, _text),
    st.builds(
        ToolCall,
        _text,
        _text,
        st.sampled_from(ToolKind),
        st.sampled_from(ToolStatus),
        st.dictionaries(_text, _json, max_size=3),
        st.lists(_output, max_size=3).map(tuple),
        st.lists(st.builds(Location, _text, st.none() | st.integers())).map(tuple),
    ),
    st.builds(
        Plan,
        _text,
        st.lists(
            st.builds(
                PlanEntry,
                _text,
                st.sampled_from(["high", "medium", "low"]),
                st.sampled_from(["pending", "in_progress", "completed"]),
            ),
            max_size=3,
        ).map(tuple),
    ),
    # What the model is shown and what each turn spent: recorded beside the client's history.
    st.builds(
        ModelMessage,
        _text,
        st.builds(
            ChatMessage,
            st.sampled_from(["system", "user", "assistant", "tool"]),
            _text,
            st.lists(st.builds(ToolCallRequest, _text, _text, _text), max_size=2).map(tuple),
            st.none() | _text,
            st.lists(
                st.builds(
                    ReasoningBlock,
                    st.sampled_from(["thinking", "redacted_thinking"]),
                    _text,
                    st.none() | _text,
                    st.sampled_from(["anthropic", "openai"]),
                ),
                max_size=2,
            ).map(tuple),
            st.lists(st.builds(Image, _text, _text), max_size=2).map(tuple),
        ),
    ),
    st.builds(
        ContextCompaction,
        _text,
        st.none() | _text,
        st.none() | _text,
        st.lists(_text, max_size=3).map(tuple),
    ),
    st.builds(
        TurnUsage,
        _text,
        st.builds(TokenUsage, *[st.integers(0, 10**9)] * 5),
        st.none() | st.floats(0, 1e6, allow_nan=False),
    ),
)


@given(_entry)
def test_codec_round_trips_any_entry(entry: HistoryEntry) -> None:
    assert decode_entry(encode_entry(entry)) == entry


@given(_entry)
def test_codec_writes_what_the_schema_writes(entry: HistoryEntry) -> None:
    """Records are written without the schema (ADR 0053): byte for byte what pydantic's adapter would write."""
    from term2.adapters.store.codec import _entries

    assert encode_entry(entry) == _entries().dump_json(entry).decode()


def test_codec_writes_every_variant_as_the_schema_does() -> None:
    from term2.adapters.store.codec import _entries

    for entry in EVERY_VARIANT:
        assert encode_entry(entry) == _entries().dump_json(entry).decode()


def test_codec_resolves_nested_unions_by_their_tag() -> None:
    entry = tool("t", ToolStatus.COMPLETED, TextOutput("x"), DiffOutput("p", None, "n"))
    document = json.loads(encode_entry(entry))
    assert [c["kind"] for c in document["content"]] == ["text", "diff"]
    # A text body under the diff tag must not pass.
    document["content"][0]["kind"] = "diff"
    with pytest.raises(ValueError):
        decode_entry(json.dumps(document))
