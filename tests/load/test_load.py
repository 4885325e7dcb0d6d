"""Issue 7, part 4: load on a real `term2 acp` (litellm included, fake provider).

* 50 sessions of one process streaming at once: no cross-talk, no lost chunk,
  one idle end_turn each, and fair progress.
* Two processes on one store, each running turns in its own sessions at the
  same time: both histories complete, the database intact.
* A 10,000-entry session replayed from the start: everything arrives before
  the response, huge outputs are cut with the marker, peak RSS stays bounded.

Figures are printed (run with `-s` to see them).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from term2.adapters.store.sqlite_store import SqliteSessionStore
from term2.app.clock import new_session_id
from term2.domain.content import TextBlock
from term2.domain.history import (
    AgentMessage,
    HistoryEntry,
    TextOutput,
    ToolCall,
    ToolKind,
    ToolStatus,
    UserMessage,
)
from term2.domain.session import Session
from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, default_reply, start_fake_llm
from tests.support.acp_process import AcpProcess, Message
from tests.support.schemas import validate_all

WARM_UP_TIMEOUT = 240.0
RSS_BOUND_MB = 400


# --------------------------------------------------------------------------- helpers


def paced_echo(server: FakeLLMServer, chunk_delay: float, gather: int | None = None) -> None:
    """Make the fake's default reply ("echo: <last user text>", one chunk per word) stream slowly.

    The reply is chosen from the request's own body, so each session's text is
    deterministic no matter in which order the 50 requests reach the server
    (a pushed queue would hand replies out in arrival order instead).
    With `gather`, every stream holds after its first chunk until `gather` streams have sent theirs.
    """
    extra: dict[str, Any] = {"chunk_delay": chunk_delay}
    if gather is not None:
        extra["gather"] = {"name": f"gather-{id(server)}-{gather}", "count": gather}
    server.responder = lambda request: {**default_reply(request.body), **extra}


def make_workspace(base: Path) -> Path:
    root = base / "project"
    root.mkdir(parents=True, exist_ok=True)
    return root


def warm(client: AcpProcess, workspace: Path) -> None:
    client.initialize(2)
    client.prompt_v2(client.new_session(workspace), "warm up", timeout=WARM_UP_TIMEOUT)


def prompt(client: AcpProcess, sid: str, text: str) -> int:
    return client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})


def texts(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def integrity(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def finish(*clients: AcpProcess) -> None:
    for client in clients:
        assert client.close(timeout=30) == 0, client.stderr()[-3000:]
        client.validate_schemas()


def shape(value: Any) -> Any:
    """A message's structure with every leaf replaced by its type (strings by whether they are long)."""
    if isinstance(value, dict):
        return tuple(sorted((k, shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(shape(v) for v in value)
    if isinstance(value, str):
        return "long" if len(value) > 1024 else "str"
    return type(value).__name__


def finish_sampled(client: AcpProcess) -> int:
    """Like `finish`, but schema-check one update of each shape: jsonschema takes some
    milliseconds a message, and 10,000 replayed updates come in a handful of shapes.
    Every stdout line is still checked to be JSON-RPC. Returns how many were validated."""
    assert client.close(timeout=30) == 0, client.stderr()[-3000:]
    client.assert_stdout_is_protocol()
    seen: set[Any] = set()
    sample = []
    for direction, message in client.transcript:
        if direction == "agent" and message.get("method") == "session/update":
            key = shape(message)
            if key in seen:
                continue
            seen.add(key)
        sample.append((direction, message))
    assert client.version is not None
    validate_all(client.version, sample)
    return len(sample)


@contextlib.contextmanager
def killing(*clients: AcpProcess) -> Iterator[None]:
    try:
        yield
    finally:
        for client in clients:
            client.kill()


class TurnTracker:
    """Reads one process's messages until every prompt it was given is idle; keeps per-session facts."""

    def __init__(self, client: AcpProcess) -> None:
        self.client = client
        self.position = 0
        self.chunks: dict[str, list[dict[str, Any]]] = {}
        self.first_chunk: dict[str, tuple[int, float]] = {}
        self.idles: dict[str, list[tuple[int, float, dict[str, Any]]]] = {}
        self.last_update: dict[str, dict[str, Any]] = {}
        self.acks: set[int] = set()

    def run(self, sids: list[str], request_ids: list[int], timeout: float) -> None:
        waiting = set(sids)
        deadline = time.monotonic() + timeout
        while waiting or not set(request_ids) <= self.acks:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{len(waiting)} sessions never went idle"
            self._take(self.client.next(remaining), waiting)

    def _take(self, message: Message, waiting: set[str]) -> None:
        self.position += 1
        now = time.monotonic()
        if "method" not in message:
            assert "result" in message, message
            self.acks.add(message["id"])
            return
        assert message["method"] == "session/update", message
        sid = message["params"]["sessionId"]
        update = message["params"]["update"]
        self.last_update[sid] = update
        if update["sessionUpdate"] == "agent_message_chunk":
            self.chunks.setdefault(sid, []).append(update)
            self.first_chunk.setdefault(sid, (self.position, now))
        elif update["sessionUpdate"] == "state_update" and update["state"] == "idle":
            self.idles.setdefault(sid, []).append((self.position, now, update))
            waiting.discard(sid)

    def text(self, sid: str) -> str:
        return "".join(texts(c["content"]) for c in self.chunks.get(sid, []))


# --------------------------------------------------------------------------- 50 sessions at once

SESSIONS = 50
WORDS = 30
CHUNK_DELAY = 0.15  # a stream lasts about 5 s after the 50 streams' first chunks (a barrier, paced_echo)


def test_fifty_sessions_stream_at_once_without_cross_talk(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        paced_echo(llm, CHUNK_DELAY)
        client = AcpProcess(tmp_path, env=llm_env(llm))
        with killing(client):
            warm(client, workspace)
            # Every stream holds after its first chunk until all 50 have sent theirs: the streams are open
            # together by construction, and a term2 that served sessions one after another would never
            # get past the first (the tracker's timeout says so), whatever the machine's speed.
            paced_echo(llm, CHUNK_DELAY, gather=SESSIONS)
            sids = [client.new_session(workspace) for _ in range(SESSIONS)]
            expected = {
                sid: f"session {n:02d}: " + " ".join(f"s{n:02d}w{k:02d}" for k in range(WORDS))
                for n, sid in enumerate(sids)
            }
            before = len(llm.requests)
            started = time.monotonic()
            request_ids = [prompt(client, sid, expected[sid]) for sid in sids]
            tracker = TurnTracker(client)
            tracker.run(sids, request_ids, timeout=180)
            took = time.monotonic() - started

            for n, sid in enumerate(sids):
                assert tracker.text(sid) == "echo: " + expected[sid], f"session {n} got {tracker.text(sid)!r}"
                assert len({c["messageId"] for c in tracker.chunks[sid]}) == 1
                assert len(tracker.chunks[sid]) == WORDS + 3  # "echo:", "session", "NN:", then one per word
                idles = tracker.idles[sid]
                assert len(idles) == 1 and idles[0][2]["stopReason"] == "end_turn", idles
                assert tracker.last_update[sid] == idles[0][2]
            assert set(request_ids) <= tracker.acks

            # Fairness, in arrival order on the client: every session had streamed its first chunk
            # before any session finished (no session waited for another one to end).
            last_first = max(pos for pos, _ in tracker.first_chunk.values())
            first_idle = min(idles[0][0] for idles in tracker.idles.values())
            first_chunk_spread = max(t for _, t in tracker.first_chunk.values()) - started
            first_done = min(idles[0][1] for idles in tracker.idles.values()) - started
            # The provider saw the same thing: all 50 streams were open together at some moment.
            streams = llm.requests[before:]
            assert len(streams) == SESSIONS and all(r.status == "completed" for r in streams)
            all_open = max(r.started_at for r in streams)
            first_closed = min(r.finished_at or 0.0 for r in streams)
            print(
                f"\n50 sessions: {took:.1f} s in all; every first chunk within {first_chunk_spread:.2f} s,"
                f" first session done at {first_done:.2f} s; all streams open together:"
                f" {all_open < first_closed}"
            )
            assert last_first < first_idle, (last_first, first_idle)
            assert all_open < first_closed
            finish(client)


# --------------------------------------------------------------------------- two processes, one store

ROUNDS = 4
PER_PROCESS = 5


def _drive(client: AcpProcess, workspace: Path, tag: str, out: dict[str, list[str]]) -> None:
    sids = [client.new_session(workspace) for _ in range(PER_PROCESS)]
    for sid in sids:
        out[sid] = []
    for round_ in range(ROUNDS):
        texts_now = {sid: f"{tag} session {j} round {round_}" for j, sid in enumerate(sids)}
        request_ids = [prompt(client, sid, texts_now[sid]) for sid in sids]
        tracker = TurnTracker(client)
        tracker.run(sids, request_ids, timeout=120)
        for sid in sids:
            assert tracker.text(sid) == "echo: " + texts_now[sid]
            assert [i[2]["stopReason"] for i in tracker.idles[sid]] == ["end_turn"]
            out[sid].append(texts_now[sid])


def test_two_processes_on_one_store_keep_both_histories(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    home = tmp_path / "shared-home"
    with start_fake_llm() as llm:
        paced_echo(llm, 0.02)
        a = AcpProcess(tmp_path, env=llm_env(llm), home=home)
        b = AcpProcess(tmp_path, env=llm_env(llm), home=home)
        with killing(a, b):
            warmers = [threading.Thread(target=warm, args=(c, workspace)) for c in (a, b)]
            for t in warmers:
                t.start()
            for t in warmers:
                t.join()
            assert a.version == b.version == 2, "a warm-up failed"

            prompts: dict[str, list[str]] = {}
            errors: list[BaseException] = []

            spans: dict[str, tuple[float, float]] = {}
            both = threading.Barrier(2, timeout=300)  # neither drives before the other has begun

            def drive(client: AcpProcess, tag: str) -> None:
                begun = time.monotonic()
                try:
                    both.wait()
                    _drive(client, workspace, tag, prompts)
                except BaseException as exc:  # reported by the main thread
                    errors.append(exc)
                spans[tag] = (begun, time.monotonic())

            started = time.monotonic()
            drivers = [threading.Thread(target=drive, args=(c, tag)) for c, tag in ((a, "A"), (b, "B"))]
            for t in drivers:
                t.start()
            for t in drivers:
                t.join(300)
            assert not errors, errors
            assert len(prompts) == 2 * PER_PROCESS
            # The two processes really wrote at the same time (neither finished before the other began).
            assert max(b for b, _ in spans.values()) < min(e for _, e in spans.values()), spans
            print(f"\ntwo processes: {2 * PER_PROCESS * ROUNDS} turns in {time.monotonic() - started:.1f} s")

            # Each process sees the other's sessions and their whole history.
            listed = {e["sessionId"] for e in a.result("session/list", {})["sessions"]}
            assert set(prompts) <= listed
            for sid, said in prompts.items():
                viewer = b if said[0].startswith("A") else a
                params = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": "start"}}
                assert viewer.result("session/resume", params) == {}
                replayed = [m["params"]["update"] for m in viewer.log]
                assert all(m["params"]["sessionId"] == sid for m in viewer.log)
                expected: list[tuple[str, str]] = []
                for text in said:
                    expected += [("user_message", text), ("agent_message", "echo: " + text)]
                assert [(u["sessionUpdate"], texts(u["content"])) for u in replayed] == expected
            finish(a, b)
    integrity(home / "sessions.sqlite3")


# --------------------------------------------------------------------------- a 10,000-entry replay

ENTRIES = 10_000
HUGE_EVERY = 500  # every 500th entry is a tool call with a 1 MB output
HUGE = 1024 * 1024


def _entry(n: int) -> HistoryEntry:
    if n % HUGE_EVERY == HUGE_EVERY - 1:
        output = f"huge {n} " + "y" * HUGE
        return ToolCall(f"call_{n}", f"big {n}", ToolKind.READ, ToolStatus.COMPLETED, {"n": n}, (TextOutput(output),))
    kind = n % 3
    if kind == 0:
        return UserMessage(f"user_{n}", (TextBlock(f"question {n}"),))
    if kind == 1:
        return AgentMessage(f"msg_{n}", f"answer {n}")
    return ToolCall(
        f"call_{n}", f"call {n}", ToolKind.EXECUTE, ToolStatus.COMPLETED, {"n": n}, (TextOutput(f"out {n}"),)
    )


def _build(db: Path, cwd: str) -> str:
    """Write the session straight through the store; a tenth of the calls get an earlier snapshot too."""
    sid = new_session_id()

    async def write() -> None:
        store = SqliteSessionStore(db)
        now = datetime.now(UTC)
        await store.create(Session(sid, cwd, now, now, title="ten thousand"))
        for n in range(ENTRIES):
            entry = _entry(n)
            if isinstance(entry, ToolCall) and n % 30 == 2:
                await store.append(sid, ToolCall(entry.tool_call_id, entry.title, entry.kind, ToolStatus.PENDING))
            await store.append(sid, entry)
        await store.aclose()

    anyio.run(write)
    return sid


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_ten_thousand_entries_replay_before_the_response_in_bounded_memory(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    started = time.monotonic()
    sid = _build(home / "sessions.sqlite3", str(workspace.resolve()))
    built = time.monotonic() - started

    client = AcpProcess(tmp_path, home=home)  # no model: replay needs no litellm
    with killing(client):
        client.initialize(2)
        started = time.monotonic()
        params = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": "start"}}
        assert client.result("session/resume", params, timeout=240) == {}
        replayed_in = time.monotonic() - started
        peak = _peak_rss_mb(client.proc.pid)
        log = client.log
        assert len(log) == ENTRIES, len(log)
        assert all(m["method"] == "session/update" and m["params"]["sessionId"] == sid for m in log)
        updates = [m["params"]["update"] for m in log]
        ids = [u.get("messageId") or u.get("toolCallId") for u in updates]
        assert ids == [getattr(_entry(n), "message_id", None) or _entry(n).tool_call_id for n in range(ENTRIES)]  # type: ignore[union-attr]
        huge = [u for u in updates if u.get("title", "").startswith("big ")]
        assert len(huge) == ENTRIES // HUGE_EVERY
        for update in huge:
            text = texts([c["content"] for c in update["content"] if c["type"] == "content"])
            assert text.startswith("huge ") and len(text) < 64 * 1024
            assert "output truncated in replay" in text
        pending = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u["status"] != "completed"]
        assert pending == [], "a call replayed an earlier snapshot"
        biggest = max(len(raw) for raw in client.raw_lines)
        print(
            f"\n10k replay: built in {built:.1f} s, replayed in {replayed_in:.1f} s, peak RSS {peak:.0f} MB,"
            f" largest line {biggest // 1024} KiB"
        )
        assert peak < RSS_BOUND_MB, f"peak RSS {peak:.0f} MB"
        validated = finish_sampled(client)
        assert validated < 100, "too many shapes: the sample no longer saves time"
        print(f"schema-checked {validated} messages (one per shape)")
