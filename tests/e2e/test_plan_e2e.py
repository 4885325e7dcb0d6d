"""update_plan over a real `term2 acp`: the model's plan reaches the editor as ACP plan updates and replays.

v2 clients get `plan_update`, v1 clients `plan` (both schema-validated by the
harness); the plan is stored with the session, so a new process resuming it
from the start replays the plan where it was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import llm_env
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, Message, updates

WARM_UP_TIMEOUT = 180.0
STEPS = [
    {"content": "Read the failing test", "status": "completed"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"content": "Run the test suite", "status": "pending"},
]


def _plan_call() -> dict[str, Any]:
    return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": STEPS}}]}


def _expected_entries() -> list[dict[str, str]]:
    return [{"content": s["content"], "status": s["status"], "priority": s.get("priority", "medium")} for s in STEPS]


def _plans(messages: list[Message], kind: str) -> list[dict[str, Any]]:
    return [u for u in updates(messages) if u["sessionUpdate"] == kind]


def test_a_plan_reaches_v2_and_v1_clients_and_replays_after_a_restart(tmp_path: Path) -> None:
    workspace = tmp_path / "project"
    workspace.mkdir()
    home = tmp_path / "home"
    with start_fake_llm() as llm:
        first = AcpProcess(tmp_path, env=llm_env(llm), home=home)
        try:
            first.initialize(2)
            sid = first.new_session(workspace)
            llm.push(_plan_call(), {"text": "Working on the parser."})
            _ack, live = first.prompt_v2(sid, "fix the parser", WARM_UP_TIMEOUT)
            [plan] = _plans(live, "plan_update")
            assert plan["plan"]["entries"] == _expected_entries()
            tool_results = [r for r in llm.requests if "Plan updated" in str(r.body)]
            assert tool_results, "the model was told the plan was updated"
            assert first.result("session/close", {"sessionId": sid}) == {}
            assert first.close() == 0
            first.validate_schemas()
        finally:
            first.kill()

        second = AcpProcess(tmp_path, env=llm_env(llm), home=home)
        try:
            second.initialize(1)
            second.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            [replayed] = _plans(second.log, "plan")
            assert replayed["entries"] == _expected_entries()
            assert second.close() == 0
            second.validate_schemas()
        finally:
            second.kill()
