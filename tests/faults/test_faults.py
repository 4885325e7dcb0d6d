"""Issue 7, part 3: faults around a real `term2 acp` (litellm included, fake provider).

Each test breaks something an editor session depends on (the process, the
client, the provider, the disk, a signal) and checks what survives and how fast
term2 goes away. Every transcript that exists is validated against the
official ACP schemas.

A term2 process pays the litellm import on its first turn (about 8 s of CPU on
this box), and most tests here end their process, so the processes are warmed
up ahead of time by a module-scoped pool (three at a time, in the order the
tests use them), each with its own home, workspace and fake provider. The
non-destructive tests share one process, which the SIGTERM test then ends. Reader
processes that only list and replay are started without a model, so they
never import litellm.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sqlite3
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer
from tests.support.acp_process import AcpProcess, Message, PermissionPolicy, allow_kind, is_update, updates
from tests.support.procs import processes_with

WARM_UP_TIMEOUT = 240.0  # the first turn imports litellm; several processes do so at once
TURN_TIMEOUT = 60.0
GUARD = 60.0  # seconds: a guard against a hang only; what term2 could wait for on its way out lasts longer
RIG_ORDER = ("kill", "vanish", "permission", "shell", "shared")  # "shared" ends with the SIGTERM test


# --------------------------------------------------------------------------- a client that can vanish


class Client(AcpProcess):
    """An AcpProcess whose editor can disappear: stop reading, then close both pipes.

    The base class reads stdout with a blocking iterator, and a pipe cannot be
    closed under a blocked reader; this one polls, so `vanish()` can stop it
    first and then drop both ends the way a crashed editor does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stop_reading = threading.Event()
        super().__init__(*args, **kwargs)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        pending = b""
        while not self._stop_reading.is_set():
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._take(line + b"\n")
        self._inbox.put(None)

    def _take(self, raw: bytes) -> None:
        """What the base reader does with one line (kept identical)."""
        self.raw_lines.append(raw)
        try:
            message = json.loads(raw)
        except ValueError:
            self._inbox.put({"__invalid__": raw.decode("utf-8", "replace")})
            return
        self.transcript.append(("agent", message))
        asks = isinstance(message, dict) and "id" in message and message.get("method") == "session/request_permission"
        if asks and self.permission is not None:
            self.permission_requests.append(message)
            answer = self.permission(message["params"])
            if answer is not None:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
            return
        self._inbox.put(message)

    def vanish(self, timeout: float = GUARD) -> tuple[int, float]:
        """Close stdin and stdout at once; return (exit code, seconds until the process was gone)."""
        self._stop_reading.set()
        self._reader.join(5)
        assert not self._reader.is_alive()
        gone_at = time.monotonic()
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.proc.stdout.close()
        with contextlib.suppress(BrokenPipeError):
            self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        elapsed = time.monotonic() - gone_at
        self._stderr.close()
        return rc, elapsed


class Answers:
    """A switchable permission policy; None leaves requests unanswered."""

    def __init__(self) -> None:
        self.policy: PermissionPolicy | None = None

    def __call__(self, params: Message) -> Message | None:
        return self.policy(params) if self.policy is not None else None


# --------------------------------------------------------------------------- warm processes


@dataclass
class Rig:
    client: Client
    llm: FakeLLMServer
    answers: Answers
    base: Path
    workspace: Path

    @property
    def home(self) -> Path:
        return self.client.home

    @property
    def db(self) -> Path:
        return self.home / "sessions.sqlite3"

    def session(self) -> str:
        return self.client.new_session(self.workspace)


class RigPool:
    """Warms the processes the tests need, a few at a time, in the order they are used."""

    def __init__(self, root: Path, names: list[str]) -> None:
        self._rigs: list[Rig] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(3, thread_name_prefix="warm")
        self._futures: dict[str, Future[Rig]] = {name: self._pool.submit(self._warm, root / name) for name in names}

    def _warm(self, base: Path) -> Rig:
        workspace = base / "project"
        workspace.mkdir(parents=True)
        (workspace / "README.md").write_text("# demo project\n")
        llm = FakeLLMServer().start()
        answers = Answers()
        rig = Rig(Client(base, env=llm_env(llm), permission=answers), llm, answers, base, workspace)
        with self._lock:
            self._rigs.append(rig)
        rig.client.initialize(2)
        rig.client.prompt_v2(rig.session(), "warm up", timeout=WARM_UP_TIMEOUT)
        return rig

    def get(self, name: str) -> Rig:
        rig = self._futures[name].result()
        rig.llm.state.reset()
        return rig

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for rig in self._rigs:
            rig.client.kill()
            rig.llm.stop()


def uses(name: str) -> Any:
    """Mark which warm process a test takes, so a partial run warms only what it needs."""

    def mark(test: Any) -> Any:
        test.rig = name
        return test

    return mark


@pytest.fixture(scope="module")
def rigs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RigPool]:
    wanted = {getattr(getattr(item, "function", None), "rig", None) for item in request.session.items}
    pool = RigPool(tmp_path_factory.mktemp("faults"), [name for name in RIG_ORDER if name in wanted])
    try:
        yield pool
    finally:
        pool.close()


def reader_for(rig: Rig) -> AcpProcess:
    """A second process on the rig's store, without a model: it never imports litellm."""
    return AcpProcess(rig.base, home=rig.home)


# --------------------------------------------------------------------------- helpers


def session_updates(messages: list[Message], session_id: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


def texts(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def idle_of(messages: list[Message]) -> dict[str, Any]:
    idles = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
    assert len(idles) == 1, idles
    return idles[0]


def replay(client: AcpProcess, session_id: str, workspace: Path) -> list[dict[str, Any]]:
    params = {"sessionId": session_id, "cwd": str(workspace), "replayFrom": {"type": "start"}}
    assert client.result("session/resume", params, timeout=30) == {}
    return session_updates(client.log, session_id)


def integrity(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, starttime


def descendants(root: int) -> dict[int, str]:
    """Every live descendant of `root`, with its start time (so a reused pid is not mistaken for it)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                start = _start_time(pid)
                if start is not None:
                    found[pid] = start
                    frontier.append(pid)
    return found


def still_alive(snapshot: dict[int, str], within: float = GUARD) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        alive = [pid for pid, start in snapshot.items() if _start_time(pid) == start]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def slow_text(words: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(words))


# --------------------------------------------------------------------------- SIGKILL mid-turn


@uses("kill")
def test_sigkill_mid_turn_keeps_everything_finished_before_it(rigs: RigPool) -> None:
    rig = rigs.get("kill")
    data = rig.workspace / "data.txt"
    data.write_text("the data\n")
    sid = rig.session()
    rig.llm.push(
        {"text": "Reading the data first.", "tool_calls": [{"name": "read_file", "arguments": {"path": str(data)}}]},
        {"text": slow_text(50, "never"), "stall_after": 2, "stall_seconds": 60},
    )
    client = rig.client
    prompt_id = client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "Kill me"}]})
    seen = client.collect_until(is_update(sid, "tool_call_update", status="completed"), TURN_TIMEOUT)
    first_message = next(u for u in session_updates(seen, sid) if u["sessionUpdate"] == "agent_message_chunk")
    first_id = first_message["messageId"]
    # The second response is streaming: a chunk with another message id has arrived.
    seen += client.collect_until(
        lambda m: is_update(sid, "agent_message_chunk")(m) and m["params"]["update"]["messageId"] != first_id,
        TURN_TIMEOUT,
    )
    assert rig.llm.wait_for_request(2) and rig.llm.requests[-1].status == "open"

    client.proc.kill()
    client.proc.wait(10)
    client._reader.join(5)
    client.kill()
    assert any(m.get("id") == prompt_id for m in seen), "the v2 prompt was never acknowledged"
    client.validate_schemas()
    assert rig.llm.wait_until_closed(-1, timeout=10) is not None

    reader = reader_for(rig)
    try:
        reader.initialize(2)
        listed = {e["sessionId"]: e for e in reader.result("session/list", {})["sessions"]}
        assert sid in listed and "Kill me" in listed[sid].get("title", "")
        replayed = replay(reader, sid, rig.workspace)
        kinds = [u["sessionUpdate"] for u in replayed]
        assert kinds[:3] == ["user_message", "agent_message", "tool_call_update"], kinds
        assert texts(replayed[0]["content"]) == "Kill me"
        assert replayed[1]["messageId"] == first_id
        assert texts(replayed[1]["content"]) == "Reading the data first."
        call = replayed[2]
        assert call["status"] == "completed" and call["rawInput"] == {"path": str(data)}
        assert "the data" in texts([c["content"] for c in call["content"] if c["type"] == "content"])
        # What was still streaming is either lost or kept as far as it got; never more.
        for extra in replayed[3:]:
            assert extra["sessionUpdate"] == "agent_message", replayed
            assert slow_text(50, "never").startswith(texts(extra["content"]))
        assert reader.result("session/close", {"sessionId": sid}) == {}
        assert reader.close() == 0, reader.stderr()[-3000:]
        reader.validate_schemas()
    finally:
        reader.kill()
    integrity(rig.db)


# --------------------------------------------------------------------------- the client vanishes


@uses("vanish")
def test_client_vanishing_mid_turn_ends_the_process_and_the_stream(rigs: RigPool) -> None:
    rig = rigs.get("vanish")
    sid = rig.session()
    rig.llm.push({"text": slow_text(2000), "chunk_delay": 0.1})  # 200 s: past the guard, were it waited for
    rig.client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "stream"}]})
    rig.client.collect_until(is_update(sid, "agent_message_chunk"), TURN_TIMEOUT)
    rig.client.collect_until(is_update(sid, "agent_message_chunk"), TURN_TIMEOUT)  # really streaming

    rc, elapsed = rig.client.vanish()
    print(f"\nexited {elapsed:.2f} s after the client vanished")
    assert rc == 0, rig.client.stderr()[-3000:]  # within the guard: it did not wait for the stream's end
    ended = rig.llm.wait_until_closed(-1, timeout=GUARD)
    assert ended is not None and ended.status == "disconnected", ended
    rig.client.validate_schemas()


@uses("permission")
def test_client_vanishing_at_a_pending_permission_writes_nothing(rigs: RigPool) -> None:
    rig = rigs.get("permission")
    outside = rig.base / f"outside-{uuid.uuid4().hex[:8]}"
    outside.mkdir()
    target = outside / "never.txt"
    sid = rig.session()
    rig.answers.policy = None  # leave the request unanswered
    rig.llm.push({"tool_calls": [{"name": "write_file", "arguments": {"path": str(target), "content": "no\n"}}]})
    rig.client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "write"}]})
    wait_for(lambda: rig.client.permission_requests, TURN_TIMEOUT, "the permission request")
    children = descendants(rig.client.proc.pid)

    rc, elapsed = rig.client.vanish()
    print(f"\nexited {elapsed:.2f} s after the client vanished")
    assert rc == 0, rig.client.stderr()[-3000:]  # within the guard: it did not wait for an answer
    assert not target.exists() and list(outside.iterdir()) == []
    assert still_alive(children) == [], f"left behind: {children}"
    assert processes_with(str(rig.workspace)) == []
    rig.client.validate_schemas()


@uses("shell")
def test_client_vanishing_while_an_approved_shell_runs_leaves_no_process(rigs: RigPool) -> None:
    rig = rigs.get("shell")
    marker = f"term2-fault-{uuid.uuid4().hex}"
    sid = rig.session()
    rig.answers.policy = allow_kind("allow_once")
    rig.llm.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": f"sleep 100000 # {marker}"}}]})
    rig.client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "sleep"}]})
    rig.client.collect_until(is_update(sid, "tool_call_update", status="in_progress"), TURN_TIMEOUT)
    assert len(rig.client.permission_requests) == 1

    def sleeping() -> bool:  # the marker is on bwrap's command line; the shell may exec `sleep` itself
        return bool(processes_with(marker)) and any(
            _cmdline(pid).startswith(b"sleep\x00100000") for pid in descendants(rig.client.proc.pid)
        )

    wait_for(sleeping, GUARD, "the sandboxed command")
    children = descendants(rig.client.proc.pid)

    rc, elapsed = rig.client.vanish()
    print(f"\nexited {elapsed:.2f} s after the client vanished")
    assert rc == 0, rig.client.stderr()[-3000:]  # within the guard: it did not wait for the command
    assert still_alive(children) == [], f"left behind: {children}"
    assert processes_with(marker) == []
    rig.client.validate_schemas()


# --------------------------------------------------------------------------- the provider fails mid-stream


@uses("shared")
def test_provider_failing_mid_stream_is_reported_and_the_partial_text_kept(rigs: RigPool) -> None:
    rig = rigs.get("shared")
    sid = rig.session()
    rig.llm.push({"text": "alpha beta gamma delta epsilon", "error_after": 2, "error_message": "Overloaded (fake)."})
    _ack, messages = rig.client.prompt_v2(sid, "fail midway", timeout=TURN_TIMEOUT)
    assert idle_of(messages)["stopReason"] == "_term2_error"
    chunks = [u for u in session_updates(messages, sid) if u["sessionUpdate"] == "agent_message_chunk"]
    said = texts(chunks[-1]["content"])
    assert said.startswith("term2 could not finish this turn:") and "overloaded" in said.lower(), said
    streamed = "".join(texts(c["content"]) for c in chunks[:-1])
    assert streamed == "alpha beta ", streamed

    replayed = replay(rig.client, sid, rig.workspace)
    agent = [texts(u["content"]) for u in replayed if u["sessionUpdate"] == "agent_message"]
    assert agent == ["alpha beta ", said], replayed
    # The session stays usable.
    _ack, messages = rig.client.prompt_v2(sid, "again", timeout=TURN_TIMEOUT)
    assert idle_of(messages)["stopReason"] == "end_turn"
    rig.client.validate_schemas()


# --------------------------------------------------------------------------- the store turns read-only


def _chattr_works(probe: Path) -> bool:
    if shutil.which("chattr") is None:
        return False
    probe.write_text("probe")
    ok = subprocess.run(["chattr", "+i", str(probe)], check=False, capture_output=True).returncode == 0
    if ok:
        subprocess.run(["chattr", "-i", str(probe)], check=True)
    return ok


@contextlib.contextmanager
def immutable(*paths: Path) -> Iterator[None]:
    """`chattr +i` binds root too (chmod does not). Never the -shm file: it is mapped, and
    an immutable mapped file kills the process with SIGBUS instead of failing a write."""
    subprocess.run(["chattr", "+i", *map(str, paths)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


@uses("shared")
def test_store_turning_read_only_is_reported_and_recovers(rigs: RigPool, tmp_path: Path) -> None:
    if not _chattr_works(tmp_path / "probe"):
        pytest.skip("chattr +i is not available on this filesystem")
    rig = rigs.get("shared")
    client = rig.client
    sid = rig.session()
    _ack, messages = client.prompt_v2(sid, "before", timeout=TURN_TIMEOUT)
    assert idle_of(messages)["stopReason"] == "end_turn"
    wal = rig.db.with_name(rig.db.name + "-wal")
    frozen = [rig.db, wal] if wal.exists() else [rig.db]

    with immutable(*frozen):
        _ack, messages = client.prompt_v2(sid, "during", timeout=TURN_TIMEOUT)
        assert idle_of(messages)["stopReason"] == "_term2_error"
        chunks = [u for u in session_updates(messages, sid) if u["sessionUpdate"] == "agent_message_chunk"]
        said = texts(chunks[-1]["content"])
        assert "session store" in said and str(rig.db) in said, said
        refused = client.call("session/new", {"cwd": str(rig.workspace)})
        assert "error" in refused, refused
        assert "session store" in refused["error"]["message"] and str(rig.db) in refused["error"]["message"]
        # Still serving: reads work, and the process answers everything.
        listed = [e["sessionId"] for e in client.result("session/list", {})["sessions"]]
        assert sid in listed
        assert client.proc.poll() is None

    _ack, messages = client.prompt_v2(sid, "after", timeout=TURN_TIMEOUT)
    assert idle_of(messages)["stopReason"] == "end_turn"
    assert "echo: after" in "".join(
        texts(u["content"]) for u in session_updates(messages, sid) if u["sessionUpdate"] == "agent_message_chunk"
    )
    fresh = rig.session()
    assert fresh != sid
    users = [texts(u["content"]) for u in replay(client, sid, rig.workspace) if u["sessionUpdate"] == "user_message"]
    assert users == ["before", "after"], users  # the refused prompt left nothing half-written
    client.validate_schemas()
    integrity(rig.db)


# --------------------------------------------------------------------------- SIGTERM with active turns


@uses("shared")
def test_sigterm_with_three_active_turns_exits_cleanly_and_promptly(rigs: RigPool) -> None:
    rig = rigs.get("shared")  # last user of the shared process: it is not needed after this
    client = rig.client
    sids = [rig.session() for _ in range(3)]
    first_request = len(rig.llm.requests)
    rig.llm.push(*({"text": slow_text(3000), "chunk_delay": 0.1} for _ in sids))  # 300 s each: past the guard
    for sid in sids:
        client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "slowly"}]})
    pending = set(sids)
    deadline = time.monotonic() + TURN_TIMEOUT
    while pending:
        message = client.next(max(0.1, deadline - time.monotonic()))
        if message.get("method") == "session/update" and message["params"]["update"]["sessionUpdate"] == (
            "agent_message_chunk"
        ):
            pending.discard(message["params"]["sessionId"])

    signalled_at = time.monotonic()
    client.proc.send_signal(signal.SIGTERM)
    rc = client.proc.wait(GUARD)
    elapsed = time.monotonic() - signalled_at
    print(f"\nexited {elapsed:.2f} s after SIGTERM")
    client._reader.join(5)
    client.kill()
    assert rc == 0, client.stderr()[-3000:]  # within the guard: it did not wait for the streams' ends
    client.assert_stdout_is_protocol()
    client.validate_schemas()
    for index in range(first_request, first_request + len(sids)):
        ended = rig.llm.wait_until_closed(index, timeout=GUARD)
        assert ended is not None and ended.status == "disconnected", ended
