"""Issue 19 (items 1 and 2) end to end: the MCP servers an ACP v1 client names, through a real `term2 acp`.

The servers are real: `tests/fakes/mcp_server.py` (written with the official
SDK, recording every call it receives) over stdio and streamable HTTP, and
`mcp-server-time` from PyPI. One warmed-up v1 process serves the module;
each test opens its own session with its own servers and record file.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e.test_tools_e2e import Agent, _agent, _warm_up, only_call, select
from tests.support.acp_process import AcpProcess, Message
from tests.support.procs import processes_with

REPO = str(Path(__file__).resolve().parents[2])
WAIT = 30.0
SLOW = {"name": "mcp__fake__slow", "arguments": {"seconds": 60}}


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with _agent(tmp_path_factory.mktemp("mcp"), 1) as started:
        _warm_up(started)
        yield started


@pytest.fixture(autouse=True)
def _clean_script(agent: Agent) -> Iterator[None]:
    agent.llm.state.reset()  # the warm-up's requests too
    yield
    agent.llm.state.reset()
    agent.answers.policy = None


def fake_server(name: str, record: Path, marker: str, **env: str) -> Message:
    pairs = [{"name": "PYTHONPATH", "value": REPO}, *({"name": k, "value": v} for k, v in env.items())]
    args = ["-m", "tests.fakes.mcp_server", "--record", str(record), "--marker", marker]
    return {"name": name, "command": sys.executable, "args": args, "env": pairs}


def recorded(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def wait_until(condition: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def open_session(proc: AcpProcess, root: Path, servers: list[Message]) -> str:
    return proc.result("session/new", {"cwd": str(root), "mcpServers": servers})["sessionId"]  # type: ignore[no-any-return]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def sent(proc: AcpProcess) -> list[Message]:
    """Everything term2 wrote so far (the transcript is appended to by the reader thread)."""
    return [m for direction, m in list(proc.transcript) if direction == "agent"]


def notices(proc: AcpProcess, session_id: str) -> str:
    return "".join(
        u["content"]["text"]
        for m in sent(proc)
        if m.get("method") == "session/update" and m["params"].get("sessionId") == session_id
        for u in [m["params"]["update"]]
        if u.get("sessionUpdate") == "agent_message_chunk"
    )


def wait_for_notice(agent: Agent, session_id: str, text: str) -> None:
    wait_until(lambda: text in notices(agent.proc, session_id), f"a notice saying {text!r}")


def setup(agent: Agent, tmp: Path, **env: str) -> tuple[str, Path, str]:
    record, marker = tmp / "calls.jsonl", f"mcp-{uuid.uuid4().hex}"
    sid = open_session(agent.proc, agent.root, [fake_server("fake", record, marker, **env)])
    return sid, record, marker


def echo(text: str = "hi", server: str = "fake") -> dict[str, Any]:
    return {"name": f"mcp__{server}__echo", "arguments": {"text": text}}


# --- tests ---------------------------------------------------------------------


def test_tools_are_listed_and_an_approved_call_reaches_the_model(agent: Agent, tmp_path: Path) -> None:
    sid, record, _ = setup(agent, tmp_path, FAKE_VALUE="forty-two")
    messages = agent.turn(sid, echo("hi"), policy=select("allow-once"))
    first, second = agent.llm.requests[0].body, agent.llm.requests[1].body
    names = tool_names(first)
    assert {"mcp__fake__echo", "mcp__fake__slow", "mcp__fake__grow"} <= set(names)
    assert names.index("read_file") < names.index("mcp__fake__echo")  # built-in first, the prefix stays put
    echo_spec = next(t["function"] for t in first["tools"] if t["function"]["name"] == "mcp__fake__echo")
    assert echo_spec["parameters"]["properties"]["text"]["type"] == "string"
    assert "Echo the text back." in echo_spec["description"]
    assert any("echo: hi" in result for result in tool_results(second))
    assert tool_names(second) == names  # the same tools in the same order: the prompt cache holds

    request = agent.proc.permission_requests[-1]["params"]
    assert {o["optionId"] for o in request["options"]} == {"allow-once", "reject"}
    assert {o["kind"] for o in request["options"]} == {"allow_once", "reject_once"}
    assert request["toolCall"]["title"] == "echo (MCP server 'fake')"
    assert request["toolCall"]["rawInput"] == {"text": "hi"}
    assert only_call(messages)["status"] == "completed"
    assert [c["tool"] for c in recorded(record)] == ["echo"]

    agent.llm.state.reset()
    agent.turn(sid, {"name": "mcp__fake__env", "arguments": {"name": "FAKE_VALUE"}}, policy=select("allow-once"))
    agent.turn(sid, {"name": "mcp__fake__where", "arguments": {}}, policy=select("allow-once"))
    results = [r for req in agent.llm.requests for r in tool_results(req.body)]
    assert any("forty-two" in r for r in results)  # env as the client gave it
    assert any(r.strip() == str(agent.root) for r in results)  # cwd: the session root


def test_a_rejected_call_never_reaches_the_server(agent: Agent, tmp_path: Path) -> None:
    sid, record, _ = setup(agent, tmp_path)
    messages = agent.turn(sid, echo("secret"), policy=select("reject"))
    assert only_call(messages)["status"] == "failed"
    assert any("rejected" in r for r in tool_results(agent.llm.requests[-1].body))
    assert recorded(record) == []


def test_a_server_that_fails_to_start_is_reported_and_the_session_works(agent: Agent, tmp_path: Path) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server"), "args": [], "env": []}
    sid = open_session(agent.proc, agent.root, [broken])
    wait_for_notice(agent, sid, "'broken' could not be started")
    agent.turn(sid)
    assert not [n for n in tool_names(agent.llm.requests[-1].body) if n.startswith("mcp__")]
    assert "MCP server unavailable" in agent.proc.stderr()


def test_sse_entries_are_skipped_with_a_notice(agent: Agent) -> None:
    sse = {"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}
    sid = open_session(agent.proc, agent.root, [sse])
    wait_for_notice(agent, sid, "'old' was skipped")


def test_a_server_killed_mid_call_fails_the_call_and_the_turn_goes_on(agent: Agent, tmp_path: Path) -> None:
    sid, record, marker = setup(agent, tmp_path)
    request_id = agent.start_prompt(sid, SLOW, policy=select("allow-once"))
    wait_until(lambda: [c["tool"] for c in recorded(record)] == ["slow"], "the slow call to start")
    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)
    messages = agent.proc.collect_until(lambda m: m.get("id") == request_id, WAIT)
    assert messages[-1]["result"]["stopReason"] == "end_turn"
    assert only_call(messages)["status"] == "failed"
    assert any("is gone" in r for r in tool_results(agent.llm.requests[-1].body))
    wait_for_notice(agent, sid, "'fake' stopped")
    agent.turn(sid)
    assert "mcp__fake__echo" not in tool_names(agent.llm.requests[-1].body)


def test_cancel_reaches_the_server_as_mcp_cancellation(agent: Agent, tmp_path: Path) -> None:
    sid, record, _ = setup(agent, tmp_path)
    request_id = agent.start_prompt(sid, SLOW, policy=select("allow-once"))
    wait_until(lambda: [c["tool"] for c in recorded(record)] == ["slow"], "the slow call to start")
    agent.proc.notify("session/cancel", {"sessionId": sid})
    response = agent.proc.collect_until(lambda m: m.get("id") == request_id, WAIT)[-1]
    assert response["result"]["stopReason"] == "cancelled"
    wait_until(lambda: any(c.get("cancelled") for c in recorded(record)), "the server to see the cancellation")


def test_tools_list_changed_updates_the_next_request(agent: Agent, tmp_path: Path) -> None:
    sid, record, _ = setup(agent, tmp_path)
    agent.turn(sid, {"name": "mcp__fake__grow", "arguments": {}}, policy=select("allow-once"))
    assert "mcp__fake__extra" not in tool_names(agent.llm.requests[0].body)
    wait_until(lambda: "MCP server's tools changed" in agent.proc.stderr(), "term2 to list the tools again")
    agent.turn(sid, {"name": "mcp__fake__extra", "arguments": {}}, policy=select("allow-once"))
    assert "mcp__fake__extra" in tool_names(agent.llm.requests[-2].body)
    assert [c["tool"] for c in recorded(record)] == ["grow", "extra"]


def test_close_leaves_no_server_behind(agent: Agent, tmp_path: Path) -> None:
    sid, _, marker = setup(agent, tmp_path)
    wait_until(lambda: processes_with(marker), "the server to start")
    assert agent.proc.result("session/close", {"sessionId": sid}) == {}
    wait_until(lambda: not processes_with(marker), "the server to end with its session")


def test_a_loaded_session_reconnects_what_the_client_passes_then(agent: Agent, tmp_path: Path) -> None:
    sid, _, first = setup(agent, tmp_path)
    wait_until(lambda: processes_with(first), "the first server to start")
    second = f"mcp-{uuid.uuid4().hex}"
    params = {"sessionId": sid, "cwd": str(agent.root), "mcpServers": [fake_server("again", tmp_path / "b", second)]}
    agent.proc.result("session/load", params)
    wait_until(lambda: not processes_with(first) and processes_with(second), "the servers to be swapped")
    agent.turn(sid)
    names = tool_names(agent.llm.requests[-1].body)
    assert "mcp__again__echo" in names and "mcp__fake__echo" not in names


def test_the_third_party_time_server_works(agent: Agent) -> None:
    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert command is not None, "mcp-server-time is a dev dependency (uv sync --group dev)"
    server = {"name": "time", "command": command, "args": ["--local-timezone", "UTC"], "env": []}
    sid = open_session(agent.proc, agent.root, [server])
    call = {"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}
    messages = agent.turn(sid, call, policy=select("allow-once"))
    assert "mcp__time__convert_time" in tool_names(agent.llm.requests[0].body)
    assert only_call(messages)["status"] == "completed"
    assert any('"timezone": "UTC"' in r for r in tool_results(agent.llm.requests[-1].body))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(record: Path) -> Iterator[str]:
    port = _free_port()
    args = [sys.executable, "-m", "tests.fakes.mcp_server", "--record", str(record), "--http", str(port)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:

        def listening() -> bool:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                return True
            return False

        wait_until(listening, "the HTTP MCP server to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(10)


def test_an_http_server_entry_is_dialled_with_its_headers(agent: Agent, tmp_path: Path) -> None:
    record = tmp_path / "http.jsonl"
    with http_server(record) as url:
        entry = {"type": "http", "name": "web", "url": url, "headers": [{"name": "X-Token", "value": "t0k"}]}
        sid = open_session(agent.proc, agent.root, [entry])
        agent.turn(sid, echo("over http", server="web"), policy=select("allow-once"))
        assert any("echo: over http" in r for r in tool_results(agent.llm.requests[-1].body))
        assert recorded(record) == [{"tool": "echo", "arguments": {"text": "over http"}, "token": "t0k"}]
        agent.proc.result("session/close", {"sessionId": sid})


def test_killing_term2_leaves_no_server_behind(agent: Agent, tmp_path: Path) -> None:
    proc = AcpProcess(tmp_path, env=llm_env(agent.llm))
    try:
        proc.initialize(1)
        marker = f"mcp-{uuid.uuid4().hex}"
        open_session(proc, agent.root, [fake_server("fake", tmp_path / "calls.jsonl", marker)])
        wait_until(lambda: processes_with(marker), "the server to start")
        proc.proc.send_signal(signal.SIGKILL)
        proc.proc.wait(10)
        wait_until(lambda: not processes_with(marker), "the server to die with term2")
    finally:
        proc.kill()


def test_initialize_advertises_http(agent: Agent) -> None:
    replies = [m for m in sent(agent.proc) if "agentCapabilities" in m.get("result", {})]
    assert replies[0]["result"]["agentCapabilities"]["mcpCapabilities"] == {"http": True, "sse": False}
