"""One approval suite, two approvers.

(a) `acp`: the ACP bridge (AcpApprover) over a real `term2 acp` stdio process;
    the fake LLM asks for a tool call that needs approval and the test, as the
    editor, answers `session/request_permission` on the wire.
(b) `scripted`: a tiny scripted Approver used with WorkspaceToolbox directly.

Each case makes two calls in one fresh session: the first is answered as the
case says, the second (a later prompt over ACP) is answered "reject". The
observations are the same for both: was the first call asked, did it run,
what status did it end with, and was the second call asked and did it run.
Only an explicit allow runs a tool; only allow-always spares the later ask.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import pytest

from term2.adapters.sandbox.scripted import Script, ScriptedSandbox
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.domain.approval import Choice, OptionKind, is_allow
from term2.domain.history import HistoryEntry
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision, ApprovalRequest
from term2.ports.llm import ToolCallRequest
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged
from tests.conftest import llm_env
from tests.fakes.approvers import ScriptedApprover
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.fakes.turns import live_turn
from tests.support.acp_process import AcpProcess, Message, updates

WARM_UP_TIMEOUT = 180.0  # the first prompt of the process imports litellm

ScriptedAnswer = Callable[[ApprovalRequest], ApprovalDecision]


# --- what the client answers, in both forms ------------------------------------


def wire_kind(kind: str) -> Callable[[Message], Message]:
    def answer(params: Message) -> Message:
        option = next(o for o in params["options"] if o["kind"] == kind)
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}

    return answer


def wire_fixed(result: Message) -> Callable[[Message], Message]:
    return lambda _params: result


ERROR_ANSWER = object()  # the client answers with a JSON-RPC error


def scripted_kind(kind: OptionKind) -> ScriptedAnswer:
    def answer(request: ApprovalRequest) -> ApprovalDecision:
        option = next(o for o in request.options if o.kind is kind)
        if kind is OptionKind.REJECT_ONCE:
            return ApprovalDecision(None, "rejected")
        return ApprovalDecision(option.choice)

    return answer


def scripted_fixed(decision: ApprovalDecision) -> ScriptedAnswer:
    return lambda _request: decision


def scripted_unoffered_allow(request: ApprovalRequest) -> ApprovalDecision:
    offered = {option.choice for option in request.options}
    return ApprovalDecision(next(choice for choice in Choice if is_allow(choice) and choice not in offered))


def scripted_raises(_request: ApprovalRequest) -> ApprovalDecision:
    raise RuntimeError("the approval dialog crashed")


@dataclass(frozen=True)
class Case:
    wire: Callable[[Message], Message] | object
    scripted: ScriptedAnswer
    runs: bool
    remembered: bool = False


CASES: dict[str, Case] = {
    "allow_once": Case(wire_kind("allow_once"), scripted_kind(OptionKind.ALLOW_ONCE), runs=True),
    "allow_always": Case(wire_kind("allow_always"), scripted_kind(OptionKind.ALLOW_ALWAYS), runs=True, remembered=True),
    "reject": Case(wire_kind("reject_once"), scripted_kind(OptionKind.REJECT_ONCE), runs=False),
    "cancelled": Case(
        wire_fixed({"outcome": {"outcome": "cancelled"}}),
        scripted_fixed(ApprovalDecision(None, "cancelled")),
        runs=False,
    ),
    "unknown_option": Case(
        wire_fixed({"outcome": {"outcome": "selected", "optionId": "allow-everything"}}),
        # An allow choice that was not offered must not count either.
        scripted_unoffered_allow,
        runs=False,
    ),
    "malformed": Case(
        wire_fixed({"outcome": {"outcome": "selected"}}),
        scripted_fixed(ApprovalDecision(None, "malformed")),
        runs=False,
    ),
    "malformed_outcome": Case(
        wire_fixed({"outcome": "allow-once"}),
        scripted_fixed(ApprovalDecision(None, "malformed")),
        runs=False,
    ),
    "error": Case(ERROR_ANSWER, scripted_raises, runs=False),
}

REJECT_WIRE = wire_kind("reject_once")
REJECT_SCRIPTED = scripted_kind(OptionKind.REJECT_ONCE)


# --- what is asked for: an edit outside the root, or a shell command -------------


@dataclass(frozen=True)
class Subject:
    """A tool call needing approval; each session gets its own folders, `nth` tells calls apart."""

    name: str

    def call(self, workdir: Path, outside: Path, nth: int) -> tuple[str, dict[str, Any]]:
        if self.name == "edit":
            return "write_file", {"path": str(outside / "target.txt"), "content": f"call {nth}\n"}
        return "run_shell", {"command": f"touch ran-{nth}", "cwd": str(workdir)}

    def ran_on_disk(self, workdir: Path, outside: Path, nth: int) -> bool:
        if self.name == "edit":
            target = outside / "target.txt"
            return target.exists() and target.read_text() == f"call {nth}\n"
        return (workdir / f"ran-{nth}").exists()


SUBJECTS = (Subject("edit"), Subject("shell"))


@dataclass
class Observed:
    asked: bool
    ran: bool
    status: str


class Backend(Protocol):
    def start(self, subject: Subject) -> None:
        """A fresh session with its own outside folder (and so no grants)."""

    def call(self, nth: int, answer: Case | None) -> Observed:
        """Make call `nth`, answered as `answer` says (None: reject)."""


# --- (a) the ACP bridge over a real process -----------------------------------


class AcpBackend:
    def __init__(self, proc: AcpProcess, llm: FakeLLMServer, base: Path) -> None:
        self.proc = proc
        self.llm = llm
        self.base = base
        self.root = base / "project"
        self.policy: Callable[[Message], Message | None] | None = None

    def answer(self, params: Message) -> Message | None:
        return self.policy(params) if self.policy is not None else None

    def start(self, subject: Subject) -> None:
        self.subject = subject
        token = uuid.uuid4().hex[:8]
        self.outside = self.base / f"outside-{token}"
        self.outside.mkdir()
        self.workdir = self.root / f"work-{token}"  # shell commands run here, inside the root
        self.workdir.mkdir()
        self.sid = self.proc.new_session(self.root)

    def _policy(self, answer: Case | None) -> Callable[[Message], Message | None]:
        if answer is None:
            return REJECT_WIRE
        if answer.wire is ERROR_ANSWER:

            def error(_params: Message) -> None:
                request_id = self.proc.permission_requests[-1]["id"]
                error = {"code": -32603, "message": "the approval dialog crashed"}
                self.proc.send({"jsonrpc": "2.0", "id": request_id, "error": error})

            return error
        assert callable(answer.wire)
        return answer.wire  # type: ignore[no-any-return]

    def turn(self, call: tuple[str, dict[str, Any]] | None, timeout: float = 60.0) -> list[Message]:
        if call is not None:
            self.llm.push({"tool_calls": [{"name": call[0], "arguments": call[1]}]})
        _ack, messages = self.proc.prompt_v2(self.sid, "go", timeout)
        return messages

    def call(self, nth: int, answer: Case | None) -> Observed:
        self.policy = self._policy(answer)
        before = len(self.proc.permission_requests)
        messages = self.turn(self.subject.call(self.workdir, self.outside, nth))
        calls = [u for u in updates(messages, "tool_call_update") if "status" in u]
        idle = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
        assert idle and idle[-1]["stopReason"] == "end_turn", idle
        return Observed(
            asked=len(self.proc.permission_requests) > before,
            ran=self.subject.ran_on_disk(self.workdir, self.outside, nth),
            status=calls[-1]["status"],
        )


@pytest.fixture(scope="module")
def acp_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcpBackend]:
    base = tmp_path_factory.mktemp("acp-approvals")
    (base / "project").mkdir()
    with start_fake_llm() as llm, contextlib.ExitStack() as stack:
        holder: list[AcpBackend] = []
        proc = AcpProcess(base, env=llm_env(llm), permission=lambda params: holder[0].answer(params))
        stack.callback(proc.kill)
        backend = AcpBackend(proc, llm, base)
        holder.append(backend)
        proc.initialize(2)
        backend.sid = proc.new_session(backend.root)
        backend.turn(None, timeout=WARM_UP_TIMEOUT)  # pays the litellm import
        yield backend
        llm.state.reset()
        assert proc.close() == 0
        proc.validate_schemas()


# --- (b) a scripted approver with WorkspaceToolbox directly ----------------------


class ScriptedBackend:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "project"
        self.root.mkdir()
        self.toolbox = WorkspaceToolbox()

    def start(self, subject: Subject) -> None:
        self.subject = subject
        token = uuid.uuid4().hex[:8]
        self.outside = self.base / f"outside-{token}"
        self.outside.mkdir()
        self.workdir = self.root / f"work-{token}"  # shell commands run here, inside the root
        self.workdir.mkdir()
        self.access = SessionAccess(str(self.root))
        self.approver = ScriptedApprover(REJECT_SCRIPTED)
        self.sandbox = ScriptedSandbox({f"touch ran-{nth}": Script() for nth in (1, 2)})
        self.events: list[SessionEvent] = []

    def call(self, nth: int, answer: Case | None) -> Observed:
        self.approver.script = REJECT_SCRIPTED if answer is None else answer.scripted
        asked_before, ran_before = len(self.approver.requests), len(self.sandbox.calls)

        async def emit(event: SessionEvent) -> None:
            self.events.append(event)

        async def record(_entry: HistoryEntry) -> None:
            pass

        ctx = ToolContext("sess-scripted", self.access, self.approver, self.sandbox, emit, record, live_turn())
        name, args = self.subject.call(self.workdir, self.outside, nth)
        request = ToolCallRequest(f"call-{nth}", name, json.dumps(args))
        anyio.run(self.toolbox.execute, request, ctx)
        ran = (
            len(self.sandbox.calls) > ran_before
            if self.subject.name == "shell"
            else self.subject.ran_on_disk(self.workdir, self.outside, nth)
        )
        last = [e for e in self.events if isinstance(e, ToolCallChanged)][-1]
        return Observed(asked=len(self.approver.requests) > asked_before, ran=ran, status=last.call.status.value)


@pytest.fixture
def scripted_backend(tmp_path: Path) -> ScriptedBackend:
    return ScriptedBackend(tmp_path)


@pytest.fixture(params=["acp", "scripted"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.getfixturevalue(f"{request.param}_backend")  # type: ignore[no-any-return]


# --- the suite -------------------------------------------------------------------


@pytest.mark.parametrize("subject", SUBJECTS, ids=lambda s: s.name)
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_only_an_explicit_allow_runs_and_only_allow_always_is_remembered(
    backend: Backend, subject: Subject, case: Case
) -> None:
    backend.start(subject)

    first = backend.call(1, case)
    assert first.asked
    assert first.ran is case.runs
    assert first.status == ("completed" if case.runs else "failed")

    second = backend.call(2, None)  # a later call, which the client would reject if asked
    assert second.asked is not case.remembered
    assert second.ran is case.remembered
    assert second.status == ("completed" if case.remembered else "failed")


def test_scripted_grant_is_recorded_for_the_granted_target(scripted_backend: ScriptedBackend) -> None:
    scripted_backend.start(Subject("edit"))
    scripted_backend.call(1, CASES["allow_always"])
    target = str((scripted_backend.outside / "target.txt").resolve())
    assert scripted_backend.access.workspace.grants.edit_files == frozenset({target})
    scripted_backend.access.reset()  # what closing the session does
    assert scripted_backend.call(2, None).asked


def test_offered_options_are_the_same_in_both(acp_backend: AcpBackend, scripted_backend: ScriptedBackend) -> None:
    """The bridge offers exactly the options the port request carries (ids and kinds)."""
    for subject in SUBJECTS:
        acp_backend.start(subject)
        acp_backend.call(1, CASES["reject"])
        wire = acp_backend.proc.permission_requests[-1]["params"]["options"]
        scripted_backend.start(subject)
        scripted_backend.call(1, CASES["reject"])
        port = scripted_backend.approver.requests[-1].options
        assert wire == [{"optionId": o.choice.value, "name": o.name, "kind": o.kind.value} for o in port]
        assert not {o["optionId"] for o in wire} & {"unsandboxed-once", "allow-remember"}
        assert "reject_always" not in {o["kind"] for o in wire}
