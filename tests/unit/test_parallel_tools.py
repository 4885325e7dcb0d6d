"""Read-only calls of one response run side by side; anything else runs alone, in order."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from term2.adapters.llm.scripted import ScriptedProvider, text_response, tool_call_response
from term2.app.agent_loop import run_loop
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.domain.history import HistoryEntry
from term2.domain.turn import StopReason, TurnLimits
from term2.domain.workspace import SessionAccess
from term2.ports.llm import ChatMessage, ToolCallRequest, ToolSpec
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent
from tests.fakes.transcripts import transcript_of
from tests.fakes.turns import live_turn

pytestmark = pytest.mark.anyio


class GatedToolbox:
    """Reads finish only once every read of the batch has started: sequential reads would wait forever."""

    def __init__(self, reads: int) -> None:
        self.reads = reads
        self.started: list[str] = []
        self.all_started = anyio.Event()
        self.order: list[str] = []

    def specs(self) -> tuple[ToolSpec, ...]:
        return ()

    def runs_concurrently(self, call: ToolCallRequest, ctx: ToolContext) -> bool:
        return call.name == "read"

    async def execute(self, call: ToolCallRequest, ctx: ToolContext) -> str:
        label = json.loads(call.arguments)["label"]  # the call's id here is term2's, not the scripted one
        self.order.append(f"start {label}")
        if call.name == "read":
            self.started.append(label)
            if len(self.started) == self.reads:
                self.all_started.set()
            await self.all_started.wait()
        self.order.append(f"end {label}")
        return f"result of {label}"


def _ctx(root: Path) -> ToolContext:
    async def emit(_event: SessionEvent) -> None:
        pass

    async def record(_entry: HistoryEntry) -> None:
        pass

    return ToolContext("s1", SessionAccess(str(root)), None, None, emit, record, live_turn())  # type: ignore[arg-type]


async def test_reads_run_together_and_results_keep_the_models_order(tmp_path: Path) -> None:
    script = (("r1", "read"), ("r2", "read"), ("r3", "read"), ("w1", "write"), ("r4", "read"))
    calls = tuple((call_id, name, json.dumps({"label": call_id})) for call_id, name in script)
    llm = ScriptedProvider([tool_call_response(*calls), text_response("done")])
    toolbox = GatedToolbox(reads=3)
    transcript = transcript_of(ChatMessage("user", "go"), record=_ignore)
    with anyio.fail_after(10):  # sequential reads would block on the gate
        stop = await run_loop(transcript, llm, toolbox, _ctx(tmp_path), TurnLimits())
    messages = [m.message for m in transcript.messages]
    assert stop is StopReason.END_TURN
    assert [m.tool_call_id for m in messages if m.role == "tool"] == ["r1", "r2", "r3", "w1", "r4"]
    assert next(m.content for m in messages if m.role == "tool") == "result of r1"
    # The write waited for the three reads, and the read after it ran alone, after it.
    assert toolbox.order.index("start w1") > max(toolbox.order.index(f"end r{i}") for i in (1, 2, 3))
    assert toolbox.order.index("start r4") > toolbox.order.index("end w1")


async def _ignore(_entry: HistoryEntry) -> None:
    pass


def _call(name: str, **args: object) -> ToolCallRequest:
    return ToolCallRequest("c", name, json.dumps(args))


def test_only_reads_that_need_no_approval_run_concurrently(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / ".env").write_text("K=v\n")
    toolbox, ctx = WorkspaceToolbox(), _ctx(root)
    assert toolbox.runs_concurrently(_call("read_file", path="a.txt"), ctx)
    assert toolbox.runs_concurrently(_call("grep", pattern="a"), ctx)
    assert toolbox.runs_concurrently(_call("list_dir"), ctx)
    assert toolbox.runs_concurrently(_call("glob", pattern="**/*.txt"), ctx)
    assert not toolbox.runs_concurrently(_call("read_file", path=str(tmp_path)), ctx), "outside: asks first"
    assert not toolbox.runs_concurrently(_call("read_file", path=".env"), ctx), "a secret: asks first"
    assert not toolbox.runs_concurrently(_call("write_file", path="b.txt", content="x"), ctx)
    assert not toolbox.runs_concurrently(_call("run_shell", command="ls"), ctx)
    assert not toolbox.runs_concurrently(_call("no_such_tool"), ctx)
    assert not toolbox.runs_concurrently(ToolCallRequest("c", "read_file", "{not json"), ctx)
