"""A file name that is not UTF-8, found, read, edited, written, stored and replayed in a real `term2 acp`
(issue 20, part 4).

The workspace holds `names-\\xe9/caf\\xe9.txt` (Latin-1 bytes). The model finds it with grep, glob and
list_dir, which show it escaped; passes that escaped name back to read_file, edit_file and write_file;
and the bytes file changes. Every line term2 writes is JSON-RPC with no lone surrogate in it. The session
is then loaded by a v1 client and resumed from the start by a v2 one, and the replayed calls carry the
very escaped names the live ones did. `term2 exec` shows the same form on a terminal and in its JSON
stream.

What an editor acts on is another matter (ADR 0034): a location or a diff path names the exact file. The
workspace also holds `x\\y.txt` (a real backslash, valid UTF-8) and a planted `x\\\\y.txt`, the name the
model is shown for it: the editor is told `x\\y.txt`, the model `x\\\\y.txt`. The byte file has no exact
JSON name, so its calls carry no location and its diff is text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import llm_env
from tests.e2e.test_tools_e2e import text_of, tool_calls
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, Message, replayed_by_a_new_process, updates
from tests.support.exec_process import PtyExec, exec_env, run_piped

FIRST_TURN_TIMEOUT = 180.0  # the first prompt of a process imports litellm
FOLDER = "names-\\xe9"  # as the tools show b"names-\xe9"
FILE = f"{FOLDER}/caf\\xe9.txt"
NEW = f"{FOLDER}/n\\xe9w.txt"
BACKSLASH = "x\\y.txt"  # the real name: x, a backslash, y.txt
SHOWN_BACKSLASH = "x\\\\y.txt"  # how the model is shown it (and a name a repository can plant)


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def _turn(proc: AcpProcess, sid: str, timeout: float = 60.0) -> list[Message]:
    _ack, messages = proc.prompt_v2(sid, "go", timeout)
    [idle] = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
    assert idle["stopReason"] == "end_turn", proc.stderr()[-3000:]
    return messages


def _protocol_only(proc: AcpProcess) -> None:
    """Every stdout line is JSON-RPC that a strict client decodes: UTF-8, and no `\\udcXX` escape in it."""
    proc.validate_schemas()
    for raw in proc.raw_lines:
        raw.decode("utf-8")
        assert b"\\udc" not in raw.lower(), raw[:300]


def _seen(call: dict[str, Any]) -> tuple[Any, ...]:
    """What a client shows of a call, in a form both protocol versions share."""
    blocks = [c for c in call.get("content", []) if c["type"] == "diff"]
    diffs = [path for c in blocks for path in ([c["path"]] if "path" in c else [ch["path"] for ch in c["changes"]])]
    return call["title"], [loc["path"] for loc in call.get("locations", [])], text_of(call), diffs


def test_a_non_utf8_name_through_search_read_edit_write_the_store_and_replay(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    folder = os.path.join(os.fsencode(workspace), b"names-\xe9")
    os.makedirs(folder)
    target = os.path.join(folder, b"caf\xe9.txt")
    with open(target, "wb") as f:
        f.write(b"needle-e2e\n")
    (workspace / BACKSLASH).write_text("back-e2e\n")
    (workspace / SHOWN_BACKSLASH).write_text("planted\n")
    home = tmp_path / "home"
    root = os.path.realpath(workspace)
    with start_fake_llm() as llm:
        a = AcpProcess(tmp_path, env=llm_env(llm), home=home)
        try:
            a.initialize(2)
            sid = a.new_session(workspace)
            llm.push(
                {
                    "tool_calls": [
                        call("grep", pattern="needle-e2e"),
                        call("glob", pattern="**/caf*"),
                        call("list_dir", path=FOLDER),
                    ]
                },
                {"text": "Found it."},
            )
            found = _turn(a, sid, FIRST_TURN_TIMEOUT)
            llm.push(
                {
                    "tool_calls": [
                        call("read_file", path=FILE),
                        call("edit_file", path=FILE, old_string="needle-e2e", new_string="edited-e2e"),
                        call("read_file", path=FILE),
                    ]
                },
                {"text": "Edited."},
            )
            edited = _turn(a, sid)
            with open(target, "rb") as f:
                assert f.read() == b"edited-e2e\n"
            llm.push(
                {
                    "tool_calls": [
                        call("write_file", path=FILE, content="written-e2e\n"),
                        call("write_file", path=NEW, content="new\n"),
                    ]
                },
                {"text": "Written."},
            )
            written = _turn(a, sid)
            llm.push(
                {
                    "tool_calls": [
                        call("read_file", path=SHOWN_BACKSLASH),
                        call("edit_file", path=SHOWN_BACKSLASH, old_string="back-e2e", new_string="pinned-e2e"),
                    ]
                },
                {"text": "Pinned."},
            )
            backslashed = _turn(a, sid)
            assert a.result("session/close", {"sessionId": sid}) == {}
            assert a.close() == 0
            _protocol_only(a)
        finally:
            a.kill()

        load = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
        loaded = replayed_by_a_new_process(tmp_path, llm_env(llm), home, 1, "session/load", load, _protocol_only)

        start = {"sessionId": sid, "cwd": str(workspace), "replayFrom": {"type": "start"}}
        resumed = replayed_by_a_new_process(tmp_path, llm_env(llm), home, 2, "session/resume", start, _protocol_only)

    with open(target, "rb") as f:
        assert f.read() == b"written-e2e\n"
    with open(os.path.join(folder, b"n\xe9w.txt"), "rb") as f:
        assert f.read() == b"new\n"
    assert sorted(os.listdir(folder)) == [b"caf\xe9.txt", b"n\xe9w.txt"]  # no file named with a backslash
    assert (workspace / BACKSLASH).read_text() == "pinned-e2e\n" and (workspace / SHOWN_BACKSLASH).read_text() == (
        "planted\n"
    )

    live = {**tool_calls(found), **tool_calls(edited), **tool_calls(written), **tool_calls(backslashed)}
    assert [c["status"] for c in live.values()] == ["completed"] * 10, live
    grep, glob, listed, read, edit, reread, write, new, back_read, back_edit = live.values()
    assert text_of(grep) == f"{FILE}:1:needle-e2e\n"
    assert text_of(glob) == f"{FILE}\n" and text_of(listed) == "caf\\xe9.txt\n"
    assert text_of(read) == "     1\tneedle-e2e\n" and text_of(reread) == "     1\tedited-e2e\n"
    shown_path = f"{root}/{FILE}"
    for each, title in ((read, f"Read {shown_path}"), (edit, f"Edit {shown_path}"), (write, f"Write {shown_path}")):
        assert each["title"] == title
        assert each["locations"] == []  # the byte file has no exact JSON name: an editor is given none
    [diff] = edit["content"]  # nor a diff item whose path it could act on: the diff is text, named as shown
    assert diff["type"] == "content" and diff["content"]["text"].startswith(f"{shown_path} (its name is not UTF-8")
    assert "```diff\n" in diff["content"]["text"] and "-needle-e2e\n+edited-e2e\n" in diff["content"]["text"]
    assert new["title"] == f"Write {root}/{NEW}"

    exact, escaped = f"{root}/{BACKSLASH}", f"{root}/{SHOWN_BACKSLASH}"
    assert back_read["title"] == f"Read {escaped}" and text_of(back_read) == "     1\tback-e2e\n"
    assert back_read["locations"] == [{"path": exact, "line": 1}]
    assert back_edit["title"] == f"Edit {escaped}" and back_edit["locations"] == [{"path": exact, "line": 1}]
    [back_diff] = back_edit["content"]
    assert back_diff["changes"] == [{"operation": "modify", "path": exact}]
    assert f'+++ "b{exact.replace(chr(92), chr(92) * 2)}"\n' in back_diff["patch"]["text"]  # git's own quoting
    assert "-back-e2e\n+pinned-e2e\n" in back_diff["patch"]["text"]

    sent = json.dumps([r.body for r in llm.requests])
    assert json.dumps(f"{FILE}:1:needle-e2e")[1:-1] in sent  # the model was shown the escaped name
    assert json.dumps(f"Edited {shown_path} (+1 -1)")[1:-1] in sent
    assert json.dumps(f"Edited {escaped} (+1 -1)")[1:-1] in sent  # the model reads the backslash file escaped
    assert json.dumps(exact)[1:-1] not in sent  # nor is it ever given the exact name

    # Replayed from the store: the same calls, named the same way, to a v1 and a v2 client.
    for replayed in (tool_calls(loaded), tool_calls(resumed)):
        assert set(replayed) == set(live)  # (order: the search calls ran side by side)
        for call_id, call_seen in live.items():
            assert _seen(replayed[call_id]) == _seen(call_seen), call_id
    [v1_text] = tool_calls(loaded)[edit["toolCallId"]]["content"]
    assert v1_text["type"] == "content" and "+edited-e2e\n" in v1_text["content"]["text"]
    [v1_diff] = tool_calls(loaded)[back_edit["toolCallId"]]["content"]
    assert v1_diff["path"] == exact and v1_diff["oldText"] == "back-e2e\n" and v1_diff["newText"] == "pinned-e2e\n"
    assert tool_calls(loaded)[back_read["toolCallId"]]["locations"] == [{"path": exact, "line": 1}]


def test_term2_exec_asks_about_and_shows_a_non_utf8_name_escaped(tmp_path: Path) -> None:
    """A person is asked about the byte file by its escaped name and allowing it writes that file; a script's
    JSON stream reads the byte file's text under the escaped name, with no lone surrogate on any line."""
    root = tmp_path / "project"
    root.mkdir()
    with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "wb") as f:
        f.write(b"inside\n")
    (root / BACKSLASH).write_text("backslash\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = os.path.join(os.fsencode(outside), b"caf\xe9.txt")
    with open(target, "wb") as f:
        f.write(b"old\n")
    escaped = f"{outside}/caf\\xe9.txt"
    home = tmp_path / "term2-home"
    with start_fake_llm() as llm:
        env = exec_env(home, llm_env(llm))
        asked = [call("write_file", path=escaped, content="new\n"), call("read_file", path=SHOWN_BACKSLASH)]
        llm.push({"tool_calls": asked}, {"text": "finished"})
        proc = PtyExec(["edit the notes"], env, root, cols=400)
        try:
            proc.expect("choose 1-4", timeout=FIRST_TURN_TIMEOUT)
            assert f"Allow editing {escaped}?" in proc.text()
            proc.send(b"1\n")
            assert proc.wait() == 0
        finally:
            proc.kill()
        assert f"✓ edit    Write {escaped}  completed" in proc.text()
        # A person reads the backslash file's location escaped, as its title names it, never the exact form.
        back = f"{os.path.realpath(root)}/{SHOWN_BACKSLASH}"
        assert f"✓ read    Read {back}  {back}:1  completed" in proc.text()
        assert f"{os.path.realpath(root)}/{BACKSLASH}:1" not in proc.text()
        with open(target, "rb") as f:
            assert f.read() == b"new\n"

        reads = [call("read_file", path="caf\\xe9.txt"), call("read_file", path=SHOWN_BACKSLASH)]
        llm.push({"tool_calls": reads}, {"text": "read"})
        ran = run_piped(["--json", "read it"], env, root)
    assert ran.status == 0, ran.stderr[-3000:]
    assert "\\udc" not in ran.stdout.lower()
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    calls: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line["type"] == "update" and "toolCallId" in line["update"]:
            calls.setdefault(line["update"]["toolCallId"], {}).update(line["update"])
    real = os.path.realpath(root)
    byte_read, back_read = calls.values()
    assert byte_read["title"] == f"Read {real}/caf\\xe9.txt" and byte_read["status"] == "completed"
    assert text_of(byte_read) == "     1\tinside\n" and byte_read["locations"] == []
    # A script reads what an editor does: the exact name where it acts, the escaped one in the title.
    assert back_read["title"] == f"Read {real}/{SHOWN_BACKSLASH}" and text_of(back_read) == "     1\tbackslash\n"
    assert back_read["locations"] == [{"path": f"{real}/{BACKSLASH}", "line": 1}]
