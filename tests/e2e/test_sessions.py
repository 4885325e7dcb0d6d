"""Issue 3, end to end: sessions that last across `term2 acp` processes.

Every test drives real subprocesses over stdio (the way an editor does) and
validates everything term2 sent against the official ACP JSON schemas.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, bare, updates

Message = dict[str, Any]


# --------------------------------------------------------------------------- helpers


def _error(response: Message) -> Message:
    assert "error" in response, f"expected an error, got {response}"
    return response["error"]  # type: ignore[no-any-return]


def _v1_new(cwd: Path | str, **extra: Any) -> Message:
    return {"cwd": str(cwd), "mcpServers": [], **extra}


def _list_all(client: AcpProcess, params: Message | None = None) -> list[Message]:
    """Every page of session/list, following nextCursor."""
    params = dict(params or {})
    entries: list[Message] = []
    for _ in range(100):
        page = client.result("session/list", params)
        entries.extend(page["sessions"])
        if "nextCursor" not in page:
            return entries
        params["cursor"] = page["nextCursor"]
    raise AssertionError("session/list never ended")


def _session_updates(messages: list[Message], session_id: str) -> list[Message]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
    ]


def _texts(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict))


def _finish(*clients: AcpProcess) -> None:
    for client in clients:
        assert client.close() == 0, client.stderr()[-3000:]
        client.validate_schemas()


# --------------------------------------------------------------------------- one recorded history

# litellm's import costs seconds (much more on a loaded machine), so a single
# prompting process records every history the tests below reopen.
TURN_TIMEOUT = 240.0
WRITE_PROMPT = "Please write the notes file"


@dataclass(frozen=True)
class Recorded:
    home: Path
    workspace: Path
    write_sid: str  # a turn with text, a write_file call, then text
    read_sid: str  # a turn whose read_file call returned ~200 KB
    big_file: Path
    live_read_output: int  # length of the read_file output as sent live
    stall_sid: str  # closed while the model was still streaming
    close_messages: list[Message]  # what the writer saw from the close request to its response
    close_request_id: int
    stalled_llm_status: str  # how the fake LLM saw the stalled request end
    live_write_ids: list[str]  # messageIds / toolCallIds of the write turn as sent live, in order


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    base = tmp_path_factory.mktemp("recorded")
    home = base / "shared-home"
    workspace = base / "project"
    workspace.mkdir()
    big = workspace / "big.txt"
    notes = workspace / "notes.txt"
    big.write_text("".join(f"line {i:06d} " + "x" * 40 + "\n" for i in range(4000)))  # ~210 KB
    with start_fake_llm() as llm:
        writer = AcpProcess(base, env=llm_env(llm), home=home)
        try:
            writer.initialize(2)
            write_sid = writer.new_session(workspace)
            llm.push(
                {
                    "text": "Writing the notes.",
                    "tool_calls": [{"name": "write_file", "arguments": {"path": str(notes), "content": "hello\n"}}],
                },
                {"text": "The notes are written."},
            )
            _, live = writer.prompt_v2(write_sid, WRITE_PROMPT, timeout=TURN_TIMEOUT)
            assert bare(_session_updates(live, write_sid)[-1]) == {
                "sessionUpdate": "state_update",
                "state": "idle",
                "stopReason": "end_turn",
            }, live
            assert (workspace / "notes.txt").read_text() == "hello\n"
            live_write_ids = list(
                dict.fromkeys(
                    u.get("messageId") or u["toolCallId"]
                    for u in _session_updates(live, write_sid)[:-1]
                    if u["sessionUpdate"] != "state_update"
                )
            )
            assert writer.result("session/close", {"sessionId": write_sid}) == {}

            read_sid = writer.new_session(workspace)
            llm.push(
                {"tool_calls": [{"name": "read_file", "arguments": {"path": str(big)}}]},
                {"text": "That is a big file."},
            )
            _, live = writer.prompt_v2(read_sid, "Read the big file", timeout=TURN_TIMEOUT)
            done = [u for u in updates(live, "tool_call_update") if u.get("status") == "completed"]
            assert len(done) == 1, updates(live)
            live_output = len(_texts([c["content"] for c in done[0]["content"] if c["type"] == "content"]))
            llm.push({"text": "A second answer."})
            writer.prompt_v2(read_sid, "Second question, not a title", timeout=TURN_TIMEOUT)
            assert writer.result("session/close", {"sessionId": read_sid}) == {}

            # A turn still streaming when its session is closed.
            stall_sid = writer.new_session(workspace)
            llm.push({"text": "This answer will never be finished", "stall_after": 1, "stall_seconds": 60})
            writer.request("session/prompt", {"sessionId": stall_sid, "prompt": [{"type": "text", "text": "Stall"}]})
            writer.collect_until(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                ),
                timeout=TURN_TIMEOUT,
            )
            close_id = writer.request("session/close", {"sessionId": stall_sid})
            close_messages = writer.collect_until(lambda m: m.get("id") == close_id and "method" not in m, 30)
            ended = llm.wait_until_closed(-1, timeout=10)
            stalled_status = ended.status if ended is not None else "open"
            _finish(writer)
        finally:
            writer.kill()
    yield Recorded(
        home,
        workspace,
        write_sid,
        read_sid,
        big,
        live_output,
        stall_sid,
        close_messages,
        close_id,
        stalled_status,
        live_write_ids,
    )


# --------------------------------------------------------------------------- the whole life of a session


def test_a_session_outlives_its_process(acp, recorded: Recorded) -> None:
    home, workspace, sid = recorded.home, recorded.workspace, recorded.write_sid
    root = os.path.realpath(workspace)

    # Process B (v2, same store): list, resume, replay.
    b = acp(home=home)
    b.initialize(2)
    listed = {e["sessionId"]: e for e in b.result("session/list", {})["sessions"]}
    assert set(listed) == {recorded.write_sid, recorded.read_sid, recorded.stall_sid}
    entry = listed[sid]
    assert entry["cwd"] == root
    assert WRITE_PROMPT in entry["title"]
    assert listed[recorded.read_sid]["title"] == "Read the big file"  # the first prompt names it
    stamp = datetime.fromisoformat(entry["updatedAt"])
    assert stamp.utcoffset() is not None, entry["updatedAt"]

    assert b.result("session/resume", {"sessionId": sid, "cwd": str(workspace)}) == {}
    assert b.log == [], f"resume without replayFrom replayed: {b.log}"
    assert b.result("session/resume", {"sessionId": sid, "cwd": str(workspace), "replayFrom": None}) == {}
    assert b.log == [], f"resume with a null replayFrom replayed: {b.log}"

    replays = []
    from_start = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": "start"}}
    for _ in range(2):
        assert b.result("session/resume", from_start) == {}
        replays.append(_session_updates(b.log, sid))
    first, second = replays
    assert len(b.log) == len(first), "replay carried messages for another session or a non-update"
    kinds = [u["sessionUpdate"] for u in first]
    assert kinds[0] == "user_message", kinds
    assert "agent_message" in kinds and "tool_call_update" in kinds, kinds
    assert WRITE_PROMPT in _texts(first[0]["content"])
    agent_text = " ".join(_texts(u["content"]) for u in first if u["sessionUpdate"] == "agent_message")
    assert "Writing the notes." in agent_text and "The notes are written." in agent_text
    calls = [u for u in first if u["sessionUpdate"] == "tool_call_update"]
    assert len(calls) == 1
    call = calls[0]
    assert call["status"] == "completed" and call["title"]
    diffs = [c for c in call["content"] if c["type"] == "diff"]
    assert diffs and diffs[0]["changes"][0]["path"] == os.path.join(root, "notes.txt")
    assert "+hello" in diffs[0]["patch"]["text"]
    ids = [u.get("messageId") or u.get("toolCallId") for u in first]
    assert len(set(ids)) == len(ids), f"message ids are not unique: {ids}"
    assert ids == [u.get("messageId") or u.get("toolCallId") for u in second], "messageIds changed between replays"
    assert first == second
    assert ids == recorded.live_write_ids, "replay ids differ from the ids the live turn used"

    other_project = workspace.parent / "other-project"  # the parent would be refused anyway: it holds the store
    other_project.mkdir(exist_ok=True)
    wrong_root = _error(b.call("session/resume", {"sessionId": sid, "cwd": str(other_project)}))
    assert wrong_root["code"] == -32602 and "does not match" in wrong_root["message"]
    no_such = _error(b.call("session/resume", {"sessionId": "sess_doesNotExist", "cwd": str(workspace)}))
    assert no_such["code"] == -32602 and "unknown session" in no_such["message"]

    assert b.result("session/close", {"sessionId": sid}) == {}
    unknown = _error(b.call("session/close", {"sessionId": "sess_doesNotExist"}))
    assert unknown["code"] == -32602
    assert "unknown session" in unknown["message"] and "sess_doesNotExist" in unknown["message"]
    # A closed session comes back.
    assert b.result("session/resume", {"sessionId": sid, "cwd": str(workspace)}) == {}
    assert b.log == []
    assert b.result("session/close", {"sessionId": sid}) == {}

    # Process C (v1): session/load replays v1 updates before answering; resume replays nothing.
    c = acp(home=home)
    c.initialize(1)
    load_result = c.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert set(load_result) == {"configOptions", "modes"}  # the pickers, v1 only (ADR 0043)
    loaded = _session_updates(c.log, sid)
    assert len(c.log) == len(loaded)
    v1_kinds = [u["sessionUpdate"] for u in loaded]
    assert v1_kinds[0] == "user_message_chunk", v1_kinds
    assert "agent_message_chunk" in v1_kinds and "tool_call" in v1_kinds, v1_kinds
    assert not {"user_message", "agent_message", "state_update"} & set(v1_kinds), v1_kinds
    assert WRITE_PROMPT in _texts(loaded[0]["content"])
    v1_call = next(u for u in loaded if u["sessionUpdate"] == "tool_call")
    assert v1_call["status"] == "completed"
    v1_diff = next(x for x in v1_call["content"] if x["type"] == "diff")
    assert v1_diff["path"] == os.path.join(root, "notes.txt") and v1_diff["newText"] == "hello\n"
    assert set(c.result("session/resume", {"sessionId": sid, "cwd": str(workspace)})) == {"configOptions", "modes"}
    replayed = [u for u in _session_updates(c.log, sid) if u["sessionUpdate"] != "available_commands_update"]
    assert replayed == [], f"v1 session/resume replayed: {c.log}"  # the commands' update is no replay
    assert c.result("session/close", {"sessionId": sid}) == {}
    assert "unknown session" in _error(c.call("session/close", {"sessionId": "sess_nope"}))["message"]
    _finish(b, c)


def test_close_cancels_active_work_and_the_session_comes_back(acp, recorded: Recorded) -> None:
    sid = recorded.stall_sid
    seen = recorded.close_messages
    assert seen[-1] == {"jsonrpc": "2.0", "id": recorded.close_request_id, "result": {}}
    states = [u for u in _session_updates(seen, sid) if u["sessionUpdate"] == "state_update"]
    cancelled = {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    assert [bare(s) for s in states] == [cancelled], seen
    assert recorded.stalled_llm_status == "disconnected", "closing did not abort the model stream"

    client = acp(home=recorded.home)
    client.initialize(2)
    params = {"sessionId": sid, "cwd": str(recorded.workspace), "replayFrom": {"type": "start"}}
    assert client.result("session/resume", params) == {}
    replayed = _session_updates(client.log, sid)
    assert replayed and replayed[0]["sessionUpdate"] == "user_message"
    assert _texts(replayed[0]["content"]) == "Stall"
    # What streamed before the close is kept, as far as it got.
    partial = [u for u in replayed if u["sessionUpdate"] == "agent_message"]
    assert partial and "This answer will never be finished".startswith(_texts(partial[0]["content"]))
    assert client.result("session/close", {"sessionId": sid}) == {}
    _finish(client)


# --------------------------------------------------------------------------- cwd validation


def test_session_new_validates_and_canonicalises_cwd(acp, workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "real-project"
    elsewhere.mkdir(parents=True)
    link = workspace / "link-to-elsewhere"
    link.symlink_to(elsewhere, target_is_directory=True)
    regular = workspace / "README.md"

    client = acp()
    client.initialize(2)
    refusals = {
        "project/relative": "absolute",
        str(tmp_path / "does-not-exist"): "does not exist",
        str(regular): "not a directory",
    }
    for cwd, problem in refusals.items():
        error = _error(client.call("session/new", {"cwd": cwd}))
        assert error["code"] == -32602, (cwd, error)
        assert problem in error["message"] and "cwd" in error["message"], (cwd, error)

    sid = client.new_session(link)
    listed = client.result("session/list", {})["sessions"]
    assert [(e["sessionId"], e["cwd"]) for e in listed] == [(sid, os.path.realpath(elsewhere))]
    # The workspace root is the resolved target: resuming through either path works.
    assert client.result("session/resume", {"sessionId": sid, "cwd": str(elsewhere)}) == {}
    assert client.result("session/resume", {"sessionId": sid, "cwd": str(link)}) == {}

    # Session ids are unguessable: ~128 random bits, not a counter or a timestamp.
    ids = [sid] + [client.new_session(workspace) for _ in range(4)]
    assert len(set(ids)) == len(ids)
    assert all(len(i.removeprefix("sess_")) >= 20 for i in ids), ids
    assert len({i[:10] for i in ids}) == len(ids), ids
    _finish(client)


# --------------------------------------------------------------------------- refusals


def test_unsafe_roots_are_refused_and_serving_continues(acp, workspace: Path, tmp_path: Path) -> None:
    """/, a home, system folders and term2's own data never become a root the file tools may write in."""
    client = acp(env={"HOME": str(tmp_path / "user-home")})
    (tmp_path / "user-home" / "proj").mkdir(parents=True)
    client.initialize(2)
    refusals = {
        "/": "too wide",
        "/etc": "system folder",
        "/usr/lib": "system folder",
        str(tmp_path / "user-home"): "home",
        str(tmp_path): "home",  # a folder above the home
        str(client.home): "term2's own data",
    }
    client.home.mkdir(parents=True, exist_ok=True)
    for cwd, problem in refusals.items():
        error = _error(client.call("session/new", {"cwd": cwd}))
        assert error["code"] == -32602, (cwd, error)
        assert problem in error["message"] and "cannot be a workspace" in error["message"], (cwd, error)
    sid = client.new_session(tmp_path / "user-home" / "proj")  # inside the home is a project: fine
    error = _error(client.call("session/resume", {"sessionId": sid, "cwd": "/"}))
    assert error["code"] == -32602 and "too wide" in error["message"], error
    assert client.result("session/resume", {"sessionId": sid, "cwd": str(tmp_path / "user-home" / "proj")}) == {}
    _finish(client)


def test_unsupported_parameters_are_refused(acp, workspace: Path, tmp_path: Path) -> None:
    stdio_v2 = {"type": "stdio", "name": "fs", "command": "/bin/true", "args": [], "env": []}
    stdio_v1 = {"name": "fs", "command": "/bin/true", "args": [], "env": []}

    v2 = acp()
    v2.initialize(2)
    error = _error(v2.call("session/new", {"cwd": str(workspace), "mcpServers": [stdio_v2]}))
    assert error == {"code": -32602, "message": "Invalid params for session/new: term2 does not support MCP servers"}
    error = _error(v2.call("session/new", {"cwd": str(workspace), "additionalDirectories": [str(tmp_path)]}))
    assert error["code"] == -32602 and "additionalDirectories" in error["message"]
    sid = v2.result("session/new", {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": []})["sessionId"]

    for kind in ("_custom", "nope"):
        params = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": kind}}
        error = _error(v2.call("session/resume", params))
        assert error["code"] == -32602 and kind in error["message"], error
    assert v2.log == []
    error = _error(v2.call("session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": [stdio_v2]}))
    assert error == {"code": -32602, "message": "Invalid params for session/resume: term2 does not support MCP servers"}

    v1 = acp()
    v1.initialize(1)
    assert v1.result("session/new", _v1_new(workspace, mcpServers=[stdio_v1]))["sessionId"]  # v1 connects them
    error = _error(v1.call("session/new", _v1_new(workspace, additionalDirectories=[str(tmp_path)])))
    assert error["code"] == -32602
    assert v1.result("session/new", _v1_new(workspace))["sessionId"].startswith("sess_")
    _finish(v2, v1)


# --------------------------------------------------------------------------- listing


def test_list_pages_newest_first_with_checked_cursors(acp, workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    client = acp()
    client.initialize(2)
    created = [client.new_session(workspace) for _ in range(60)]

    first = client.result("session/list", {})
    assert len(first["sessions"]) == 50 and isinstance(first["nextCursor"], str)
    second = client.result("session/list", {"cursor": first["nextCursor"]})
    assert len(second["sessions"]) == 10 and "nextCursor" not in second
    listed = [e["sessionId"] for e in first["sessions"] + second["sessions"]]
    assert len(set(listed)) == 60
    assert listed == created[::-1], "not newest first"
    stamps = [datetime.fromisoformat(e["updatedAt"]) for e in first["sessions"] + second["sessions"]]
    assert all(s.utcoffset() is not None for s in stamps)
    assert stamps == sorted(stamps, reverse=True)

    # The same pages under a cwd filter; its cursor is bound to that filter.
    filtered = client.result("session/list", {"cwd": str(workspace)})
    assert filtered["sessions"] == first["sessions"]
    cursor = filtered["nextCursor"]
    payload, _, tag = cursor.partition(".")
    zero_tag = f"{payload}.{'A' * len(tag)}"
    moved = base64.urlsafe_b64encode(b'[0,"sess_x"]').decode().rstrip("=") + "." + tag
    for params in (
        {"cursor": "forged-cursor"},
        {"cursor": cursor + "x", "cwd": str(workspace)},
        {"cursor": zero_tag, "cwd": str(workspace)},
        {"cursor": moved, "cwd": str(workspace)},
        {"cursor": cursor},  # no filter now
        {"cursor": cursor, "cwd": str(other)},  # another filter
    ):
        error = _error(client.call("session/list", params))
        assert error["code"] == -32602 and "cursor" in error["message"], (params, error)
    rest = client.result("session/list", {"cwd": str(workspace), "cursor": cursor})
    assert rest["sessions"] == second["sessions"]
    _finish(client)


def test_list_filters_by_canonical_cwd(acp, workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-project"
    other.mkdir()
    alias = tmp_path / "alias"
    alias.symlink_to(workspace, target_is_directory=True)

    client = acp()
    client.initialize(2)
    mine = {client.new_session(workspace) for _ in range(3)}
    theirs = {client.new_session(other) for _ in range(2)}
    by_path = _list_all(client, {"cwd": str(workspace)})
    assert {e["sessionId"] for e in by_path} == mine
    assert {e["cwd"] for e in by_path} == {os.path.realpath(workspace)}
    by_alias = _list_all(client, {"cwd": str(alias)})
    assert by_alias == by_path
    assert {e["sessionId"] for e in _list_all(client, {"cwd": str(other)})} == theirs
    assert {e["sessionId"] for e in _list_all(client)} == mine | theirs
    error = _error(client.call("session/list", {"cwd": "relative/dir"}))
    assert error["code"] == -32602 and "absolute" in error["message"]
    _finish(client)


# --------------------------------------------------------------------------- shared store


def test_two_processes_create_sessions_at_once(acp, workspace: Path, tmp_path: Path) -> None:
    home = tmp_path / "shared-home"
    writers = [acp(home=home) for _ in range(2)]
    for writer in writers:
        writer.initialize(2)
    created: list[list[str]] = [[], []]
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def create(index: int) -> None:
        try:
            start.wait(10)
            for _ in range(30):
                created[index].append(writers[index].new_session(workspace))
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures
    assert len(created[0]) == len(created[1]) == 30

    reader = acp(home=home)
    reader.initialize(1)
    listed = _list_all(reader)
    assert sorted(e["sessionId"] for e in listed) == sorted(created[0] + created[1])
    # A cursor belongs to the store, not to the process that issued it...
    page = reader.result("session/list", {})
    rest = writers[0].result("session/list", {"cursor": page["nextCursor"]})
    assert [e["sessionId"] for e in page["sessions"] + rest["sessions"]] == [e["sessionId"] for e in listed]
    # ...and one from another store is refused.
    stranger = acp(home=tmp_path / "another-home")
    stranger.initialize(2)
    error = _error(stranger.call("session/list", {"cursor": page["nextCursor"]}))
    assert error["code"] == -32602 and "cursor" in error["message"]
    _finish(*writers, reader, stranger)


def test_an_unusable_store_is_reported_and_serving_continues(acp, workspace: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file")
    home = blocker / "term2-home"

    client = acp(home=home)
    client.initialize(2)
    for _ in range(2):
        error = _error(client.call("session/new", {"cwd": str(workspace)}))
        assert error["code"] == -32603
        assert "store unavailable" in error["message"] and str(blocker) in error["message"], error
    listing = client.call("session/list", {})
    assert "store unavailable" in _error(listing)["message"]
    assert _error(client.call("no/such/method", {}))["code"] == -32601
    # Still validating input before touching the store.
    assert _error(client.call("session/new", {"cwd": "relative"}))["code"] == -32602
    # Once the disk is fixed the same process uses the store: nothing was cached broken.
    blocker.unlink()
    blocker.mkdir()
    sid = client.new_session(workspace)
    assert [e["sessionId"] for e in client.result("session/list", {})["sessions"]] == [sid]
    assert (home / "sessions.sqlite3").exists()
    _finish(client)


# --------------------------------------------------------------------------- replay truncation


def test_replay_truncates_huge_tool_output(acp, recorded: Recorded) -> None:
    reader = acp(home=recorded.home)
    reader.initialize(2)
    sid = recorded.read_sid
    params = {"sessionId": sid, "cwd": str(recorded.workspace), "replayFrom": {"type": "start"}}
    assert reader.result("session/resume", params) == {}
    calls = [u for u in _session_updates(reader.log, sid) if u["sessionUpdate"] == "tool_call_update"]
    assert len(calls) == 1 and calls[0]["status"] == "completed"
    text = _texts([c["content"] for c in calls[0]["content"] if c["type"] == "content"])
    assert "truncated" in text
    assert text.startswith("     1\tline 000000")
    assert recorded.live_read_output > 32 * 1024  # the live turn carried more than the replay keeps (32 KiB)
    assert len(text) < 33 * 1024
    line = next(raw for raw in reader.raw_lines if b'"tool_call_update"' in raw)
    assert len(line) < 100 * 1024, len(line)

    v1 = acp(home=recorded.home)
    v1.initialize(1)
    assert set(v1.result("session/load", {"sessionId": sid, "cwd": str(recorded.workspace), "mcpServers": []})) == {
        "configOptions",
        "modes",
    }  # v1's pickers and modes (ADR 0043, 0044)
    call = next(u for u in _session_updates(v1.log, sid) if u["sessionUpdate"] == "tool_call")
    v1_text = _texts([c["content"] for c in call["content"] if c["type"] == "content"])
    assert "truncated" in v1_text and len(v1_text) < 64 * 1024
    _finish(reader, v1)
