"""Issue 6 end to end: run_code over a real `term2 acp`, real bwrap, the fake LLM.

The fake LLM asks for one run_code call whose program calls term2's tools;
the test plays the editor. Running the program is an execute action, so its
own permission request is answered allow-once; requests for nested calls
(recognised by `_meta.term2.parentToolCallId`) are answered per test. Two
processes (ACP v2 and v1) are shared by the module (litellm is imported once
each); every test uses its own session and outside folder. Every message
term2 sent is validated against the ACP schemas when the module ends.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, PermissionPolicy, allow_kind, bare, updates
from tests.support.procs import processes_with

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_code needs /usr/bin/bwrap")

WARM_UP_TIMEOUT = 180.0  # the first prompt of a process imports litellm
TURN_TIMEOUT = 60.0


# --- harness -------------------------------------------------------------------------------


def parent_of(params: Message) -> str | None:
    """The run_code call a permission request is about, if it is about a nested call."""
    tool_call = params.get("toolCall") or params.get("subject", {}).get("toolCall") or {}
    return tool_call.get("_meta", {}).get("term2", {}).get("parentToolCallId")


class Answers:
    """Allows running the program itself; nested requests go to `nested` (None: left unanswered)."""

    def __init__(self) -> None:
        self.nested: PermissionPolicy | None = None

    def __call__(self, params: Message) -> Message | None:
        if parent_of(params) is None:
            return allow_kind("allow_once")(params)
        return self.nested(params) if self.nested is not None else None


def select(option_id: str) -> PermissionPolicy:
    return lambda _params: {"outcome": {"outcome": "selected", "optionId": option_id}}


@dataclass
class Agent:
    proc: AcpProcess
    llm: FakeLLMServer
    answers: Answers
    base: Path
    root: Path
    seen_requests: int = field(default=0)

    @property
    def version(self) -> int:
        assert self.proc.version is not None
        return self.proc.version

    def session(self) -> str:
        return self.proc.new_session(self.root)

    def outside(self) -> Path:
        folder = self.base / f"outside-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        return folder

    def asked(self) -> list[Message]:
        return [m["params"] for m in self.proc.permission_requests]

    def push_program(self, code: str, call_id: str, **extra: Any) -> None:
        self.llm.push(
            {"tool_calls": [{"name": "run_code", "arguments": {"code": code, **extra}, "id": call_id}]},
            {"text": "done"},
        )

    def start(self, sid: str) -> int:
        return self.proc.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})

    def run(self, sid: str, code: str, nested: PermissionPolicy | None = None, **extra: Any) -> Turn:
        """One prompt in which the model runs `code`; returns the turn's messages and the run_code call id."""
        call_id = f"rc{uuid.uuid4().hex[:10]}"
        self.answers.nested = nested
        before = len(self.proc.permission_requests)
        self.push_program(code, call_id, **extra)
        if self.version == 2:
            _ack, messages = self.proc.prompt_v2(sid, "go", TURN_TIMEOUT)
        else:
            response = self.proc.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}, TURN_TIMEOUT
            )
            messages = [*self.proc.log, response]
        return Turn(run_code_id(messages, call_id), messages, self.asked()[before:])


def run_code_id(messages: list[Message], model_id: str) -> str:
    """The id term2 gave the turn's run_code call: never the model's own (ADR 0021)."""
    ids = {
        u["toolCallId"]
        for u in updates(messages)
        if u["sessionUpdate"] in ("tool_call", "tool_call_update")
        and u.get("_meta", {}).get("term2", {}).get("parentToolCallId") is None
    }
    assert len(ids) == 1 and model_id not in ids, ids
    return ids.pop()


@dataclass
class Turn:
    call_id: str
    messages: list[Message]
    asked: list[Message]

    def calls(self) -> dict[str, dict[str, Any]]:
        """Each tool call's state after its updates in order (v2 upserts, v1 create + patches)."""
        calls: dict[str, dict[str, Any]] = {}
        for update in updates(self.messages):
            if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls.setdefault(update["toolCallId"], {}).update(update)
        return calls

    def nested(self, n: int) -> dict[str, Any]:
        return self.calls()[f"{self.call_id}.{n}"]

    def parent(self) -> dict[str, Any]:
        return self.calls()[self.call_id]

    def nested_updates(self) -> list[dict[str, Any]]:
        return [
            u
            for u in updates(self.messages)
            if u["sessionUpdate"] in ("tool_call", "tool_call_update") and u["toolCallId"] != self.call_id
        ]

    def result_text(self) -> str:
        parent = self.parent()
        return "".join(c["content"]["text"] for c in parent.get("content", []) if c.get("type") == "content")

    def nested_asked(self) -> list[Message]:
        return [p for p in self.asked if parent_of(p) is not None]


@contextlib.contextmanager
def _agent(base: Path, version: int) -> Iterator[Agent]:
    root = base / "project"
    root.mkdir(exist_ok=True)
    (root / "README.md").write_text("# demo project\n")
    with start_fake_llm() as llm:
        answers = Answers()
        proc = AcpProcess(base, env=llm_env(llm), permission=answers)
        try:
            proc.initialize(version)
            yield Agent(proc, llm, answers, base, root)
            if proc.proc.poll() is None:
                assert proc.close(timeout=15) == 0
            proc.validate_schemas()  # every message term2 sent, nested permission requests included
        finally:
            proc.kill()


def _warm_up(agent: Agent) -> None:
    sid = agent.session()
    agent.llm.push({"text": "ready"})
    if agent.version == 2:
        agent.proc.prompt_v2(sid, "hi", WARM_UP_TIMEOUT)
    else:
        agent.proc.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}, WARM_UP_TIMEOUT
        )


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Agent]]:
    with contextlib.ExitStack() as stack:
        started = {v: stack.enter_context(_agent(tmp_path_factory.mktemp(f"rc-v{v}"), v)) for v in (2, 1)}
        with ThreadPoolExecutor(len(started)) as pool:
            for future in [pool.submit(_warm_up, agent) for agent in started.values()]:
                future.result()
        yield started


@pytest.fixture
def v2(agents: dict[int, Agent]) -> Iterator[Agent]:
    yield agents[2]
    agents[2].llm.state.reset()
    agents[2].answers.nested = None


@pytest.fixture
def v1(agents: dict[int, Agent]) -> Iterator[Agent]:
    yield agents[1]
    agents[1].llm.state.reset()
    agents[1].answers.nested = None


def idle_of(messages: list[Message]) -> dict[str, Any]:
    [idle] = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
    return idle


def program(outside: Path) -> str:
    """Reads, edits inside the root, then edits outside it and carries on whatever the answer."""
    return (
        'print("read:", tools.read_file(path="README.md").splitlines()[0])\n'
        'tools.edit_file(path="inside.txt", old_string="one", new_string="two")\n'
        "try:\n"
        f'    tools.write_file(path="{outside}/out.txt", content="from the program\\n")\n'
        '    print("outside: written")\n'
        "except ToolError as exc:\n"
        '    print("outside: ToolError:", exc)\n'
        'print("after")\n'
    )


def assert_linked(turn: Turn, count: int) -> None:
    """Each nested call is its own tool call, every update names the parent, statuses in order."""
    nested = turn.nested_updates()
    assert {u["toolCallId"] for u in nested} == {f"{turn.call_id}.{n}" for n in range(1, count + 1)}
    assert all(u["_meta"] == {"term2": {"parentToolCallId": turn.call_id}} for u in nested)
    assert "_meta" not in turn.parent()


# --- reads, edits inside, edits outside ------------------------------------------------------


def test_v2_program_reads_edits_inside_and_an_allowed_edit_outside_is_written(v2: Agent) -> None:
    (v2.root / "inside.txt").write_text("one\n")
    outside = v2.outside()
    sid = v2.session()

    turn = v2.run(sid, program(outside), nested=allow_kind("allow_once"))

    assert (v2.root / "inside.txt").read_text() == "two\n"
    assert (outside / "out.txt").read_text() == "from the program\n"
    own, nested = turn.asked
    assert own["subject"]["type"] == "command" and own["subject"]["toolCallId"] == turn.call_id
    assert nested["subject"]["type"] == "tool_call"
    tool_call = nested["subject"]["toolCall"]
    assert tool_call["toolCallId"] == f"{turn.call_id}.3"
    assert tool_call["_meta"] == {"term2": {"parentToolCallId": turn.call_id}}
    assert str(outside / "out.txt") in nested["title"]
    assert_linked(turn, 3)
    assert [turn.nested(n)["status"] for n in (1, 2, 3)] == ["completed"] * 3
    assert turn.parent()["status"] == "completed"
    text = turn.result_text()
    assert "read:" in text and "\t# demo project" in text and "outside: written" in text and "after" in text
    assert f"{turn.call_id}.3 write_file: ok" in text
    states = [u["state"] for u in updates(turn.messages, "state_update")]
    assert states.count("requires_action") == 2  # the program, then its nested edit
    assert idle_of(turn.messages)["stopReason"] == "end_turn"


def test_v2_rejected_nested_edit_is_not_written_and_the_program_continues(v2: Agent) -> None:
    (v2.root / "inside.txt").write_text("one\n")
    outside = v2.outside()

    turn = v2.run(v2.session(), program(outside), nested=allow_kind("reject_once"))

    assert not (outside / "out.txt").exists()
    assert (v2.root / "inside.txt").read_text() == "two\n"
    [nested] = turn.nested_asked()
    assert parent_of(nested) == turn.call_id
    assert turn.nested(3)["status"] == "failed"
    assert turn.parent()["status"] == "completed"  # the program caught the ToolError
    text = turn.result_text()
    assert "outside: ToolError:" in text and "(rejected)" in text
    assert text.index("outside: ToolError:") < text.index("after")
    assert "outside: written" not in text
    assert_linked(turn, 3)


def test_v2_nested_request_answered_with_an_unknown_option_is_not_written(v2: Agent) -> None:
    (v2.root / "inside.txt").write_text("one\n")
    outside = v2.outside()

    turn = v2.run(v2.session(), program(outside), nested=select("allow-everything"))

    assert not (outside / "out.txt").exists()
    assert len(turn.nested_asked()) == 1
    assert turn.nested(3)["status"] == "failed"
    assert "outside: ToolError:" in turn.result_text() and "(unknown_option)" in turn.result_text()
    assert "after" in turn.result_text()


def test_v1_allowed_nested_edit_is_written_and_linked(v1: Agent) -> None:
    (v1.root / "inside.txt").write_text("one\n")
    outside = v1.outside()

    turn = v1.run(v1.session(), program(outside), nested=allow_kind("allow_once"))

    assert bare(turn.messages[-1]["result"]) == {"stopReason": "end_turn"}
    assert (outside / "out.txt").read_text() == "from the program\n"
    assert (v1.root / "inside.txt").read_text() == "two\n"
    [nested] = turn.nested_asked()
    assert nested["toolCall"]["toolCallId"] == f"{turn.call_id}.3"
    assert nested["toolCall"]["_meta"] == {"term2": {"parentToolCallId": turn.call_id}}
    assert_linked(turn, 3)
    first = [u for u in turn.nested_updates() if u["sessionUpdate"] == "tool_call"]
    assert sorted(u["toolCallId"] for u in first) == [f"{turn.call_id}.{n}" for n in (1, 2, 3)]
    assert all(u["status"] == "pending" for u in first)
    assert [turn.nested(n)["status"] for n in (1, 2, 3)] == ["completed"] * 3


def test_v1_rejected_nested_edit_is_not_written(v1: Agent) -> None:
    (v1.root / "inside.txt").write_text("one\n")
    outside = v1.outside()

    turn = v1.run(v1.session(), program(outside), nested=allow_kind("reject_once"))

    assert not (outside / "out.txt").exists()
    assert turn.nested(3)["status"] == "failed"
    assert "outside: ToolError:" in turn.result_text() and "after" in turn.result_text()


# --- cancellation ---------------------------------------------------------------------------------


def _parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("PPid:"))
    except (OSError, StopIteration):
        return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def test_v2_cancel_while_the_program_runs_kills_it(v2: Agent) -> None:
    marker = f"term2-rc-e2e-{uuid.uuid4().hex}"
    sid = v2.session()
    code = (
        "import subprocess, sys, time\n"
        'tools.read_file(path="README.md")\n'
        f'child = [sys.executable, "-c", "import time; time.sleep(1000)", "{marker}"]\n'
        f'subprocess.Popen(child, env={{"MARK": "{marker}"}})\n'
        "time.sleep(1000)\n"
    )
    call_id = f"rc{uuid.uuid4().hex[:10]}"
    v2.push_program(code, call_id)
    v2.start(sid)
    deadline = time.monotonic() + 60
    while not processes_with(marker, environ=True):
        assert time.monotonic() < deadline, "the program never started its child"
        time.sleep(0.05)
    [child] = processes_with(marker, environ=True)
    program_pid = _parent_pid(child)
    assert program_pid is not None

    v2.proc.notify("session/cancel", {"sessionId": sid})
    # The program and its child sleep 1,000 s: settling within the guard shows the cancel did not wait for them.
    messages = v2.proc.collect_until(lambda m: _is_idle(m, sid), 60)

    assert idle_of(messages)["stopReason"] == "cancelled"
    deadline = time.monotonic() + 60  # a guard: killed processes leave the table when the kernel gets to them
    while (processes_with(marker, environ=True) or _alive(program_pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker, environ=True) == []
    assert not _alive(program_pid)
    turn = Turn(run_code_id(messages, call_id), messages, [])
    assert turn.parent()["status"] == "cancelled"


def _is_idle(message: Message, sid: str) -> bool:
    params = message.get("params", {})
    update = params.get("update", {})
    return params.get("sessionId") == sid and update.get("state") == "idle"


# --- escaping the bridge ---------------------------------------------------------------------------


ESCAPE = """
import json, os
def bridge_fd():  # TERM2_BRIDGE_FD is gone from the environment; find the socket
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + n).startswith("socket:"):
                return int(n)
        except OSError:
            pass
fd = bridge_fd()
def raw(line):
    os.write(fd, line + b"\\n")
    reply = b""
    while not reply.endswith(b"\\n"):
        reply += os.read(fd, 65536)
    return json.loads(reply)
print("env:", "TERM2_BRIDGE_FD" in os.environ)
print("garbage:", raw(b"\\x00\\xff{{garbage")["error"])
print("array:", raw(b"[1, 2]")["error"])
print("recursive:", raw(b'{{"id": 1, "tool": "run_code", "args": {{"code": "print(1)"}}}}')["error"])
print("program again:", raw(b'{{"id": 2, "tool": "__program__"}}')["ok"])
print("args:", raw(json.dumps({{"id": 3, "tool": "write_file", "args": ["{target}", "x"]}}).encode())["error"])
try:
    tools.unsandboxed_shell(command="touch {target}")
except ToolError as exc:
    print("unknown:", exc)
try:
    open("{target}", "w").write("direct\\n")
    print("direct: written")
except OSError as exc:
    print("direct:", type(exc).__name__)
print("still works:", tools.read_file(path="README.md").splitlines()[0])
try:
    tools.write_file(path="{target}", content="x" * (2 << 20))
except ToolError as exc:
    print("huge:", exc)
try:
    tools.read_file(path="README.md")
    print("after huge: served")
except ToolError as exc:
    print("after huge:", exc)
"""


def test_v2_a_program_escaping_the_bridge_is_refused_and_writes_nothing_outside(v2: Agent) -> None:
    target = v2.outside() / "escaped.txt"

    turn = v2.run(v2.session(), ESCAPE.format(target=target), nested=allow_kind("allow_once"))

    text = turn.result_text()
    assert not target.exists(), text
    assert turn.nested_asked() == []  # nothing reached the approval step
    assert "env: False" in text
    assert "garbage: request is not valid JSON" in text
    assert "array: request must be a JSON object" in text
    assert "recursive: unknown tool 'run_code'" in text
    assert "program again: False" in text
    assert "args: args must be a JSON object" in text
    assert "unknown: unknown tool 'unsandboxed_shell'" in text
    assert "direct: " in text and "direct: written" not in text  # the sandbox's filesystem is read-only there
    assert "still works:" in text and "\t# demo project" in text
    assert "huge: the term2 bridge is closed" in text or "huge: message over" in text
    assert "after huge: served" not in text
    assert "refused malformed or unknown requests: 7" in text
    assert turn.nested(1)["status"] == "completed"
    assert {u["toolCallId"] for u in turn.nested_updates()} == {f"{turn.call_id}.1"}
    assert turn.parent()["status"] == "completed"
