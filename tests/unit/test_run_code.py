"""run_code (issue 6): the bridge, nested approvals and the result, with a scripted program.

The ScriptedSandbox stands in for bwrap: the "program" is a Python function
run in a worker thread with the bridge socket, speaking the wire protocol by
hand (so it can also forge whatever it likes). Nothing runs on the host. The
same cases against the real sandbox are in
tests/contract/test_run_code_bridge_contract.py.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from term2.adapters.acp.approval_bridge import AcpApprover, v1_params, v2_params
from term2.adapters.sandbox.scripted import Script, ScriptedSandbox
from term2.app.tools import WorkspaceToolbox
from term2.app.tools.bridge import MAX_MESSAGE_BYTES
from term2.app.tools.run_code import OUTPUT_LIMIT
from term2.app.tools.run_code_program import launcher_command
from term2.app.turn import Turn
from term2.domain.approval import Choice
from term2.domain.history import HistoryEntry, ToolCall, ToolKind, ToolStatus
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision, ApprovalRequest, Approver
from term2.ports.llm import ToolCallRequest
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged
from tests.fakes.permission_client import GrantingClient
from tests.fakes.sinks import RecordingSink
from tests.support.schemas import validate_outgoing
from tests.support.toolboxes import workspace_toolbox

pytestmark = pytest.mark.anyio

SESSION = "sess-rc"
PARENT = "rc-1"
CODE = 'print("the model\'s program; the scripted sandbox never runs it")\n'
ProgramFn = Callable[[socket.socket], bytes]


# --- the program side, by hand ---------------------------------------------------------


class Wire:
    """A program's end of the bridge: one JSON line per request, one reply line back."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.file = sock.makefile("rb")
        self.ids = iter(range(1, 1 << 30))

    def send_line(self, data: bytes) -> None:
        self.sock.sendall(data + b"\n")

    def reply(self) -> dict[str, Any] | None:
        try:
            line = self.file.readline()
        except OSError:
            return None
        return json.loads(line) if line else None

    def request(self, message: object) -> dict[str, Any] | None:
        self.send_line(json.dumps(message).encode())
        return self.reply()

    def call(self, tool: str, **args: object) -> dict[str, Any]:
        request_id = next(self.ids)
        reply = self.request({"id": request_id, "tool": tool, "args": args})
        assert reply is not None, f"bridge closed on {tool}"
        assert reply["id"] == request_id
        return reply

    def program(self) -> str:
        reply = self.call("__program__")
        assert reply["ok"], reply
        return str(reply["result"])


def program(body: Callable[[Wire], bytes | None]) -> ProgramFn:
    """A scripted program that fetches its text first, like the real launcher."""

    def run(sock: socket.socket) -> bytes:
        wire = Wire(sock)
        assert wire.program() == CODE
        return body(wire) or b""

    return run


# --- harness --------------------------------------------------------------------------


def allow_once(_request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(Choice.ALLOW_ONCE)


def reject(_request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(None, "rejected")


@dataclass
class Approvals:
    """Allows the run_code call itself; nested calls are answered by `nested` (or `delegate`)."""

    nested: Callable[[ApprovalRequest], ApprovalDecision] = reject
    delegate: Approver | None = None
    requests: list[ApprovalRequest] = field(default_factory=list)

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        if request.tool_call.tool_call_id == PARENT:
            return ApprovalDecision(Choice.ALLOW_ONCE)
        if self.delegate is not None:
            return await self.delegate.request(request)
        return self.nested(request)

    def nested_requests(self) -> list[ApprovalRequest]:
        return [r for r in self.requests if r.tool_call.tool_call_id != PARENT]


def live_turn() -> Turn:
    turn = Turn()
    turn.admit(SESSION)
    return turn


@dataclass
class Harness:
    root: Path
    outside: Path
    approvals: Approvals = field(default_factory=Approvals)
    sandbox: ScriptedSandbox = field(default_factory=ScriptedSandbox)
    events: list[SessionEvent] = field(default_factory=list)
    records: list[HistoryEntry] = field(default_factory=list)
    turn: Turn = field(default_factory=live_turn)

    async def run(self, fn: ProgramFn, *, exit_code: int = 0, notices: tuple[str, ...] = (), **args: object) -> str:
        self.sandbox.add(launcher_command(), Script(program=fn, exit_code=exit_code, notices=notices))

        async def emit(event: SessionEvent) -> None:
            self.events.append(event)

        async def record(entry: HistoryEntry) -> None:
            self.records.append(entry)

        access = SessionAccess(str(self.root))
        ctx = ToolContext(SESSION, access, self.approvals, self.sandbox, emit, record, self.turn)
        request = ToolCallRequest(PARENT, "run_code", json.dumps({"code": CODE, **args}))
        with anyio.fail_after(30):
            return await workspace_toolbox().execute(request, ctx)

    def calls(self) -> list[ToolCall]:
        return [e.call for e in self.events if isinstance(e, ToolCallChanged)]

    def final(self, call_id: str) -> ToolCall:
        return [c for c in self.calls() if c.tool_call_id == call_id][-1]

    def statuses(self, call_id: str) -> list[ToolStatus]:
        return [c.status for c in self.calls() if c.tool_call_id == call_id]


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return Harness(Path(os.path.realpath(root)), Path(os.path.realpath(outside)))


# --- projection of a nested call into a permission request -----------------------------


async def test_nested_write_outside_the_root_is_asked_for_the_nested_call_linked_to_its_parent(h: Harness) -> None:
    target = h.outside / "out.txt"
    seen: list[dict[str, Any]] = []

    def body(wire: Wire) -> None:
        seen.append(wire.call("read_file", path="a.txt"))
        seen.append(wire.call("write_file", path=str(target), content="nested\n"))

    result = await h.run(program(body))

    [asked] = h.approvals.nested_requests()
    assert asked.session_id == SESSION
    assert asked.tool_call.tool_call_id == f"{PARENT}.2"
    assert asked.tool_call.parent_id == PARENT
    assert asked.tool_call.kind is ToolKind.EDIT
    assert asked.tool_call.status is ToolStatus.PENDING
    assert str(target) in asked.title
    assert asked.command is None
    assert not target.exists()
    assert seen[0]["ok"] and "alpha" in seen[0]["result"]
    assert not seen[1]["ok"] and "rejected" in seen[1]["error"]
    # the run_code call itself was asked as a command, and is not linked to anything
    own = h.approvals.requests[0]
    assert own.tool_call.tool_call_id == PARENT and own.tool_call.parent_id is None
    assert own.command is not None and own.command.command.startswith("python3 <program")
    assert f"{PARENT}.2 write_file: failed" in result


@pytest.mark.parametrize("version", [1, 2])
async def test_permission_params_for_a_nested_call_carry_the_parent_and_validate(h: Harness, version: int) -> None:
    target = h.outside / "out.txt"
    await h.run(program(lambda wire: wire.call("write_file", path=str(target), content="x") and None))

    [asked] = h.approvals.nested_requests()
    params = v2_params(asked) if version == 2 else v1_params(asked)
    tool_call = params["subject"]["toolCall"] if version == 2 else params["toolCall"]
    assert tool_call["toolCallId"] == f"{PARENT}.1"
    assert tool_call["_meta"] == {"term2": {"parentToolCallId": PARENT}}
    message = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": params}
    validate_outgoing(version, message)
    # the parent's own request names no parent
    own = h.approvals.requests[0]
    own_params = v2_params(own) if version == 2 else v1_params(own)
    assert "_meta" not in json.dumps(own_params)
    validate_outgoing(version, {**message, "params": own_params})


async def test_nested_calls_are_their_own_tool_calls_linked_to_the_parent(h: Harness) -> None:
    target = h.outside / "allowed.txt"
    h.approvals.nested = allow_once

    def body(wire: Wire) -> None:
        assert wire.call("write_file", path="inside.txt", content="in\n")["ok"]
        assert wire.call("write_file", path=str(target), content="out\n")["ok"]
        assert not wire.call("read_file", path="missing.txt")["ok"]

    result = await h.run(program(body))

    assert (h.root / "inside.txt").read_text() == "in\n"
    assert target.read_text() == "out\n"
    assert [r.tool_call.tool_call_id for r in h.approvals.nested_requests()] == [f"{PARENT}.2"]
    for n in (1, 2):
        assert h.statuses(f"{PARENT}.{n}") == [ToolStatus.PENDING, ToolStatus.IN_PROGRESS, ToolStatus.COMPLETED]
    assert h.final(f"{PARENT}.3").status is ToolStatus.FAILED
    nested = [c for c in h.calls() if c.tool_call_id != PARENT]
    assert nested and all(c.parent_id == PARENT for c in nested)
    assert all(c.parent_id is None for c in h.calls() if c.tool_call_id == PARENT)
    recorded = [e for e in h.records if isinstance(e, ToolCall) and e.tool_call_id != PARENT]
    assert recorded and all(e.parent_id == PARENT for e in recorded)
    assert h.final(PARENT).status is ToolStatus.COMPLETED
    assert "nested tool calls: 3" in result
    assert f"{PARENT}.1 write_file: ok" in result
    assert f"{PARENT}.2 write_file: ok" in result
    assert f"{PARENT}.3 read_file: failed" in result


# --- denial when no interaction resolves -------------------------------------------------


def nothing(_turn: Turn) -> None:
    return None


# name: (what happens to the prompt just before the nested call, while its question is pending,
#        the denial, was the client asked)
SETUPS: dict[str, tuple[Callable[[Turn], None], Callable[[Turn], None], str, bool]] = {
    "prompt_settled_before": (Turn.settle, nothing, "no_interaction", False),
    "cancelled_while_pending": (nothing, Turn.cancel, "stale", True),
    "closed_while_pending": (nothing, Turn.invalidate, "stale", True),
    "settled_while_pending": (nothing, Turn.settle, "stale", True),
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", sorted(SETUPS))
async def test_nested_approval_without_a_resolvable_interaction_is_denied(h: Harness, case: str, version: int) -> None:
    """The tool gate's liveness rule reaches nested calls: the program outlives nothing it was allowed."""
    before, during, reason, client_asked = SETUPS[case]
    connection = GrantingClient(partial(during, h.turn))
    h.approvals.delegate = AcpApprover(cast(Any, connection), version, cast(Any, RecordingSink()))
    target = h.outside / "denied.txt"
    seen: list[dict[str, Any]] = []

    def body(wire: Wire) -> None:
        anyio.from_thread.run_sync(before, h.turn)
        seen.append(wire.call("write_file", path=str(target), content="no\n"))
        seen.append(wire.call("read_file", path="a.txt"))  # the program carries on

    result = await h.run(program(body))

    assert not target.exists()
    assert not seen[0]["ok"] and f"({reason})" in seen[0]["error"]
    assert seen[1]["ok"]
    assert h.final(f"{PARENT}.1").status is ToolStatus.FAILED
    assert h.final(f"{PARENT}.1").parent_id == PARENT
    assert bool(connection.sent) is client_asked
    if client_asked:  # what the client was asked named the parent
        [(method, params)] = connection.sent
        assert method == "session/request_permission"
        tool_call = params["subject"]["toolCall"] if version == 2 else params["toolCall"]
        assert tool_call["_meta"]["term2"]["parentToolCallId"] == PARENT
    assert f"{PARENT}.1 write_file: failed" in result


async def test_nested_approval_with_a_live_interaction_is_allowed(h: Harness) -> None:
    connection = GrantingClient()
    h.approvals.delegate = AcpApprover(cast(Any, connection), 2, cast(Any, RecordingSink()))
    target = h.outside / "allowed.txt"

    await h.run(program(lambda wire: wire.call("write_file", path=str(target), content="yes\n") and None))

    assert target.read_text() == "yes\n"
    assert len(connection.sent) == 1
    assert h.final(f"{PARENT}.1").status is ToolStatus.COMPLETED


# --- bridge robustness ----------------------------------------------------------------


FORGED: dict[str, tuple[bytes, str]] = {
    "not_json": (b"{this is not json", "not valid JSON"),
    "not_utf8": (b"\xff\xfe\x00garbage", "not valid JSON"),
    "not_an_object": (b"[1, 2, 3]", "must be a JSON object"),
    "a_string": (b'"read_file"', "must be a JSON object"),
    "args_not_an_object": (b'{"id": 5, "tool": "read_file", "args": ["a.txt"]}', "args must be a JSON object"),
    "args_null": (b'{"id": 5, "tool": "read_file", "args": null}', "args must be a JSON object"),
    "unknown_tool": (b'{"id": 5, "tool": "delete_everything", "args": {}}', "unknown tool"),
    "tool_not_a_string": (b'{"id": 5, "tool": ["read_file"], "args": {}}', "unknown tool"),
    "no_tool": (b'{"id": 5, "args": {"path": "a.txt"}}', "unknown tool"),
    "recursive_run_code": (b'{"id": 5, "tool": "run_code", "args": {"code": "pass"}}', "unknown tool"),
    "program_repeated": (b'{"id": 5, "tool": "__program__"}', "unknown tool"),
}


@pytest.mark.parametrize("case", sorted(FORGED))
async def test_a_forged_message_is_refused_and_the_program_carries_on(h: Harness, case: str) -> None:
    line, error = FORGED[case]
    seen: list[dict[str, Any] | None] = []

    def body(wire: Wire) -> None:
        wire.send_line(line)
        seen.append(wire.reply())
        seen.append(wire.call("write_file", path="after.txt", content="still here\n"))

    result = await h.run(program(body))

    refusal, after = seen
    assert refusal is not None and refusal["ok"] is False
    assert error in refusal["error"]
    assert "result" not in refusal
    assert CODE not in json.dumps(refusal)
    assert after is not None and after["ok"], after
    assert (h.root / "after.txt").read_text() == "still here\n"
    # only the good call became a tool call; the forged one ran nothing and asked nothing
    assert {c.tool_call_id for c in h.calls()} == {PARENT, f"{PARENT}.1"}
    assert h.approvals.nested_requests() == []
    assert "nested tool calls: 1" in result
    assert "refused malformed or unknown requests: 1" in result
    assert h.final(PARENT).status is ToolStatus.COMPLETED


async def test_refusals_echo_the_request_id_when_there_is_one(h: Harness) -> None:
    seen: list[dict[str, Any] | None] = []

    def body(wire: Wire) -> None:
        seen.append(wire.request({"id": "abc", "tool": "nope"}))
        seen.append(wire.request({"id": 42, "tool": "read_file", "args": 1}))
        wire.send_line(b"not json")
        seen.append(wire.reply())

    await h.run(program(body))

    assert [r["id"] if r else "closed" for r in seen] == ["abc", 42, None]
    assert "available: " in seen[0]["error"] and "run_code" not in seen[0]["error"]  # type: ignore[index]


async def test_a_huge_message_is_refused_and_closes_the_channel(h: Harness) -> None:
    seen: dict[str, Any] = {}

    def body(wire: Wire) -> None:
        huge = json.dumps(
            {"id": 1, "tool": "write_file", "args": {"path": "huge.txt", "content": "x" * MAX_MESSAGE_BYTES}}
        )
        try:
            wire.send_line(huge.encode())
            seen["send"] = "sent"
        except OSError as exc:
            seen["send"] = f"failed: {exc}"
        seen["reply"] = wire.reply()
        try:
            wire.send_line(json.dumps({"id": 2, "tool": "read_file", "args": {"path": "a.txt"}}).encode())
            seen["later"] = wire.reply()
        except OSError as exc:
            seen["later"] = f"failed: {exc}"

    result = await h.run(program(body))

    reply = seen["reply"]
    # Either the program reads the refusal, or its write fails once the bridge hangs up.
    assert reply is None or (reply["ok"] is False and "bridge closed" in reply["error"])
    later = seen["later"]
    assert later is None or (isinstance(later, str) and later.startswith("failed")), later
    assert not (h.root / "huge.txt").exists()
    assert [c.tool_call_id for c in h.calls() if c.tool_call_id != PARENT] == []
    assert "nested tool calls: 0" in result
    assert "refused malformed or unknown requests: 1" in result


def padded(message: dict[str, Any], size: int) -> bytes:
    """A valid request exactly `size` bytes long (JSON allows trailing spaces)."""
    text = json.dumps(message).encode()
    return text + b" " * (size - len(text))


@pytest.mark.parametrize("size", [MAX_MESSAGE_BYTES - 1, MAX_MESSAGE_BYTES])
async def test_a_message_up_to_the_limit_is_served(h: Harness, size: int) -> None:
    content = "y" * (MAX_MESSAGE_BYTES - 200)
    seen: list[dict[str, Any] | None] = []

    def body(wire: Wire) -> None:
        line = padded({"id": 1, "tool": "write_file", "args": {"path": "big.txt", "content": content}}, size)
        wire.send_line(line)
        seen.append(wire.reply())

    await h.run(program(body))

    assert seen[0] is not None and seen[0]["ok"], seen
    assert (h.root / "big.txt").read_text() == content


@pytest.mark.parametrize("over", [1, 100, 70_000])
async def test_a_complete_line_over_the_limit_is_refused(h: Harness, over: int) -> None:
    seen: list[object] = []

    def body(wire: Wire) -> None:
        line = padded(
            {"id": 1, "tool": "write_file", "args": {"path": "big.txt", "content": "y"}}, MAX_MESSAGE_BYTES + over
        )
        try:
            wire.send_line(line)
        except OSError as exc:
            seen.append(exc)
        seen.append(wire.reply())

    result = await h.run(program(body))

    reply = seen[-1]
    assert reply is None or (isinstance(reply, dict) and not reply["ok"] and "bridge closed" in reply["error"])
    assert not (h.root / "big.txt").exists()
    assert "refused malformed or unknown requests: 1" in result


async def test_the_program_text_is_handed_out_once(h: Harness) -> None:
    seen: list[dict[str, Any]] = []

    def body(wire: Wire) -> None:
        seen.append(wire.call("__program__"))

    result = await h.run(program(body))

    assert seen[0]["ok"] is False and "result" not in seen[0]
    assert "refused malformed or unknown requests: 1" in result


async def test_a_program_that_closes_its_end_mid_message_ends_the_bridge(h: Harness) -> None:
    def body(wire: Wire) -> bytes:
        wire.sock.sendall(b'{"id": 1, "tool": "write_file", "args": {"path": "half.txt"')
        wire.sock.shutdown(socket.SHUT_WR)
        return b"bye\n"

    result = await h.run(program(body))

    assert not (h.root / "half.txt").exists()
    assert result.startswith("Exit code: 0\nbye")
    assert "nested tool calls: none" in result


# --- the run_code result ----------------------------------------------------------------


async def test_result_has_status_output_and_summary(h: Harness) -> None:
    def body(wire: Wire) -> bytes:
        wire.call("list_dir", path=".")
        wire.call("read_file", path="nope.txt")
        return b"hello from the program\n"

    result = await h.run(program(body))

    lines = result.splitlines()
    assert lines[0] == "Exit code: 0"
    assert "hello from the program" in lines
    assert result.endswith(f"nested tool calls: 2\n  {PARENT}.1 list_dir: ok\n  {PARENT}.2 read_file: failed")
    assert h.final(PARENT).status is ToolStatus.COMPLETED
    assert h.final(PARENT).kind is ToolKind.EXECUTE


async def test_a_program_without_calls_says_so(h: Harness) -> None:
    result = await h.run(program(lambda _wire: b"quiet\n"))
    assert result == "Exit code: 0\nquiet\n\nnested tool calls: none"


async def test_a_non_zero_exit_fails_the_call_but_keeps_the_summary(h: Harness) -> None:
    def body(wire: Wire) -> bytes:
        wire.call("write_file", path="before-exit.txt", content="1")
        return b"Traceback: boom\n"

    result = await h.run(program(body), exit_code=3)

    assert result.startswith("Exit code: 3\nTraceback: boom")
    assert f"{PARENT}.1 write_file: ok" in result
    assert (h.root / "before-exit.txt").exists()
    assert h.final(PARENT).status is ToolStatus.FAILED


async def test_a_program_flooding_past_the_cap_is_reported_killed_with_a_marker(h: Harness) -> None:
    result = await h.run(program(lambda _wire: b"z" * (OUTPUT_LIMIT * 2)))

    # The sandbox kills a flood before any exit status: there is no exit code to report.
    assert result.splitlines()[0] == f"Killed for writing more than the {OUTPUT_LIMIT}-byte output limit."
    assert "None" not in result
    assert f"[output truncated by the sandbox after {OUTPUT_LIMIT} bytes]" in result
    assert result.count("z") == OUTPUT_LIMIT
    assert "nested tool calls: none" in result
    assert h.final(PARENT).status is ToolStatus.FAILED


async def test_the_sandboxs_notices_follow_the_programs_output(h: Harness) -> None:
    notice = "term2 quarantined sub/.git: this command created a .git entry"

    result = await h.run(program(lambda _wire: b"made\n"), notices=(notice,))

    assert result == f"Exit code: 0\nmade\n\n[{notice}]\nnested tool calls: none"


async def test_a_program_past_its_timeout_is_stopped(h: Harness) -> None:
    seen: list[object] = []

    def body(wire: Wire) -> None:
        wire.call("read_file", path="a.txt")
        seen.append(wire.sock.recv(1))  # waits for a reply that never comes: the run ends first

    with anyio.fail_after(60):  # a guard against a hang only
        result = await h.run(program(body), timeout=3)  # room for the program to make its call on a busy machine

    assert result.startswith("Timed out after 3 s and was killed.\n")
    assert f"{PARENT}.1 read_file: ok" in result
    assert h.final(PARENT).status is ToolStatus.FAILED


async def test_sandbox_setup_failure_is_reported_and_nothing_ran(h: Harness) -> None:
    h.sandbox.add(launcher_command(), Script(setup_failure="bwrap is broken"))
    ctx = ToolContext(SESSION, SessionAccess(str(h.root)), h.approvals, h.sandbox, _noop, _noop, h.turn)

    result = await WorkspaceToolbox().execute(ToolCallRequest(PARENT, "run_code", json.dumps({"code": CODE})), ctx)

    assert result == "Error: The sandbox failed to start, so the program did not run: bwrap is broken"


async def test_an_unavailable_sandbox_is_reported_and_nothing_ran(h: Harness) -> None:
    sandbox = ScriptedSandbox(unavailable="no bwrap here")
    ctx = ToolContext(SESSION, SessionAccess(str(h.root)), h.approvals, sandbox, _noop, _noop, h.turn)

    result = await WorkspaceToolbox().execute(ToolCallRequest(PARENT, "run_code", json.dumps({"code": CODE})), ctx)

    assert result == "Error: The sandbox is unavailable, so the program did not run: no bwrap here"
    assert sandbox.calls == []


async def _noop(_item: object) -> None:
    return None


@pytest.mark.parametrize("args", [{}, {"code": "   \n"}, {"code": 3}, {"code": "x", "timeout": -1}])
async def test_bad_arguments_fail_before_anything_runs(h: Harness, args: dict[str, Any]) -> None:
    ctx = ToolContext(SESSION, SessionAccess(str(h.root)), h.approvals, h.sandbox, _noop, _noop, h.turn)

    result = await WorkspaceToolbox().execute(ToolCallRequest(PARENT, "run_code", json.dumps(args)), ctx)

    assert result.startswith("Error: invalid arguments for run_code")
    assert h.sandbox.calls == []
    assert h.approvals.requests == []


def test_the_launcher_keeps_the_program_off_the_command_line() -> None:
    command = launcher_command()
    assert CODE not in command
    assert command.startswith("exec python3 -I -c ")
    assert "'" not in command.split("b64decode(", 1)[1].strip("')\"")
