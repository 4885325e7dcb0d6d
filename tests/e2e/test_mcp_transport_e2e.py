"""Issue 30 (items 6 and 7) end to end: an MCP server's processes end with it, and its output is bounded.

Item 6: a server's helpers (one in its process group, one double-forked and
`setsid`'d, both started by `tests/fakes/mcp_with_helpers.py` before it execs
the server) must not outlive the session or term2, whichever way term2 ends:
`session/close`, a normal exit (stdin closed), SIGTERM, SIGKILL. Two real
servers: the SDK-built `tests/fakes/mcp_server.py` and `mcp-server-time` from
PyPI. Every process of a server carries a marker in its environment, and the
test polls /proc until none is left (a bounded wait; no duration is asserted).

Item 7: a server that writes one 40 MiB line and never ends it is that
server's failure: the call fails, the user is told the server stopped, its
processes are gone, and the session's other server still answers.
"""

from __future__ import annotations

import contextlib
import os
import select as io_select
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import llm_env
from tests.e2e.test_mcp_e2e import REPO, echo, fake_server, open_session, tool_results, wait_for_notice, wait_until
from tests.e2e.test_tools_e2e import Agent, _agent, _warm_up, only_call, select
from tests.support.acp_process import AcpProcess, Message
from tests.support.procs import processes_with

ENV_MARKER = "TERM2_TEST_MCP_MARKER"


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with _agent(tmp_path_factory.mktemp("mcp-transport"), 1) as started:
        _warm_up(started)
        yield started


@pytest.fixture(autouse=True)
def _clean_script(agent: Agent) -> Iterator[None]:
    agent.llm.state.reset()
    yield
    agent.llm.state.reset()
    agent.answers.policy = None


def _server_command(kind: str, tmp: Path) -> list[str]:
    if kind == "sdk":
        return [sys.executable, "-m", "tests.fakes.mcp_server", "--record", str(tmp / "calls.jsonl")]
    command = shutil.which("mcp-server-time", path=str(Path(sys.executable).parent))
    assert command is not None, "mcp-server-time is a dev dependency (uv sync --group dev)"
    return [command, "--local-timezone", "UTC"]


def helped(kind: str, tmp: Path, marker: str) -> Message:
    """The server `kind`, started with two helpers of its own; every process of it carries `marker`."""
    env = [{"name": "PYTHONPATH", "value": REPO}, {"name": ENV_MARKER, "value": marker}]
    args = ["-m", "tests.fakes.mcp_with_helpers", *_server_command(kind, tmp)]
    return {"name": kind, "command": sys.executable, "args": args, "env": env}


def processes_of(marker: str) -> list[int]:
    return processes_with(f"{ENV_MARKER}={marker}", environ=True)


def _started(proc: AcpProcess, root: Path, kind: str, tmp: Path) -> tuple[str, str]:
    marker = uuid.uuid4().hex
    sid = open_session(proc, root, [helped(kind, tmp, marker)])
    wait_until(lambda: len(processes_of(marker)) >= 3, "the server and its two helpers to start")
    return sid, marker


@pytest.mark.parametrize("kind", ["sdk", "time"])
def test_session_close_leaves_no_process_of_a_server(agent: Agent, tmp_path: Path, kind: str) -> None:
    sid, marker = _started(agent.proc, agent.root, kind, tmp_path)
    assert agent.proc.result("session/close", {"sessionId": sid}) == {}
    wait_until(lambda: not processes_of(marker), "every process of the server to end with its session")


@pytest.mark.parametrize("ending", ["exit", "sigterm", "sigkill"])
@pytest.mark.parametrize("kind", ["sdk", "time"])
def test_term2_ending_leaves_no_process_of_a_server(agent: Agent, tmp_path: Path, kind: str, ending: str) -> None:
    proc = AcpProcess(tmp_path, env=llm_env(agent.llm))
    try:
        proc.initialize(1)
        _, marker = _started(proc, agent.root, kind, tmp_path)
        if ending == "exit":
            proc.close(30)
        elif ending == "sigterm":
            proc.terminate(signal.SIGTERM, 30)
        else:
            proc.proc.send_signal(signal.SIGKILL)
            proc.proc.wait(30)
        wait_until(lambda: not processes_of(marker), f"every process of the server to end with term2 ({ending})")
    finally:
        proc.kill()


GUARD = 120.0  # a hang guard, not a duration: the chain's end is an event (the FIFO's last writer gone)


def _chain_read(reader: int) -> bytes:
    """What the chain wrote, up to its end (b"" once every process holding the FIFO has exited), or a failed
    assertion after the hang guard."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        ready, _, _ = io_select.select([reader], [], [], 1.0)
        if ready:
            return os.read(reader, 4096)
    raise AssertionError("timed out waiting for the fork chain (it outlived its server's session)")


def test_a_fork_chain_of_a_server_ends_with_its_session(agent: Agent, tmp_path: Path) -> None:
    """Red team of issue 30.6: a helper that forks and exits in a loop is never caught by a kill loop that
    looks in /proc and then signals (each process is gone before the signal, its successor unseen); the
    old launcher went round until term2 SIGKILLed it and the chain ran on under pid 1. The server's
    process group is killed at once now (the kernel's group kill is atomic against fork)."""
    fifo = tmp_path / "chain"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    pgid, ended = 0, False
    try:
        args = ["-m", "tests.fakes.mcp_with_chain", str(fifo), *_server_command("sdk", tmp_path)]
        server = {
            "name": "chain",
            "command": sys.executable,
            "args": args,
            "env": [{"name": "PYTHONPATH", "value": REPO}],
        }
        sid = open_session(agent.proc, agent.root, [server])
        line = _chain_read(reader)
        pgid = int(line.split(b"\n")[0])
        assert pgid > 1
        assert agent.proc.result("session/close", {"sessionId": sid}) == {}
        while _chain_read(reader):
            pass
        ended = True
    finally:
        if pgid > 1 and not ended:  # the chain escaped: its group is still in use, so this reaches only it
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        os.close(reader)


def test_a_line_past_the_bound_fails_that_server_and_term2_goes_on(agent: Agent, tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    raw = {
        "name": "raw",
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_raw_server"],
        "env": [{"name": "PYTHONPATH", "value": REPO}, {"name": ENV_MARKER, "value": marker}],
    }
    sid = open_session(agent.proc, agent.root, [raw, fake_server("fake", tmp_path / "calls.jsonl", uuid.uuid4().hex)])
    flood = {"name": "mcp__raw__lone", "arguments": {"flood": 40 * 1024 * 1024}}
    messages = agent.turn(sid, flood, policy=select("allow-once"))
    assert only_call(messages)["status"] == "failed"
    wait_for_notice(agent, sid, "'raw' stopped (sent a message longer than 16 MiB)")
    wait_until(lambda: not processes_of(marker), "the flooding server to be stopped")

    agent.llm.state.reset()
    messages = agent.turn(sid, echo("still here"), policy=select("allow-once"))
    assert only_call(messages)["status"] == "completed"
    assert any("echo: still here" in r for r in tool_results(agent.llm.requests[-1].body))
    assert "mcp__raw__lone" not in str(agent.llm.requests[-1].body["tools"])


def test_lines_that_are_not_messages_cost_term2s_log_a_bound(agent: Agent, tmp_path: Path) -> None:
    """Red team of issue 30.7: a server's stderr reaches term2's log (the editor's) 1 MiB at most, but every
    stdout line that is not JSON-RPC was logged as a warning of its own, about 100 times its size (the
    parse error's text): 20,000 lines of 2 bytes made 8 MB of log. They are counted against a bound now;
    the call after them is answered."""
    raw = {
        "name": "raw",
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_raw_server"],
        "env": [{"name": "PYTHONPATH", "value": REPO}],
    }
    sid = open_session(agent.proc, agent.root, [raw])
    before = len(agent.proc.stderr().encode())
    garbage = {"name": "mcp__raw__lone", "arguments": {"garbage": 20_000, "text": "after"}}
    messages = agent.turn(sid, garbage, policy=select("allow-once"))
    assert only_call(messages)["status"] == "completed"
    logged = len(agent.proc.stderr().encode()) - before
    assert logged < 2 * 1024 * 1024, f"{logged} bytes of term2's log for 40 KB of garbage"
