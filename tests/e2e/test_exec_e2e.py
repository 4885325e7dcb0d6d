"""Issue 24 end to end: the real `term2 exec` process against the fake model server.

A person's view goes through a pseudo-terminal (rendering, approvals typed on
it, Ctrl-C as the key press); a script's through pipes (the final answer, the
JSON stream, exit statuses, approvals refused without a terminal); a pipeline
typed at a shell through pipes with the pty as the controlling terminal only
(approvals asked on /dev/tty). Sessions are shared with the real `term2 acp`
both ways, through one TERM2_HOME.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, updates
from tests.support.exec_process import PipedAtTerminal, PtyExec, Ran, exec_env, run_piped, start_piped
from tests.support.schemas import check_definition

EDIT_OPTIONS = [
    "1) Allow once",
    "2) Allow edits to this file (session)",
    "3) Allow edits in this folder (session)",
    "4) Reject",
]


@dataclass
class Setup:
    base: Path
    root: Path
    llm: FakeLLMServer
    ptys: list[PtyExec]
    pipelines: list[PipedAtTerminal] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.base / "term2-home"  # where AcpProcess(base) keeps its store too

    def env(self, **extra: str) -> dict[str, str]:
        return exec_env(self.home, {**llm_env(self.llm), **extra})

    def piped(self, *args: str, stdin: str = "", **extra: str) -> Ran:
        return run_piped(list(args), self.env(**extra), self.root, stdin)

    def pty(self, *args: str) -> PtyExec:
        proc = PtyExec(list(args), self.env(), self.root)
        self.ptys.append(proc)
        return proc

    def at_terminal(
        self, *args: str, stdin: str, view_on_terminal: bool = False, typed_ahead: bytes = b""
    ) -> PipedAtTerminal:
        proc = PipedAtTerminal(
            list(args), self.env(), self.root, stdin, view_on_terminal=view_on_terminal, typed_ahead=typed_ahead
        )
        self.pipelines.append(proc)
        return proc

    def outside_file(self, text: str = "old\n") -> Path:
        folder = self.base / "outside"
        folder.mkdir(exist_ok=True)
        target = folder / "notes.txt"
        target.write_text(text)
        return target

    def said_to_model(self, index: int = -1) -> str:
        return json.dumps(self.llm.requests[index].body)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    with start_fake_llm() as llm:
        made = Setup(tmp_path, root, llm, [])
        yield made
        for proc in made.ptys:
            proc.kill()
        for pipeline in made.pipelines:
            pipeline.kill()


def write_call(path: Path, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": str(path), "content": content}}


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """Every stdout line parsed; each must be one JSON object with a type."""
    assert stdout.endswith("\n"), f"unterminated last line: {stdout[-200:]!r}"
    objects = []
    for line in stdout.splitlines():
        obj = json.loads(line)
        assert isinstance(obj, dict) and obj.get("type") in ("update", "result"), line
        objects.append(obj)
    return objects


def result_of(stdout: str) -> dict[str, Any]:
    objects = json_lines(stdout)
    assert [o["type"] for o in objects].count("result") == 1 and objects[-1]["type"] == "result", objects
    return objects[-1]


# --- a person at a terminal --------------------------------------------------------


def test_a_text_turn_is_streamed_then_drawn_as_markdown_on_a_terminal(setup: Setup) -> None:
    setup.llm.push({"text": "# Heading\n\nSome **bold** words.\n\n- one\n- two", "chunks": 6})
    proc = setup.pty("say hi")
    assert proc.wait() == 0
    raw = proc.output
    assert b"Some **bold**" in raw, "the reply was not streamed as it came"
    assert b"\x1b[1mbold\x1b[0m" in raw, "the finished message was not rendered as Markdown"
    shown = proc.text()
    assert "• one" in shown and "• two" in shown
    assert "── end turn · " in shown and " in · " in shown and " out" in shown  # usage at the end
    assert shown.rstrip().endswith("out"), shown[-500:]


@pytest.mark.parametrize(("answer", "written", "mark"), [("1", "new\n", "✓"), ("4", "old\n", "✗")])
def test_an_approval_is_asked_and_answered_on_the_terminal(setup: Setup, answer: str, written: str, mark: str) -> None:
    target = setup.outside_file()
    setup.llm.push({"tool_calls": [write_call(target, "new\n")]}, {"text": "finished"})
    proc = setup.pty("edit the notes")
    proc.expect("choose 1-4")
    shown = proc.text()
    assert f"Allow editing {target}?" in shown
    assert all(option in shown for option in EDIT_OPTIONS), shown  # the choices ACP offers for an edit
    assert "-old" in shown and "+new" in shown  # the proposed diff, before anything is written
    assert target.read_text() == "old\n"
    proc.send(answer.encode() + b"\n")
    assert proc.wait() == (0 if answer == "1" else 6)  # 6: the user rejected a call the turn needed
    assert target.read_text() == written
    status = "completed" if mark == "✓" else "failed"
    assert f"{mark} edit    Write {target}  {status}" in proc.text()


def test_ctrl_c_on_the_terminal_cancels_the_turn_after_a_finished_edit(setup: Setup) -> None:
    target = setup.root / "made.txt"
    content = "".join(f"line {i}\n" for i in range(2000))
    setup.llm.push(
        {"tool_calls": [write_call(target, content)]},
        {"text": "now I think for a long while", "stall_after": 1, "stall_seconds": 60},
    )
    proc = setup.pty("write it")
    assert setup.llm.wait_for_request(2, timeout=60)
    proc.expect("now")  # the stalled reply has begun: the edit before it has finished
    proc.send(b"\x03")
    assert proc.wait() == 130
    shown = proc.text()
    assert f"✓ edit    Write {target}" in shown
    assert "cancelling the turn" in shown and "── cancelled" in shown
    assert target.read_text() == content


def test_ctrl_c_while_a_question_waits_cancels_the_turn_and_writes_nothing(setup: Setup) -> None:
    target = setup.outside_file()
    setup.llm.push({"tool_calls": [write_call(target, "new\n")]})
    proc = setup.pty("edit the notes")
    proc.expect("choose 1-4")
    proc.send(b"\x03")
    assert proc.wait() == 130
    assert "── cancelled" in proc.text()
    assert target.read_text() == "old\n"
    assert len(setup.llm.requests) == 1  # the model was not asked again


# --- a pipeline typed at a shell: the prompt piped, the person at the controlling terminal ---

needs_bwrap = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_shell needs /usr/bin/bwrap")

# Leaves a mark, lists the descriptors the sandboxed command holds and tries the terminal the user answers on.
PROBE = "touch ran.txt; ls -l /proc/self/fd/; cat /dev/tty || echo no terminal here"
SHELL_OPTIONS = ["1) Allow once", "2) Allow for this folder (session)", "3) Reject"]


def shell_call(command: str) -> dict[str, Any]:
    return {"name": "run_shell", "arguments": {"command": command}}


@needs_bwrap
@pytest.mark.parametrize("json_mode", [False, True], ids=["final-text", "json"])
@pytest.mark.parametrize("answer", ["y", "n"])
def test_a_piped_prompt_is_approved_on_the_controlling_terminal_and_stdout_stays_clean(
    setup: Setup, answer: str, json_mode: bool
) -> None:
    setup.llm.push({"tool_calls": [shell_call(PROBE)]}, {"text": "finished"})
    args = ["--json", "-"] if json_mode else ["-"]
    proc = setup.at_terminal(*args, stdin="fix the tests\n")
    proc.expect("choose 1-3")
    asked = proc.text()
    assert f"? Allow running `{PROBE}`" in asked and f"$ {PROBE}" in asked, asked
    assert all(option in asked for option in SHELL_OPTIONS), asked
    assert not (setup.root / "ran.txt").exists()  # nothing runs before the answer
    proc.send(answer.encode() + b"\n")
    assert proc.wait() == (0 if answer == "y" else 6), proc.stderr
    assert (setup.root / "ran.txt").exists() is (answer == "y")
    # stdout holds exactly what it held before there was a terminal to ask on; the question is not in it
    if json_mode:
        assert result_of(proc.stdout)["stopReason"] == "end_turn"
        calls = [o["update"] for o in json_lines(proc.stdout) if o["type"] == "update"]
        statuses = [u.get("status") for u in calls if u["sessionUpdate"] == "tool_call_update"]
        assert statuses[-1] == ("completed" if answer == "y" else "failed"), statuses
    else:
        assert proc.stdout == "finished\n"
    assert "choose" not in proc.stdout + proc.stderr and "refused without asking" not in proc.stderr
    sent = setup.said_to_model()
    if answer == "y":  # the sandboxed command holds no descriptor of the terminal and cannot open it
        assert "/dev/pts" not in sent and "cat: /dev/tty:" in sent and "no terminal here" in sent, sent[-2000:]
    else:
        assert "cat: /dev/tty" not in sent, sent[-2000:]


@needs_bwrap
def test_with_the_view_on_the_terminal_the_question_is_drawn_there_and_answered_from_dev_tty(setup: Setup) -> None:
    setup.llm.push({"tool_calls": [shell_call("touch ran.txt")]}, {"text": "reviewed"})
    proc = setup.at_terminal("review this", stdin="diff --git a/x b/x\n", view_on_terminal=True)
    proc.expect("choose 1-3")
    assert "? Allow running `touch ran.txt`" in proc.text()
    proc.send(b"1\n")
    assert proc.wait() == 0, proc.stderr
    assert (setup.root / "ran.txt").exists()
    shown = proc.text()
    assert "reviewed" in shown and "── end turn · " in shown  # the rich view drew the turn on the terminal
    assert "refused without asking" not in proc.stderr


@needs_bwrap
def test_keys_typed_before_the_question_do_not_answer_it(setup: Setup) -> None:
    setup.llm.push({"tool_calls": [shell_call("touch ran.txt")]}, {"text": "finished"})
    proc = setup.at_terminal("-", stdin="fix the tests\n", typed_ahead=b"y\n")
    proc.expect("choose 1-3")
    assert "not one of the options" not in proc.text()
    proc.send(b"n\n")  # had the early `y` counted, this would answer nothing and the command would have run
    assert proc.wait() == 6, proc.stderr  # rejected: the turn ended without a call it needed
    assert not (setup.root / "ran.txt").exists()
    assert proc.stdout == "finished\n"


def test_ctrl_c_while_a_question_waits_on_dev_tty_cancels_the_turn(setup: Setup) -> None:
    target = setup.outside_file()
    setup.llm.push({"tool_calls": [write_call(target, "new\n")]})
    proc = setup.at_terminal("-", stdin="edit the notes\n")
    proc.expect("choose 1-4")
    proc.send(b"\x03")  # the line discipline sends SIGINT to the foreground group, as the key does
    assert proc.wait() == 130
    assert target.read_text() == "old\n"
    assert len(setup.llm.requests) == 1  # the model was not asked again
    assert "cancelling the turn" in proc.stderr


def test_a_prompt_typed_on_stdin_up_to_ctrl_d_is_still_approved_on_the_terminal(setup: Setup) -> None:
    target = setup.outside_file()
    setup.llm.push({"tool_calls": [write_call(target, "new\n")]}, {"text": "finished"})
    proc = setup.pty("-")
    proc.send(b"edit the notes\n\x04")  # stdin is spent on the prompt; answers come from /dev/tty
    proc.expect("choose 1-4")
    proc.send(b"1\n")
    assert proc.wait() == 0
    assert target.read_text() == "new\n"
    assert "refused without asking" not in proc.text()


def test_a_piped_prompt_without_a_controlling_terminal_fails_closed_as_before(setup: Setup) -> None:
    target = setup.outside_file()
    setup.llm.push({"tool_calls": [write_call(target, "new\n")]}, {"text": "I could not."})
    ran = setup.piped("-", stdin="edit the notes\n")  # its own session, no terminal anywhere
    assert ran.status == 6  # the turn ended, but a call it needed was refused
    assert target.read_text() == "old\n"
    assert f"term2: refused without asking (no terminal to ask on): Allow editing {target}?" in ran.stderr
    assert ran.stdout == "I could not.\n"


# --- a script ----------------------------------------------------------------------


def test_without_a_terminal_every_approval_fails_closed_and_stdout_is_the_answer(setup: Setup) -> None:
    target = setup.outside_file()
    setup.llm.push({"text": "let me edit", "tool_calls": [write_call(target, "new\n")]}, {"text": "I could not."})
    ran = setup.piped("edit the notes")
    assert ran.status == 6  # the turn ended, but a call it needed was refused
    assert target.read_text() == "old\n"
    assert f"term2: refused without asking (no terminal to ask on): Allow editing {target}?" in ran.stderr
    assert ran.stdout == "I could not.\n"  # the final answer, and nothing else


def test_the_prompt_is_read_from_stdin(setup: Setup) -> None:
    assert setup.piped("-", stdin="from a pipe\n").stdout == "echo: from a pipe\n"
    assert setup.piped(stdin="no argument at all").stdout == "echo: no argument at all\n"


def test_what_is_piped_in_beside_a_prompt_is_its_context(setup: Setup) -> None:
    """`git diff | term2 exec "review this"`: the diff follows the prompt; /dev/null adds nothing."""
    ran = setup.piped("review this", stdin="diff --git a/x b/x\n+\xe9t\xe9\n")
    assert ran.stdout == "echo: review this\n\ndiff --git a/x b/x\n+\xe9t\xe9\n"
    assert setup.piped("review this").stdout == "echo: review this\n"  # an empty pipe


def test_json_is_the_acp_update_stream_then_one_result(setup: Setup) -> None:
    target = setup.root / "inside.txt"
    setup.llm.push({"text": "writing", "tool_calls": [write_call(target, "hello\n")]}, {"text": "done"})
    ran = setup.piped("--json", "write inside")
    assert ran.status == 0, ran.stderr
    objects = json_lines(ran.stdout)
    result = result_of(ran.stdout)
    session_id = result["sessionId"]
    for obj in objects[:-1]:
        assert obj["sessionId"] == session_id
        notification = {"sessionId": obj["sessionId"], "update": obj["update"]}
        check_definition(2, "UpdateSessionNotification", notification, "term2 exec --json line")
    kinds = [o["update"]["sessionUpdate"] for o in objects[:-1]]
    assert kinds[0] == "state_update" and kinds[1] == "user_message"
    assert "agent_message_chunk" in kinds and "tool_call_update" in kinds
    calls = [o["update"] for o in objects[:-1] if o["update"]["sessionUpdate"] == "tool_call_update"]
    assert calls[-1]["status"] == "completed" and calls[-1]["content"][0]["type"] == "diff"
    assert objects[-2]["update"] == {**objects[-2]["update"], "state": "idle", "stopReason": "end_turn"}
    assert result["stopReason"] == "end_turn"
    usage = result["usage"]
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert target.read_text() == "hello\n"


def test_sigint_ends_a_scripted_turn_cancelled_with_the_finished_edit_reported(setup: Setup) -> None:
    target = setup.root / "made.txt"
    content = "".join(f"row {i}\n" for i in range(2000))
    setup.llm.push(
        {"tool_calls": [write_call(target, content)]},
        {"text": "stalling now", "stall_after": 1, "stall_seconds": 60},
    )
    proc = start_piped(["--json", "write it"], setup.env(), setup.root)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(line.decode() for line in proc.stdout or ()), daemon=True)
    reader.start()
    try:
        assert setup.llm.wait_for_request(2, timeout=60)
        deadline = time.monotonic() + 60
        while not any('"agent_message_chunk"' in line for line in list(seen)):  # the stalled reply has begun
            assert time.monotonic() < deadline and proc.poll() is None, seen
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        reader.join(10)
        errors = proc.stderr.read() if proc.stderr else b""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, errors
    result = result_of("".join(seen))
    assert result["stopReason"] == "cancelled"
    stream = [o["update"] for o in json_lines("".join(seen)) if o["type"] == "update"]
    calls = [u for u in stream if u["sessionUpdate"] == "tool_call_update"]
    assert calls[-1]["status"] == "completed"
    assert target.read_text() == content
    assert b"cancelling the turn" in errors


TURN_ENDINGS = [
    ({"text": "all good"}, {}, 0, "end_turn"),
    ({"text": "I will not", "finish": "content_filter"}, {}, 3, "refusal"),
    ({"text": "cut sh", "finish": "length"}, {}, 4, "max_tokens"),
    (
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]},
        {"TERM2_MAX_TURN_REQUESTS": "1"},
        5,
        "max_turn_requests",
    ),
    ({"status": 401}, {}, 1, "error"),
]


@pytest.mark.parametrize(("reply", "env", "status", "stop"), TURN_ENDINGS, ids=[t[3] for t in TURN_ENDINGS])
def test_each_way_a_turn_ends_has_its_exit_status(
    setup: Setup, reply: dict[str, Any], env: dict[str, str], status: int, stop: str
) -> None:
    setup.llm.push(reply)
    ran = setup.piped("--json", "go", **env)
    assert ran.status == status, ran.stderr
    result = result_of(ran.stdout)
    assert result["stopReason"] == stop
    assert ("error" in result) is (stop == "error")


def test_a_refused_command_line_folder_or_session_exits_2_with_nothing_on_stdout(setup: Setup) -> None:
    for args in (
        ["--cd", "/", "go"],
        ["--cd", str(setup.base / "missing"), "go"],
        ["--resume", "sess_unknown", "go"],
        ["--continue", "go"],  # no session in the folder yet
        ["--resume", "x", "--continue", "go"],
        ["--effort", "extreme", "go"],
        [" "],
    ):
        ran = setup.piped(*args)
        assert ran.status == 2, (args, ran)
        assert ran.stdout == "", args
        assert "error" in ran.stderr.lower(), (args, ran.stderr)
    assert not setup.llm.requests


# --- the same sessions as the editor ---------------------------------------------


def test_exec_resumes_a_session_made_over_acp(setup: Setup) -> None:
    acp = AcpProcess(setup.base, env=llm_env(setup.llm))
    try:
        acp.initialize(2)
        session_id = acp.new_session(setup.root)
        acp.prompt_v2(session_id, "remember the word apricot")
        assert acp.close() == 0
        acp.validate_schemas()
    finally:
        acp.kill()
    ran = setup.piped("--json", "--resume", session_id, "which word?")
    assert ran.status == 0, ran.stderr
    assert result_of(ran.stdout)["sessionId"] == session_id
    assert "remember the word apricot" in setup.said_to_model() and "which word?" in setup.said_to_model()
    again = setup.piped("--json", "--continue", "and again?")
    assert result_of(again.stdout)["sessionId"] == session_id
    assert "which word?" in setup.said_to_model()


def test_an_editor_lists_and_resumes_a_session_made_by_exec(setup: Setup) -> None:
    made = setup.piped("--json", "remember the word quince")
    session_id = result_of(made.stdout)["sessionId"]
    acp = AcpProcess(setup.base, env=llm_env(setup.llm))
    try:
        acp.initialize(2)
        listed = acp.result("session/list", {"cwd": str(setup.root)})["sessions"]
        assert [(s["sessionId"], s["cwd"]) for s in listed] == [(session_id, os.path.realpath(setup.root))]
        assert listed[0]["title"].startswith("remember the word quince")
        replayed = acp.call(
            "session/resume", {"sessionId": session_id, "cwd": str(setup.root), "replayFrom": {"type": "start"}}
        )
        assert "result" in replayed, replayed
        texts = [u["content"][0]["text"] for u in updates(acp.log, "user_message")]
        assert texts == ["remember the word quince"]
        acp.prompt_v2(session_id, "which word was it?")
        assert "remember the word quince" in setup.said_to_model()
        assert acp.close() == 0
        acp.validate_schemas()
    finally:
        acp.kill()
