"""Issue 28 part 1 end to end: pickers (`configOptions`) and slash commands on a real `term2 acp` (ADR 0043).

Driven by the official SDK scenario clients, v1 from both 1.4.0 and 2.4.0; every
line term2 writes is validated against 2.4.0's v1 schema (1.4.0's v2 draft for v2).
The fake LLM server records each request, so the model, the wire (OpenAI or
Anthropic) and the effort a request carried are read from what really went out.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer
from tests.support.exec_process import exec_env, run_piped
from tests.support.schemas import iter_transcript
from tests.support.sdk_clients import ScenarioResult, run_scenario

AGENT = [sys.executable, "-m", "term2", "acp"]
LAUNCHER = "openai/gpt-4o-mini"  # in the catalog, no reasoning: no effort picker at first
REASONING = "openai/gpt-5-mini"  # reasons: the effort picker appears
ANTHROPIC = "anthropic/claude-sonnet-4-5"


def _env(tmp_path: Path, llm: FakeLLMServer) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "TERM2_MODEL": LAUNCHER,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": llm.base_url + "/v1",
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "ANTHROPIC_BASE_URL": llm.base_url,
        "TERM2_HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    })  # fmt: skip
    return env


def _run(
    version: int, sdk: str, tmp_path: Path, name: str, env: dict[str, str], cwd: Path, steps: list[Any]
) -> ScenarioResult:
    workdir = tmp_path / name
    workdir.mkdir()
    config = {"cwd": str(cwd), "steps": steps, "permissions": ["allow_once"], "timeoutMs": 60000}
    result = run_scenario(version, AGENT, config, workdir, env=env, timeout=220, sdk=sdk)
    assert result.returncode == 0 and result.summary["ok"], result.explain()
    result.validate_transcript()  # every response and update, against the schema of its version
    return result


def _select(options: list[dict[str, Any]], config_id: str) -> dict[str, Any] | None:
    return next((o for o in options if o["id"] == config_id), None)


def _current(options: list[dict[str, Any]], config_id: str) -> str:
    option = _select(options, config_id)
    assert option is not None, f"no {config_id!r} option in {options}"
    return str(option["currentValue"])


def _values(option: dict[str, Any]) -> list[str]:
    return [v["value"] for g in option["options"] for v in g.get("options", [g])]


def _step(result: ScenarioResult, index: int) -> dict[str, Any]:
    return next(s for s in result.summary["steps"] if s["index"] == index)


def _agent_lines(result: ScenarioResult) -> list[tuple[str, dict[str, Any]]]:
    return [(d, json.loads(line)) for d, line in iter_transcript(result.transcript)]


def _commands_after_response(result: ScenarioResult, method: str) -> None:
    """The commands' update comes after the response to `method`, never before (Zed drops it then)."""
    lines = _agent_lines(result)
    request_id = next(m["id"] for d, m in lines if d == "client" and m.get("method") == method)
    answered = next(i for i, (d, m) in enumerate(lines) if d == "agent" and m.get("id") == request_id)
    updates = [
        i
        for i, (d, m) in enumerate(lines)
        if d == "agent" and m.get("params", {}).get("update", {}).get("sessionUpdate") == "available_commands_update"
    ]
    assert updates, "no available_commands_update"
    assert answered < updates[0], (
        f"the commands' update (line {updates[0]}) came before the {method} reply ({answered})"
    )
    names = {c["name"] for c in lines[updates[0]][1]["params"]["update"]["availableCommands"]}
    assert {"status", "compact"} <= names


@pytest.mark.timeout(480)
@pytest.mark.parametrize("sdk", ["1.4.0", "2.4.0"])
def test_pickers_switch_model_and_effort_and_survive_load_in_a_new_process(
    sdk: str, tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer
) -> None:
    (workspace / "notes.txt").write_text("remember the milk\n")
    env = _env(tmp_path, fake_llm)
    fake_llm.push(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "The notes say milk."},
    )
    steps: list[Any] = [
        "initialize",
        "new",  # 1
        {"op": "wait_update", "kind": "available_commands_update"},
        {"op": "prompt", "text": "What do my notes say?"},  # 3: OpenAI wire, a tool call in the history
        {"op": "set_config_option", "configId": "model", "value": REASONING},  # 4
        {"op": "set_config_option", "configId": "thought_level", "value": "high"},  # 5
        {"op": "prompt", "text": "Think hard."},  # 6
        {"op": "set_config_option", "configId": "model", "value": ANTHROPIC},  # 7
        {"op": "prompt", "text": "Now on Anthropic."},  # 8
        {"op": "set_config_option", "configId": "model", "value": "nosuchprovider/nomodel", "expectError": -32602},
        {"op": "set_config_option", "configId": "thought_level", "value": "extreme", "expectError": -32602},
        {"op": "prompt", "text": "/status"},  # 11
        {"op": "prompt", "text": "/frobnicate the widgets"},  # 12: unknown, goes to the model as text
        {"op": "prompt", "text": "/compact"},  # 13
    ]
    first = _run(1, sdk, tmp_path, "first", env, workspace, steps)
    created = _step(first, 1)["configOptions"]
    model = _select(created, "model")
    assert model is not None and model["category"] == "model" and model["currentValue"] == LAUNCHER
    assert _values(model)[0] == LAUNCHER  # current first
    assert ANTHROPIC in _values(model) and REASONING in _values(model)  # curated: both keys are present
    assert _select(created, "thought_level") is None  # gpt-4o-mini takes no effort
    _commands_after_response(first, "session/new")

    after_model = _step(first, 4)["configOptions"]
    effort = _select(after_model, "thought_level")
    assert effort is not None and effort["category"] == "thought_level" and "high" in _values(effort)
    assert _current(_step(first, 5)["configOptions"], "thought_level") == "high"
    after_switch = _step(first, 7)["configOptions"]
    assert _current(after_switch, "model") == ANTHROPIC
    assert _current(after_switch, "thought_level") == "high"
    assert [e["op"] for e in first.summary["errors"]] == ["set_config_option", "set_config_option"]

    served = [r for r in fake_llm.requests if r.status != "error"]
    assert [(r.protocol, r.model) for r in served[:2]] == [("openai", "gpt-4o-mini")] * 2
    assert "reasoning_effort" not in served[0].body
    assert (served[2].protocol, served[2].model) == ("openai", "gpt-5-mini")
    assert served[2].body["reasoning_effort"] == "high"  # effort reaches the request
    tools = [{t["function"]["name"] for t in r.body["tools"]} for r in served[:3]]
    assert "edit_file" in tools[0] and "apply_patch" not in tools[0]
    assert "apply_patch" in tools[2] and "edit_file" not in tools[2]  # the edit tools follow the model's family
    anthropic = served[3]
    assert (anthropic.protocol, anthropic.model) == ("anthropic", "claude-sonnet-4-5")
    kinds = [b.get("type") for m in anthropic.body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert "tool_use" in kinds and "tool_result" in kinds  # the transcript carried over, tool calls and all
    assert anthropic.body["thinking"]["type"] == "enabled"  # the effort followed the switch
    assert not [r for r in fake_llm.requests if r.status == "error"], [r.rejection for r in fake_llm.requests]

    status = _step(first, 11)
    assert status["stopReason"] == "end_turn"
    assert f"Model: {ANTHROPIC}" in status["text"] and "Effort: high" in status["text"]
    assert "Sandbox:" in status["text"] and "MCP servers: none" in status["text"]
    unknown = served[4]  # /status made no request: the next one is the unknown command's, as text
    assert "/frobnicate the widgets" in json.dumps(unknown.body["messages"][-1])
    compacted = _step(first, 13)
    assert "Compacted the conversation" in compacted["text"], compacted
    summary_request = served[5]
    assert summary_request.model == "claude-sonnet-4-5" and len(served) == 6  # /compact: one summary request

    # A new process: `session/load` restores the model and effort, replays the commands as typed.
    sid = first.summary["sessionIds"][0]
    env["TERM2_MODEL"] = LAUNCHER
    second = _run(
        1,
        sdk,
        tmp_path,
        "second",
        env,
        workspace,
        [
            "initialize",
            {"op": "load", "sessionId": sid},
            {"op": "wait_update", "kind": "available_commands_update", "sessionId": sid},
            {"op": "prompt", "text": "Still Anthropic?", "sessionId": sid},
        ],
    )
    loaded = _step(second, 1)
    assert _current(loaded["configOptions"], "model") == ANTHROPIC
    assert _current(loaded["configOptions"], "thought_level") == "high"
    assert "/status" in loaded["texts"]["user"] and "/compact" in loaded["texts"]["user"]
    _commands_after_response(second, "session/load")
    last = [r for r in fake_llm.requests if r.status != "error"][-1]
    assert (last.protocol, last.model) == ("anthropic", "claude-sonnet-4-5")


@pytest.mark.timeout(240)
def test_v2_offers_no_pickers_and_no_commands(tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer) -> None:
    env = _env(tmp_path, fake_llm)
    steps: list[Any] = [
        "initialize",
        "new",
        {"op": "resume", "replay": False},
        {"op": "set_config_option", "configId": "model", "value": REASONING, "expectError": -32601},
        {"op": "set_mode", "modeId": "auto", "expectError": -32601},  # no modes on v2 either (ADR 0044)
    ]
    result = _run(2, "1.4.0", tmp_path, "v2", env, workspace, steps)
    assert _step(result, 1)["configOptions"] is None and _step(result, 2)["configOptions"] is None
    for direction, message in _agent_lines(result):
        if direction == "agent":
            assert "configOptions" not in json.dumps(message)
            assert "available_commands_update" not in json.dumps(message)
            assert '"modes"' not in json.dumps(message) and "current_mode_update" not in json.dumps(message)
    lines = _agent_lines(result)
    replies = {}
    for direction, message in lines:
        if direction == "client" and "method" in message and "id" in message:
            replies[message["id"]] = message["method"]
    answered = {replies[m["id"]]: m for d, m in lines if d == "agent" and "result" in m and m.get("id") in replies}
    initialized = answered["initialize"]["result"]
    assert set(initialized) == {"protocolVersion", "info", "capabilities"}  # the v2 page's blob, unchanged
    assert initialized["capabilities"] == {"session": {}} and initialized["protocolVersion"] == 2
    assert set(answered["session/new"]["result"]) == {"sessionId"}
    assert answered["session/resume"]["result"] == {}


@pytest.mark.timeout(240)
def test_exec_keeps_a_sessions_model_unless_its_command_line_names_another(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    keys = {k: v for k, v in _env(tmp_path, fake_llm).items() if k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env = exec_env(tmp_path / "home", {"TERM2_MODEL": LAUNCHER, **keys})
    first = run_piped(["hello"], env, root)
    assert first.status == 0, first.stderr
    switched = run_piped(["--continue", "--model", "openai/gpt-4.1", "again"], env, root)
    assert switched.status == 0, switched.stderr
    kept = run_piped(["--continue", "and again"], env, root)  # the launcher says gpt-4o-mini; the session says 4.1
    assert kept.status == 0, kept.stderr
    assert [r.model for r in fake_llm.requests] == ["gpt-4o-mini", "gpt-4.1", "gpt-4.1"]


@pytest.mark.timeout(240)
def test_without_a_model_sessions_open_with_only_the_mode_picker(
    tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer
) -> None:
    """As before the pickers: no model is an error of the first prompt, not of `session/new`; only the
    approval mode, which needs no model, is offered. No key either: with one, the key's default model
    would be the launcher's (ADR 0045)."""
    env = _env(tmp_path, fake_llm)
    for name in ("TERM2_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"):
        env.pop(name, None)
    steps: list[Any] = [
        "initialize",
        "new",
        {"op": "set_config_option", "configId": "model", "value": REASONING, "expectError": -32602},
    ]
    result = _run(1, "2.4.0", tmp_path, "none", env, workspace, steps)
    assert [o["id"] for o in _step(result, 1)["configOptions"]] == ["mode"]  # the mode needs no model (ADR 0044)


def test_a_model_chosen_while_a_turn_runs_serves_that_turns_next_request(
    tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer
) -> None:
    """Issue 28: "a choice applies from the session's next model request". The editor switches the model
    while term2 waits for its answer to a command's question (the choice sent before the answer, as a user
    picks a model and then clicks Allow): the same turn's next request goes to the new model, on its own
    wire, with the tool call and its result carried over."""
    from tests.support.acp_process import AcpProcess, Message

    env = {k: v for k, v in _env(tmp_path, fake_llm).items() if k.startswith(("TERM2_", "OPENAI_", "ANTHROPIC_"))}
    fake_llm.push(
        {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo switched"}}]},
        {"text": "done"},
    )
    sessions: list[str] = []

    def switch_then_allow(params: Message) -> Message:
        change = {"sessionId": sessions[0], "configId": "model", "value": ANTHROPIC}
        proc.request("session/set_config_option", change)  # on stdin before the answer below
        return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}

    proc = AcpProcess(tmp_path, env=env, permission=switch_then_allow)
    try:
        proc.initialize(1)
        sessions.append(proc.new_session(workspace))
        prompt = {"sessionId": sessions[0], "prompt": [{"type": "text", "text": "run it"}]}
        assert proc.result("session/prompt", prompt, timeout=180)["stopReason"] == "end_turn"
        answered = [m for m in proc.log if "result" in m and "configOptions" in m["result"]]
        assert answered and _current(answered[0]["result"]["configOptions"], "model") == ANTHROPIC
        served = [(r.protocol, r.model) for r in fake_llm.requests]
        assert served == [("openai", "gpt-4o-mini"), ("anthropic", "claude-sonnet-4-5")], served
        kinds = [b.get("type") for m in fake_llm.requests[1].body["messages"] if isinstance(m["content"], list)
                 for b in m["content"]]  # fmt: skip
        assert "tool_use" in kinds and "tool_result" in kinds
        proc.close()
        proc.validate_schemas()
    finally:
        proc.kill()
