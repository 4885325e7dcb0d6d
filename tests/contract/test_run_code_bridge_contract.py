"""Contract for run_code's bridge: the same cases on the real sandbox and the scripted one.

With BubblewrapSandbox the program is real Python run by the sandbox's
python3, calling `tools.<name>(...)` through the launcher. With
ScriptedSandbox the same steps are simulated in the test over the bridge
socket (nothing runs on the host), with the launcher's `ToolError` semantics.
Both must give the same observations: what was asked, what was written, what
the program saw, how the run_code call ended and what its result says.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from term2.adapters.sandbox import BubblewrapSandbox, Script, ScriptedSandbox
from term2.adapters.store.codec import decode_entry, encode_entry
from term2.app.tools.run_code_program import launcher_command
from term2.domain.approval import Choice
from term2.domain.history import HistoryEntry, ToolCall, ToolStatus
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision, ApprovalRequest
from term2.ports.llm import ToolCallRequest
from term2.ports.sandbox import Sandbox
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged
from tests.fakes.turns import live_turn
from tests.support.toolboxes import workspace_toolbox

pytestmark = pytest.mark.anyio

HAVE_BWRAP = os.path.exists("/usr/bin/bwrap")
PARENT = "rc-1"


@pytest.fixture(scope="module")
def bubblewrap() -> BubblewrapSandbox:
    return BubblewrapSandbox()  # one instance: its availability probe is paid once


# --- the simulated program side ----------------------------------------------------------


class ToolError(Exception):
    """What `tools.<name>()` raises inside a real program."""


class Simulated:
    """The launcher's `tools` object, played by the test over the bridge socket."""

    def __init__(self, sock: socket.socket, outside: Path) -> None:
        self.sock = sock
        self.file = sock.makefile("rb")
        self.outside = outside
        self.out: list[str] = []
        self.ids = iter(range(1, 1 << 30))
        program = self.call("__program__")  # what the launcher asks first
        assert isinstance(program, str) and program

    def call(self, tool: str, **args: object) -> str:
        request_id = next(self.ids)
        try:
            self.sock.sendall(json.dumps({"id": request_id, "tool": tool, "args": args}).encode() + b"\n")
            line = self.file.readline()
        except OSError as exc:
            raise ToolError(f"the term2 bridge is closed: {exc}") from exc
        if not line:
            raise ToolError("the term2 bridge is closed")
        reply = json.loads(line)
        assert reply["id"] == request_id
        if not reply["ok"]:
            raise ToolError(reply["error"])
        return str(reply["result"])

    def print(self, *parts: object) -> None:
        self.out.append(" ".join(str(p) for p in parts) + "\n")


# --- cases -----------------------------------------------------------------------------


def allow(_request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(Choice.ALLOW_ONCE)


def reject(_request: ApprovalRequest) -> ApprovalDecision:
    return ApprovalDecision(None, "rejected")


@dataclass(frozen=True)
class Case:
    source: str  # the real program; `{outside}` is the outside folder
    simulate: Callable[[Simulated], None]  # the same steps, for the scripted sandbox
    nested: Callable[[ApprovalRequest], ApprovalDecision] = reject
    exit_code: int = 0
    timeout: float | None = None


def sim_read(p: Simulated) -> None:
    p.print("read:", p.call("read_file", path="a.txt").strip().splitlines()[0])


def sim_write_inside(p: Simulated) -> None:
    p.call("write_file", path="made.txt", content="made inside\n")
    p.print("wrote inside")


def sim_write_outside(p: Simulated) -> None:
    try:
        p.call("write_file", path=str(p.outside / "out.txt"), content="made outside\n")
        p.print("outside: written")
    except ToolError as exc:
        p.print("outside: ToolError", exc)
    p.print("after")


def sim_unknown_tool(p: Simulated) -> None:
    try:
        p.call("delete_everything", path="/")
    except ToolError as exc:
        p.print("unknown: ToolError", exc)
    try:
        p.call("run_code", code="print(1)")
    except ToolError as exc:
        p.print("recursive: ToolError", exc)
    p.print("read:", p.call("read_file", path="a.txt").strip().splitlines()[0])


def sim_exit_3(p: Simulated) -> None:
    p.call("write_file", path="before-exit.txt", content="x\n")
    p.print("exiting with 3")


def sim_uncaught_denial(p: Simulated) -> None:
    try:
        p.call("write_file", path=str(p.outside / "out.txt"), content="no\n")
    except ToolError as exc:
        p.print("Traceback (most recent call last):\nToolError:", exc)


def sim_forged(p: Simulated) -> None:
    p.sock.sendall(b"{not json at all\n")
    reply = json.loads(p.file.readline())
    p.print("forged:", reply["error"])
    p.print("read:", p.call("read_file", path="a.txt").strip().splitlines()[0])


FORGED_SOURCE = """
import json, os
def bridge_fd():  # TERM2_BRIDGE_FD is gone from the environment; the socket is still open
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + n).startswith("socket:"):
                return int(n)
        except OSError:
            pass
fd = bridge_fd()
os.write(fd, b"{not json at all\\n")
reply = b""
while not reply.endswith(b"\\n"):
    reply += os.read(fd, 65536)
print("forged:", json.loads(reply)["error"])
print("read:", tools.read_file(path="a.txt").strip().splitlines()[0])
"""


def sim_timeout(p: Simulated) -> None:
    p.call("read_file", path="a.txt")
    p.print("sleeping")
    p.sock.recv(1)  # blocks until the run ends and the bridge closes


CASES: dict[str, Case] = {
    "read_inside_without_approval": Case(
        'print("read:", tools.read_file(path="a.txt").strip().splitlines()[0])\n',
        sim_read,
    ),
    "write_inside_without_approval": Case(
        'tools.write_file(path="made.txt", content="made inside\\n")\nprint("wrote inside")\n',
        sim_write_inside,
    ),
    "write_outside_denied": Case(
        "try:\n"
        '    tools.write_file(path="{outside}/out.txt", content="made outside\\n")\n'
        '    print("outside: written")\n'
        "except ToolError as exc:\n"
        '    print("outside: ToolError", exc)\n'
        'print("after")\n',
        sim_write_outside,
        nested=reject,
    ),
    "write_outside_allowed": Case(
        "try:\n"
        '    tools.write_file(path="{outside}/out.txt", content="made outside\\n")\n'
        '    print("outside: written")\n'
        "except ToolError as exc:\n"
        '    print("outside: ToolError", exc)\n'
        'print("after")\n',
        sim_write_outside,
        nested=allow,
    ),
    "unknown_tool_raises_and_the_program_continues": Case(
        "try:\n"
        '    tools.delete_everything(path="/")\n'
        "except ToolError as exc:\n"
        '    print("unknown: ToolError", exc)\n'
        "try:\n"
        '    tools.run_code(code="print(1)")\n'
        "except ToolError as exc:\n"
        '    print("recursive: ToolError", exc)\n'
        'print("read:", tools.read_file(path="a.txt").strip().splitlines()[0])\n',
        sim_unknown_tool,
    ),
    "non_zero_exit": Case(
        'tools.write_file(path="before-exit.txt", content="x\\n")\nprint("exiting with 3", flush=True)\n'
        "raise SystemExit(3)\n",
        sim_exit_3,
        exit_code=3,
    ),
    "uncaught_denial_ends_the_program": Case(
        'tools.write_file(path="{outside}/out.txt", content="no\\n")\nprint("not reached")\n',
        sim_uncaught_denial,
        exit_code=1,
    ),
    "forged_line_on_the_raw_socket": Case(FORGED_SOURCE, sim_forged),
    "timeout_kills_the_program": Case(
        'tools.read_file(path="a.txt")\nprint("sleeping", flush=True)\nimport time\ntime.sleep(60)\n',
        sim_timeout,
        timeout=2,
    ),
}


# --- harness -----------------------------------------------------------------------------


@dataclass
class Run:
    result: str
    asked: list[ApprovalRequest]
    calls: list[ToolCall]
    records: list[HistoryEntry]

    def final(self, call_id: str) -> ToolCall:
        return [c for c in self.calls if c.tool_call_id == call_id][-1]

    def nested_ids(self) -> list[str]:
        return sorted({c.tool_call_id for c in self.calls if c.tool_call_id != PARENT})

    @property
    def output(self) -> str:
        return self.result.split("\n", 1)[1] if "\n" in self.result else ""


@dataclass
class Harness:
    kind: str
    sandbox: Sandbox
    root: Path
    outside: Path
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def run(self, name: str | Case) -> Run:
        case = CASES[name] if isinstance(name, str) else name
        code = case.source.replace("{outside}", str(self.outside))
        if isinstance(self.sandbox, ScriptedSandbox):
            self.sandbox.add(launcher_command(), Script(program=self._simulation(case), exit_code=case.exit_code))
        events: list[SessionEvent] = []
        records: list[HistoryEntry] = []

        async def emit(event: SessionEvent) -> None:
            events.append(event)

        async def record(entry: HistoryEntry) -> None:
            records.append(entry)

        harness = self

        class Approvals:
            async def request(self, request: ApprovalRequest) -> ApprovalDecision:
                harness.asked.append(request)
                if request.tool_call.tool_call_id == PARENT:
                    return ApprovalDecision(Choice.ALLOW_ONCE)  # running the program itself
                return case.nested(request)

        access = SessionAccess(str(self.root))
        ctx = ToolContext("sess-contract", access, Approvals(), self.sandbox, emit, record, live_turn())
        args: dict[str, Any] = {"code": code}
        if case.timeout is not None:
            args["timeout"] = case.timeout
        with anyio.fail_after(120):  # a guard against a hang only
            result = await workspace_toolbox().execute(ToolCallRequest(PARENT, "run_code", json.dumps(args)), ctx)
        calls = [e.call for e in events if isinstance(e, ToolCallChanged)]
        return Run(result, list(self.asked), calls, records)

    def _simulation(self, case: Case) -> Callable[[socket.socket], bytes]:
        def program(sock: socket.socket) -> bytes:
            simulated = Simulated(sock, self.outside)
            case.simulate(simulated)
            return "".join(simulated.out).encode()

        return program


def make_harness(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "a.txt").write_text("alpha line\nsecond\n")
    if kind == "bubblewrap":
        if not HAVE_BWRAP:
            pytest.skip("/usr/bin/bwrap is not installed")
        sandbox: Sandbox = request.getfixturevalue("bubblewrap")
    else:
        sandbox = ScriptedSandbox()
    return Harness(kind, sandbox, Path(os.path.realpath(root)), Path(os.path.realpath(outside)))


@pytest.fixture(params=["bubblewrap", "scripted"])
def h(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    return make_harness(request.param, request, tmp_path)


@pytest.fixture
def real(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    return make_harness("bubblewrap", request, tmp_path)


def nested_asked(run: Run) -> list[ApprovalRequest]:
    return [r for r in run.asked if r.tool_call.tool_call_id != PARENT]


# --- the contract --------------------------------------------------------------------------


async def test_read_inside_the_root_needs_no_approval(h: Harness) -> None:
    run = await h.run("read_inside_without_approval")

    assert run.result.startswith("Exit code: 0\n"), run.result
    assert "read:" in run.output and "alpha line" in run.output
    assert nested_asked(run) == []
    assert run.final(f"{PARENT}.1").status is ToolStatus.COMPLETED
    assert run.final(f"{PARENT}.1").parent_id == PARENT
    assert run.final(PARENT).status is ToolStatus.COMPLETED
    assert run.result.endswith(f"nested tool calls: 1\n  {PARENT}.1 read_file: ok")


async def test_write_inside_the_root_needs_no_approval(h: Harness) -> None:
    run = await h.run("write_inside_without_approval")

    assert (h.root / "made.txt").read_text() == "made inside\n"
    assert "wrote inside" in run.output
    assert nested_asked(run) == []
    assert f"{PARENT}.1 write_file: ok" in run.result
    assert run.final(PARENT).status is ToolStatus.COMPLETED


async def test_write_outside_the_root_is_asked_and_denied(h: Harness) -> None:
    run = await h.run("write_outside_denied")

    assert not (h.outside / "out.txt").exists()
    [asked] = nested_asked(run)
    assert asked.tool_call.tool_call_id == f"{PARENT}.1"
    assert asked.tool_call.parent_id == PARENT
    assert str(h.outside / "out.txt") in asked.title
    assert "outside: ToolError" in run.output and "rejected" in run.output
    assert "outside: written" not in run.output
    assert run.output.index("outside: ToolError") < run.output.index("after")
    assert run.final(f"{PARENT}.1").status is ToolStatus.FAILED
    assert f"{PARENT}.1 write_file: failed" in run.result
    assert run.final(PARENT).status is ToolStatus.COMPLETED  # the program handled it and exited 0


async def test_write_outside_the_root_is_asked_and_allowed(h: Harness) -> None:
    run = await h.run("write_outside_allowed")

    assert (h.outside / "out.txt").read_text() == "made outside\n"
    [asked] = nested_asked(run)
    assert asked.tool_call.parent_id == PARENT
    assert "outside: written" in run.output and "after" in run.output
    assert run.final(f"{PARENT}.1").status is ToolStatus.COMPLETED
    assert f"{PARENT}.1 write_file: ok" in run.result


async def test_unknown_tool_raises_tool_error_and_the_program_continues(h: Harness) -> None:
    run = await h.run("unknown_tool_raises_and_the_program_continues")

    assert "unknown: ToolError unknown tool 'delete_everything'" in run.output
    assert "recursive: ToolError unknown tool 'run_code'" in run.output
    assert "read: 1\talpha line" in run.output  # read_file numbers its lines
    assert run.nested_ids() == [f"{PARENT}.1"]  # refused requests are not tool calls
    assert "refused malformed or unknown requests: 2" in run.result
    assert run.final(PARENT).status is ToolStatus.COMPLETED


async def test_a_program_exiting_non_zero_fails_the_call(h: Harness) -> None:
    run = await h.run("non_zero_exit")

    assert run.result.startswith("Exit code: 3\n"), run.result
    assert "exiting with 3" in run.output
    assert (h.root / "before-exit.txt").exists()
    assert f"{PARENT}.1 write_file: ok" in run.result
    assert run.final(PARENT).status is ToolStatus.FAILED


async def test_an_uncaught_denial_ends_the_program_with_tool_error(h: Harness) -> None:
    run = await h.run("uncaught_denial_ends_the_program")

    assert run.result.startswith("Exit code: 1\n"), run.result
    assert "ToolError" in run.output and "rejected" in run.output
    assert "not reached" not in run.output
    assert not (h.outside / "out.txt").exists()
    assert run.final(PARENT).status is ToolStatus.FAILED


async def test_timeout_kills_the_program(h: Harness) -> None:
    run = await h.run("timeout_kills_the_program")

    # The program sleeps 60 s: "timed out" is what ended it (no duration asserted).
    assert run.result.startswith("Timed out after 2 s and was killed.\n"), run.result
    if h.kind == "bubblewrap":  # a scripted program's output is its return value, lost when it is stopped
        assert "sleeping" in run.output
    assert f"{PARENT}.1 read_file: ok" in run.result
    assert run.final(PARENT).status is ToolStatus.FAILED


async def test_a_forged_line_on_the_raw_socket_is_refused_and_the_program_continues(h: Harness) -> None:
    run = await h.run("forged_line_on_the_raw_socket")

    assert "forged: request is not valid JSON" in run.output, run.result
    assert "read: 1\talpha line" in run.output
    assert run.nested_ids() == [f"{PARENT}.1"]
    assert "refused malformed or unknown requests: 1" in run.result


async def test_the_bridge_fd_is_the_only_extra_descriptor_and_is_not_in_the_environment(real: Harness) -> None:
    source = (
        "import os\n"
        "fds = [int(fd) for fd in os.listdir('/proc/self/fd')]\n"
        "links = [os.readlink('/proc/self/fd/%d' % fd) for fd in fds if os.path.exists('/proc/self/fd/%d' % fd)]\n"
        "print('sockets', sum(1 for link in links if link.startswith('socket:')))\n"
        "print('env', 'TERM2_BRIDGE_FD' in os.environ)\n"
    )
    run = await real.run(Case(source, sim_read))

    assert "sockets 1" in run.output, run.result
    assert "env False" in run.output


async def test_a_program_passes_names_that_are_not_utf8_back_to_the_tools(real: Harness) -> None:
    """A name from os.listdir (a lone surrogate, sent as JSON's `\\udce9`) is its bytes; the escaped name
    list_dir shows reaches the same file; every nested call is recorded as text the store keeps."""
    target = os.path.join(os.fsencode(real.root), b"caf\xe9.txt")
    with open(target, "wb") as f:
        f.write(b"bytes name\n")
    source = (
        "import os\n"
        "[name] = [n for n in os.listdir('.') if n.startswith('caf')]\n"
        "print('read:', tools.read_file(path=name).strip())\n"
        "[shown] = [line for line in tools.list_dir().splitlines() if line.startswith('caf')]\n"
        "print('shown:', shown)\n"
        "tools.edit_file(path=shown, old_string='bytes', new_string='edited')\n"
    )
    run = await real.run(Case(source, sim_read))

    assert "read: 1\tbytes name" in run.output, run.result
    assert "shown: caf\\xe9.txt" in run.output
    with open(target, "rb") as f:
        assert f.read() == b"edited name\n"
    nested = [c for c in run.calls if c.tool_call_id != PARENT and c.status is ToolStatus.COMPLETED]
    titles = [c.title for c in nested]
    assert f"Read {real.root}/caf\\xe9.txt" in titles and f"Edit {real.root}/caf\\xe9.txt" in titles
    for entry in run.records:
        assert decode_entry(encode_entry(entry)) == entry
