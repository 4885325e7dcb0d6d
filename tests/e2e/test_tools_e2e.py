"""Issue 5 end to end: the workspace rule, tool approvals and fail-closed paths over a real `term2 acp`.

The fake LLM asks for tool calls; the test plays the editor, answering
`session/request_permission` through a switchable policy. Two processes (ACP
v2 and v1) are shared by the whole module because each pays the litellm
import once; every test opens its own session (fresh grants) and edits its
own outside folder, so tests stay independent. The v2 process ends with the
disconnect test, which is why that test is last and re-spawns if needed.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, PermissionPolicy, allow_kind, bare, updates
from tests.support.procs import processes_with

WARM_UP_TIMEOUT = 180.0  # the first prompt of a process imports litellm
TURN_TIMEOUT = 60.0
EDIT_CHOICES = {"allow-once", "allow-edit-file-session", "allow-edit-folder-session", "reject"}
READ_CHOICES = {"allow-once", "allow-folder-session", "reject"}
KIND_OF = {
    "allow-once": "allow_once",
    "allow-edit-file-session": "allow_always",
    "allow-edit-folder-session": "allow_always",
    "allow-folder-session": "allow_always",
    "reject": "reject_once",
}


# --- harness -------------------------------------------------------------------


class Answers:
    """A permission policy the test can switch; None leaves requests unanswered."""

    def __init__(self) -> None:
        self.policy: PermissionPolicy | None = None

    def __call__(self, params: Message) -> Message | None:
        return self.policy(params) if self.policy is not None else None


def select(option_id: str) -> PermissionPolicy:
    return lambda _params: {"outcome": {"outcome": "selected", "optionId": option_id}}


def answer_with(result: Message) -> PermissionPolicy:
    return lambda _params: result


@dataclass
class Agent:
    proc: AcpProcess
    llm: FakeLLMServer
    answers: Answers
    base: Path
    root: Path
    spawn: Callable[[], Agent] | None = field(default=None, repr=False)

    @property
    def version(self) -> int:
        assert self.proc.version is not None
        return self.proc.version

    def session(self) -> str:
        return self.proc.new_session(self.root)

    def outside(self, name: str = "outside") -> Path:
        """A fresh folder next to the workspace root, outside it."""
        folder = self.base / f"{name}-{uuid.uuid4().hex[:8]}"
        folder.mkdir()
        return folder

    def asked(self) -> int:
        return len(self.proc.permission_requests)

    def turn(
        self, sid: str, *calls: dict[str, Any], policy: PermissionPolicy | None = None, timeout: float = TURN_TIMEOUT
    ) -> list[Message]:
        """One prompt in which the model asks for `calls`, then (by default) echoes the result."""
        self.answers.policy = policy
        if calls:
            self.llm.push({"tool_calls": list(calls)})
        if self.version == 2:
            _ack, messages = self.proc.prompt_v2(sid, "go", timeout)
            return messages
        response = self.proc.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}, timeout
        )
        return [*self.proc.log, response]

    def start_prompt(self, sid: str, *calls: dict[str, Any], policy: PermissionPolicy | None = None) -> int:
        self.answers.policy = policy
        self.llm.push({"tool_calls": list(calls)})
        return self.proc.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})

    def wait_for_permission(self, count: int, timeout: float = TURN_TIMEOUT) -> Message:
        deadline = time.monotonic() + timeout
        while self.asked() < count:
            assert time.monotonic() < deadline, "no session/request_permission arrived"
            assert self.proc.proc.poll() is None, "term2 exited"
            time.sleep(0.02)
        return self.proc.permission_requests[count - 1]


def edit_call(path: Path | str, old: str, new: str) -> dict[str, Any]:
    return {"name": "edit_file", "arguments": {"path": str(path), "old_string": old, "new_string": new}}


def write_call(path: Path | str, content: str) -> dict[str, Any]:
    return {"name": "write_file", "arguments": {"path": str(path), "content": content}}


def read_call(path: Path | str) -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": str(path)}}


def shell_call(command: str, **extra: Any) -> dict[str, Any]:
    return {"name": "run_shell", "arguments": {"command": command, **extra}}


def tool_calls(messages: list[Message]) -> dict[str, dict[str, Any]]:
    """Each tool call's state after applying its updates in order (v2 upserts, v1 create + patches)."""
    calls: dict[str, dict[str, Any]] = {}
    for update in updates(messages):
        if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
            calls.setdefault(update["toolCallId"], {}).update(update)
    return calls


def only_call(messages: list[Message]) -> dict[str, Any]:
    calls = tool_calls(messages)
    assert len(calls) == 1, calls
    return next(iter(calls.values()))


def until_idle(agent: Agent, timeout: float = 15.0) -> list[Message]:
    return agent.proc.collect_until(lambda m: m.get("params", {}).get("update", {}).get("state") == "idle", timeout)


def states(messages: list[Message]) -> list[str]:
    return [u["state"] for u in updates(messages, "state_update")]


def idle(messages: list[Message]) -> dict[str, Any]:
    idles = [u for u in updates(messages, "state_update") if u["state"] == "idle"]
    assert len(idles) == 1, idles
    return idles[0]


def text_of(call: dict[str, Any]) -> str:
    return "".join(c["content"]["text"] for c in call.get("content", []) if c["type"] == "content")


def outside_file(agent: Agent, text: str = "old\n") -> Path:
    target = agent.outside() / "notes.txt"
    target.write_text(text)
    return target


@contextlib.contextmanager
def _agent(base: Path, version: int) -> Iterator[Agent]:
    root = base / "project"
    root.mkdir(exist_ok=True)
    with start_fake_llm() as llm:
        answers = Answers()
        agents: list[Agent] = []

        def spawn() -> Agent:
            proc = AcpProcess(base, env=llm_env(llm), permission=answers)
            agents.append(Agent(proc, llm, answers, base, root, spawn))
            proc.initialize(version)
            return agents[-1]

        try:
            yield spawn()
        finally:
            for each in agents:
                if each.proc.proc.poll() is None:
                    each.proc.close()
                    each.proc.validate_schemas()
                each.proc.kill()


def _warm_up(agent: Agent) -> None:
    agent.turn(agent.session(), timeout=WARM_UP_TIMEOUT)  # pays the litellm import


def module_agent(name: str) -> tuple[Any, Any]:
    """The fixtures of a module with its own warmed-up v2 process: `agent`, and the autouse clean-up
    that resets the fake model's script and the permission policy after each test."""

    @pytest.fixture(scope="module")
    def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
        with _agent(tmp_path_factory.mktemp(name), 2) as started:
            _warm_up(started)
            yield started

    @pytest.fixture(autouse=True)
    def _clean_script(agent: Agent) -> Iterator[None]:
        yield
        agent.llm.state.reset()
        agent.answers.policy = None

    return agent, _clean_script


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Agent]]:
    """Both processes, warmed up side by side so their litellm imports overlap."""
    with contextlib.ExitStack() as stack:
        started = {v: stack.enter_context(_agent(tmp_path_factory.mktemp(f"v{v}"), v)) for v in (2, 1)}
        with ThreadPoolExecutor(len(started)) as pool:
            for future in [pool.submit(_warm_up, agent) for agent in started.values()]:
                future.result()
        yield started


@pytest.fixture
def v2(agents: dict[int, Agent]) -> Agent:
    return agents[2]


@pytest.fixture
def v1(agents: dict[int, Agent]) -> Agent:
    return agents[1]


@pytest.fixture(autouse=True)
def _clean_script(agents: dict[int, Agent]) -> Iterator[None]:
    yield
    for agent in agents.values():
        agent.llm.state.reset()
        agent.answers.policy = None


# --- inside the root -----------------------------------------------------------


def test_v2_edit_inside_root_needs_no_approval_and_reports_a_git_patch(v2: Agent) -> None:
    target = v2.root / "inside.py"
    target.write_text("x = 1\ny = 2\n")
    sid = v2.session()
    before = v2.asked()

    messages = v2.turn(sid, edit_call("inside.py", "y = 2", "y = 3"), policy=select("reject"))

    assert v2.asked() == before
    assert target.read_text() == "x = 1\ny = 3\n"
    call = only_call(messages)
    assert call["status"] == "completed"
    assert call["kind"] == "edit"
    [diff] = call["content"]
    assert diff["type"] == "diff"
    assert diff["changes"] == [{"operation": "modify", "path": str(target)}]
    assert diff["patch"]["format"] == "git_patch"
    patch = diff["patch"]["text"]
    assert f"--- a{target}\n" in patch and f"+++ b{target}\n" in patch
    assert "-y = 2\n+y = 3\n" in patch
    assert os.path.isabs(diff["changes"][0]["path"])
    assert states(messages) == ["running", "idle"]
    assert idle(messages)["stopReason"] == "end_turn"


def test_v1_edit_inside_root_reports_old_and_new_text(v1: Agent) -> None:
    target = v1.root / "inside-v1.txt"
    target.write_text("alpha\n")
    sid = v1.session()
    before = v1.asked()

    messages = v1.turn(sid, edit_call(target, "alpha", "beta"), policy=select("reject"))

    assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
    assert v1.asked() == before
    assert target.read_text() == "beta\n"
    assert updates(messages, "tool_call")[0]["status"] == "pending"
    call = only_call(messages)
    assert call["status"] == "completed"
    assert call["content"] == [{"type": "diff", "path": str(target), "oldText": "alpha\n", "newText": "beta\n"}]


# --- edits outside the root ----------------------------------------------------


def test_v2_edit_outside_offers_only_acp_choices_and_reports_requires_action(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()

    messages = v2.turn(sid, edit_call(target, "old", "new"), policy=allow_kind("allow_once"))

    assert target.read_text() == "new\n"
    assert v2.asked() == before + 1
    request = v2.proc.permission_requests[-1]["params"]
    assert request["sessionId"] == sid
    assert request["title"] and isinstance(request["title"], str)
    assert str(target) in request["title"]
    assert isinstance(request.get("description", ""), str)
    call = only_call(messages)
    assert request["subject"]["type"] == "tool_call"
    assert request["subject"]["toolCall"]["toolCallId"] == next(iter(tool_calls(messages)))
    options = request["options"]
    assert {o["optionId"] for o in options} == EDIT_CHOICES
    assert all(o["kind"] == KIND_OF[o["optionId"]] for o in options)
    offered = {o["optionId"] for o in options} | {o["kind"] for o in options}
    assert not offered & {"unsandboxed-once", "allow-remember", "reject_always"}
    assert states(messages) == ["running", "requires_action", "running", "idle"]
    assert call["status"] == "completed"


def test_v2_allow_once_writes_and_the_next_prompt_asks_again(v2: Agent) -> None:
    target = outside_file(v2, "one\n")
    sid = v2.session()
    before = v2.asked()

    first = v2.turn(sid, edit_call(target, "one", "two"), policy=select("allow-once"))
    assert target.read_text() == "two\n"
    assert only_call(first)["status"] == "completed"

    second = v2.turn(sid, edit_call(target, "two", "three"), policy=select("allow-once"))
    assert v2.asked() == before + 2
    assert target.read_text() == "three\n"
    assert only_call(second)["status"] == "completed"


def test_v2_allow_edit_file_session_lasts_for_the_session_and_is_cleared_on_close(v2: Agent) -> None:
    # Writes here; edit_file under an edit grant: test_edit_attacks_e2e.py.
    target = outside_file(v2, "a\n")
    sibling = target.parent / "sibling.txt"
    sibling.write_text("s\n")
    sid = v2.session()
    before = v2.asked()

    v2.turn(sid, write_call(target, "b\n"), policy=select("allow-edit-file-session"))
    assert target.read_text() == "b\n"
    assert v2.asked() == before + 1

    # A later prompt writing the same file does not ask again, even with a rejecting client.
    later = v2.turn(sid, write_call(target, "c\n"), policy=select("reject"))
    assert v2.asked() == before + 1
    assert target.read_text() == "c\n"
    assert "requires_action" not in states(later)

    # The grant is keyed to the file: a sibling still asks.
    v2.turn(sid, write_call(sibling, "t\n"), policy=select("reject"))
    assert v2.asked() == before + 2
    assert sibling.read_text() == "s\n"

    # Another session does not share the grant.
    v2.turn(v2.session(), write_call(target, "d\n"), policy=select("reject"))
    assert v2.asked() == before + 3
    assert target.read_text() == "c\n"

    # Closing the session clears it: after resume the same write asks again.
    assert v2.proc.result("session/close", {"sessionId": sid}) == {}
    assert v2.proc.result("session/resume", {"sessionId": sid, "cwd": str(v2.root)}) == {}
    v2.turn(sid, write_call(target, "d\n"), policy=select("reject"))
    assert v2.asked() == before + 4
    assert target.read_text() == "c\n"


def test_v2_allow_edit_folder_session_covers_the_folder(v2: Agent) -> None:
    target = outside_file(v2, "a\n")
    other = target.parent / "other.txt"
    other.write_text("o\n")
    sid = v2.session()
    before = v2.asked()

    v2.turn(sid, write_call(target, "b\n"), policy=select("allow-edit-folder-session"))
    v2.turn(sid, write_call(other, "p\n"), policy=select("reject"))

    assert v2.asked() == before + 1
    assert (target.read_text(), other.read_text()) == ("b\n", "p\n")


def test_v2_rejected_edit_is_not_written_and_fails(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()

    messages = v2.turn(sid, edit_call(target, "old", "new"), policy=select("reject"))

    assert target.read_text() == "old\n"
    call = only_call(messages)
    assert call["status"] == "failed"
    assert "rejected" in "".join(c["content"]["text"] for c in call["content"])
    assert idle(messages)["stopReason"] == "end_turn"


def test_v1_permission_request_carries_tool_call_and_options(v1: Agent) -> None:
    target = outside_file(v1)
    sid = v1.session()
    before = v1.asked()

    rejected = v1.turn(sid, edit_call(target, "old", "new"), policy=select("reject"))
    assert target.read_text() == "old\n"
    assert only_call(rejected)["status"] == "failed"

    v1.turn(sid, edit_call(target, "old", "new"), policy=allow_kind("allow_once"))
    assert target.read_text() == "new\n"

    assert v1.asked() == before + 2
    params = v1.proc.permission_requests[-1]["params"]
    assert set(params) == {"sessionId", "toolCall", "options"}
    assert params["toolCall"]["status"] == "pending"
    assert params["toolCall"]["kind"] == "edit"
    assert {o["optionId"] for o in params["options"]} == EDIT_CHOICES
    assert not {o["kind"] for o in params["options"]} & {"reject_always"}


# --- fail closed: each path on its own, nothing written ------------------------

FAIL_CLOSED_ANSWERS = {
    "cancelled": {"outcome": {"outcome": "cancelled"}},
    "outcome_missing": {},
    "outcome_not_an_object": {"outcome": "selected"},
    "outcome_not_selected": {"outcome": {"outcome": "dismissed", "optionId": "allow-once"}},
    "selected_without_option": {"outcome": {"outcome": "selected"}},
    "unknown_option": {"outcome": {"outcome": "selected", "optionId": "allow-everything"}},
    "unoffered_choice": {"outcome": {"outcome": "selected", "optionId": "unsandboxed-once"}},
    "option_kind_instead_of_id": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
}


@pytest.mark.parametrize("answer", FAIL_CLOSED_ANSWERS.values(), ids=FAIL_CLOSED_ANSWERS.keys())
def test_v2_non_allow_answers_fail_closed(v2: Agent, answer: Message) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()

    messages = v2.turn(sid, edit_call(target, "old", "new"), policy=answer_with(answer))

    assert v2.asked() == before + 1
    assert target.read_text() == "old\n"
    call = only_call(messages)
    # A denial is a failed call, the turn itself goes on ("cancelled" only if the turn was cancelled).
    assert call["status"] == "failed", call
    assert idle(messages)["stopReason"] == "end_turn"


def test_v2_error_response_fails_closed(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()
    v2.start_prompt(sid, edit_call(target, "old", "new"))

    request = v2.wait_for_permission(before + 1)
    v2.proc.send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "dialog crashed"}})
    messages = until_idle(v2, 30)

    assert target.read_text() == "old\n"
    assert only_call(messages)["status"] == "failed"
    assert idle(messages)["stopReason"] == "end_turn"


def test_v2_turn_cancelled_while_approval_pending(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()
    v2.start_prompt(sid, edit_call(target, "old", "new"), policy=None)

    request = v2.wait_for_permission(before + 1)
    v2.proc.notify("session/cancel", {"sessionId": sid})
    messages = until_idle(v2)
    # The client still answers the withdrawn request, as ACP asks it to.
    v2.proc.send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "cancelled"}}})

    assert idle(messages)["stopReason"] == "cancelled"
    withdrawn = [m for m in messages if m.get("method") == "$/cancel_request"]
    assert [m["params"]["requestId"] for m in withdrawn] == [request["id"]]
    assert only_call(messages)["status"] == "cancelled"
    assert target.read_text() == "old\n"
    _still_serves(v2, sid)
    assert target.read_text() == "old\n"


def test_v1_turn_cancelled_while_approval_pending(v1: Agent) -> None:
    target = outside_file(v1)
    sid = v1.session()
    before = v1.asked()
    prompt_id = v1.start_prompt(sid, edit_call(target, "old", "new"), policy=None)

    request = v1.wait_for_permission(before + 1)
    v1.proc.notify("session/cancel", {"sessionId": sid})
    messages = v1.proc.collect_until(lambda m: m.get("id") == prompt_id and "method" not in m, 15)
    v1.proc.send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "cancelled"}}})

    assert bare(messages[-1]["result"]) == {"stopReason": "cancelled"}
    assert only_call(messages)["status"] == "failed"  # v1 has no cancelled status
    assert target.read_text() == "old\n"


def test_v2_late_allow_after_cancel_is_ignored(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()
    v2.start_prompt(sid, edit_call(target, "old", "new"), policy=None)

    request = v2.wait_for_permission(before + 1)
    v2.proc.notify("session/cancel", {"sessionId": sid})
    messages = until_idle(v2)
    v2.proc.send(
        {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": "allow-once"}},
        }
    )

    assert idle(messages)["stopReason"] == "cancelled"
    _still_serves(v2, sid)
    assert target.read_text() == "old\n"


def test_v2_session_closed_while_approval_pending(v2: Agent) -> None:
    target = outside_file(v2)
    sid = v2.session()
    before = v2.asked()
    v2.start_prompt(sid, edit_call(target, "old", "new"), policy=None)

    v2.wait_for_permission(before + 1)
    close_id = v2.proc.request("session/close", {"sessionId": sid})
    messages = v2.proc.collect_until(lambda m: m.get("id") == close_id and "method" not in m, 20)

    assert messages[-1]["result"] == {}
    assert idle(messages)["stopReason"] == "cancelled"
    assert target.read_text() == "old\n"
    time.sleep(0.3)
    assert target.read_text() == "old\n"


# --- reads outside the root ----------------------------------------------------


def test_v2_read_outside_asks_and_allow_folder_session_grants_the_folder(v2: Agent) -> None:
    folder = v2.outside("readable")
    (folder / "a.txt").write_text("secret-a\n")
    (folder / "b.txt").write_text("secret-b\n")
    sid = v2.session()
    before = v2.asked()

    rejected = v2.turn(sid, read_call(folder / "a.txt"), policy=select("reject"))
    assert only_call(rejected)["status"] == "failed"
    assert "secret-a" not in str(rejected)
    request = v2.proc.permission_requests[-1]["params"]
    assert {o["optionId"] for o in request["options"]} == READ_CHOICES
    assert request["subject"]["type"] == "tool_call"

    granted = v2.turn(sid, read_call(folder / "a.txt"), policy=select("allow-folder-session"))
    assert only_call(granted)["status"] == "completed"
    assert "secret-a" in text_of(only_call(granted))

    later = v2.turn(sid, read_call(folder / "b.txt"), policy=select("reject"))
    assert only_call(later)["status"] == "completed"
    assert "secret-b" in text_of(only_call(later))
    assert v2.asked() == before + 2

    # A read grant is not an edit grant.
    v2.turn(sid, edit_call(folder / "b.txt", "secret", "public"), policy=select("reject"))
    assert v2.asked() == before + 3
    assert (folder / "b.txt").read_text() == "secret-b\n"


def test_v2_read_inside_root_needs_no_approval(v2: Agent) -> None:
    (v2.root / "readme-inside.txt").write_text("visible\n")
    sid = v2.session()
    before = v2.asked()
    messages = v2.turn(sid, read_call("readme-inside.txt"), policy=select("reject"))
    assert v2.asked() == before
    assert "visible" in text_of(only_call(messages))


# --- shell commands ------------------------------------------------------------


def test_v2_shell_asks_with_a_command_subject_and_streams_a_terminal(v2: Agent) -> None:
    sid = v2.session()
    before = v2.asked()

    messages = v2.turn(sid, shell_call("echo hi; echo err 1>&2"), policy=select("allow-once"))

    assert v2.asked() == before + 1
    request = v2.proc.permission_requests[-1]["params"]
    subject = request["subject"]
    assert subject["type"] == "command"
    assert subject["command"] == "echo hi; echo err 1>&2"
    assert subject["cwd"] == str(v2.root.resolve()) and os.path.isabs(subject["cwd"])
    assert {o["optionId"] for o in request["options"]} == READ_CHOICES
    assert states(messages) == ["running", "requires_action", "running", "idle"]

    call = only_call(messages)
    assert call["status"] == "completed"
    assert call["kind"] == "execute"
    [terminal_ref] = call["content"]
    assert terminal_ref["type"] == "terminal"
    terminal_id = terminal_ref["terminalId"]
    chunks = [u for u in updates(messages, "terminal_output_chunk") if u["terminalId"] == terminal_id]
    streamed = b"".join(base64.b64decode(u["data"]) for u in chunks)
    assert b"hi\n" in streamed and b"err\n" in streamed
    finals = [u for u in updates(messages, "terminal_update") if u["terminalId"] == terminal_id and "exitStatus" in u]
    assert len(finals) == 1
    assert finals[0]["exitStatus"]["exitCode"] == 0
    assert base64.b64decode(finals[0]["output"]["data"]) == streamed
    # The terminal is announced before its first chunk and finished after the last one.
    kinds = [u["sessionUpdate"] for u in updates(messages) if u.get("terminalId") == terminal_id]
    assert kinds[0] == "terminal_update" and kinds[-1] == "terminal_update"


def test_v2_rejected_shell_command_does_not_run(v2: Agent) -> None:
    marker = v2.root / f"ran-{uuid.uuid4().hex}"
    sid = v2.session()
    messages = v2.turn(sid, shell_call(f"touch {marker.name}"), policy=select("reject"))
    assert only_call(messages)["status"] == "failed"
    assert not updates(messages, "terminal_output_chunk")
    assert not marker.exists()


def test_v2_allow_folder_session_covers_later_shell_commands(v2: Agent) -> None:
    sid = v2.session()
    before = v2.asked()
    v2.turn(sid, shell_call("true"), policy=select("allow-folder-session"))
    messages = v2.turn(sid, shell_call("echo again"), policy=select("reject"))
    assert v2.asked() == before + 1
    assert only_call(messages)["status"] == "completed"


def test_v1_shell_output_is_tool_call_text(v1: Agent) -> None:
    sid = v1.session()
    messages = v1.turn(sid, shell_call("echo hi; echo err 1>&2"), policy=select("allow-once"))
    params = v1.proc.permission_requests[-1]["params"]
    assert params["toolCall"]["kind"] == "execute"
    call = only_call(messages)
    assert call["status"] == "completed"
    text = text_of(call)
    assert "hi" in text and "err" in text
    assert not updates(messages, "terminal_output_chunk") and not updates(messages, "terminal_update")


def test_v2_unsandboxed_request_still_runs_in_the_sandbox(v2: Agent) -> None:
    host_marker = Path(f"/tmp/outside-marker-{uuid.uuid4().hex}")
    sid = v2.session()
    command = f"touch {host_marker} && ls {host_marker}"
    messages = v2.turn(sid, shell_call(command, sandbox="unsandboxed"), policy=select("allow-once"))

    request = v2.proc.permission_requests[-1]["params"]
    assert not {o["optionId"] for o in request["options"]} & {"unsandboxed-once"}
    call = only_call(messages)
    finals = [u for u in updates(messages, "terminal_update") if "exitStatus" in u]
    assert finals and finals[-1]["exitStatus"].get("exitCode") == 0, (call, finals)  # it did run...
    assert not host_marker.exists()  # ...in the sandbox's private /tmp


def test_v2_cancel_while_a_command_runs_kills_it(v2: Agent) -> None:
    marker = f"term2-e2e-{uuid.uuid4().hex}"
    sid = v2.session()
    command = f"(exec -a {marker}-child sleep 1000) & exec -a {marker} sleep 1000"
    v2.start_prompt(sid, shell_call(command), policy=select("allow-once"))
    v2.proc.collect_until(lambda m: m.get("params", {}).get("update", {}).get("status") == "in_progress", 60)
    deadline = time.monotonic() + 60  # a guard: waits until both have started
    while len(processes_with(marker)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker), "the command never started"

    v2.proc.notify("session/cancel", {"sessionId": sid})
    messages = until_idle(v2, timeout=60)  # the sleeps last 1,000 s: settling shows the cancel did not wait

    assert idle(messages)["stopReason"] == "cancelled"
    assert only_call(messages)["status"] == "cancelled"
    deadline = time.monotonic() + 60  # a guard: killed processes leave the table when the kernel gets to them
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == []


# --- approvals show the change (issue 12, item 7) ------------------------------


def _before_permission(agent: Agent, start: int, call_id_key: str = "toolCallId") -> tuple[list[Message], Message]:
    """The agent's messages since ``start`` up to its first permission request, and that request."""
    sent = [m for who, m in agent.proc.transcript[start:] if who == "agent"]
    index = next(i for i, m in enumerate(sent) if m.get("method") == "session/request_permission")
    return sent[:index], sent[index]


def _diffs(messages: list[Message]) -> list[dict[str, Any]]:
    return [
        c
        for m in messages
        if m.get("method") == "session/update"
        for c in m["params"]["update"].get("content") or []
        if isinstance(c, dict) and c.get("type") == "diff"
    ]


def _shows(diff: dict[str, Any], path: Path, old: str | None, new: str, removed: str, added: str) -> bool:
    """v1 carries whole texts; v2 a change list with a git patch."""
    if "changes" not in diff:
        return diff["path"] == str(path) and diff.get("oldText") == old and diff["newText"] == new
    [change] = diff["changes"]
    patch = str(diff["patch"]["text"])
    operation = "add" if old is None else "modify"
    return change["path"] == str(path) and change["operation"] == operation and removed in patch and added in patch


@pytest.mark.parametrize("version", [1, 2])
def test_an_outside_edits_permission_request_is_preceded_by_its_diff(v1: Agent, v2: Agent, version: int) -> None:
    agent = v1 if version == 1 else v2
    target = outside_file(agent, "alpha\nbeta\n")
    sid = agent.session()
    start = len(agent.proc.transcript)
    agent.turn(sid, edit_call(target, "beta", "gamma"), policy=select("reject"))
    before, request = _before_permission(agent, start)
    assert target.read_text() == "alpha\nbeta\n"  # rejected: nothing written, yet the change was shown
    assert any(_shows(d, target, "alpha\nbeta\n", "alpha\ngamma\n", "-beta", "+gamma") for d in _diffs(before))
    first = next(m["params"]["update"] for m in before if m.get("method") == "session/update" and _diffs([m]))
    assert first["sessionUpdate"] == ("tool_call" if version == 1 else "tool_call_update")
    assert first["status"] == "pending"
    params = request["params"]
    subject = params["toolCall"] if version == 1 else params["subject"]["toolCall"]
    assert subject["toolCallId"] == first["toolCallId"]
    assert any(_shows(d, target, "alpha\nbeta\n", "alpha\ngamma\n", "-beta", "+gamma") for d in subject["content"])


def test_v2_a_write_outside_that_creates_a_file_shows_a_creation_diff(v2: Agent) -> None:
    target = v2.outside() / "new.txt"
    sid = v2.session()
    start = len(v2.proc.transcript)
    call = {"name": "write_file", "arguments": {"path": str(target), "content": "fresh\n"}}
    v2.turn(sid, call, policy=select("reject"))
    before, _request = _before_permission(v2, start)
    assert not target.exists()
    assert any(_shows(d, target, None, "fresh\n", "/dev/null", "+fresh") for d in _diffs(before))


def test_v2_three_reads_in_one_response_run_side_by_side(v2: Agent) -> None:
    for name in ("a", "b", "c"):
        (v2.root / f"{name}.txt").write_text(f"contents of {name}\n" * 2000)
    sid = v2.session()
    messages = v2.turn(sid, read_call("a.txt"), read_call("b.txt"), read_call("c.txt"))
    order = [
        (u["toolCallId"], u["status"])
        for u in updates(messages)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("pending", "completed")
    ]
    calls = list(dict.fromkeys(call_id for call_id, _ in order))
    assert len(calls) == 3, order
    first_completed = next(i for i, (_, status) in enumerate(order) if status == "completed")
    started = {call_id for call_id, status in order[:first_completed] if status == "pending"}
    assert started == set(calls), order  # all three began before any ended: they ran side by side
    assert all(tool_calls(messages)[c]["status"] == "completed" for c in calls)
    sent = v2.llm.requests[-1].body["messages"]
    results = [m for m in sent if m["role"] == "tool"][-3:]
    asked = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")][-1]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in asked["tool_calls"]]  # in the model's order
    assert ["contents of a" in results[0]["content"], "contents of c" in results[2]["content"]] == [True, True]


# --- disconnect (last: it ends the shared v2 process) --------------------------


def test_v2_client_disconnect_while_approval_pending(v2: Agent) -> None:
    agent = v2 if v2.proc.proc.poll() is None else v2.spawn()  # type: ignore[misc]
    target = outside_file(agent)
    sid = agent.session()
    before = agent.asked()
    agent.start_prompt(sid, edit_call(target, "old", "new"), policy=None)
    agent.wait_for_permission(before + 1)

    assert agent.proc.close(timeout=15) == 0
    assert target.read_text() == "old\n"
    agent.proc.validate_schemas()


def _still_serves(agent: Agent, sid: str) -> None:
    """The session takes another prompt after the cancellation."""
    messages = agent.turn(sid)
    assert idle(messages)["stopReason"] == "end_turn"
