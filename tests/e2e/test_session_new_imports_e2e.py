"""The first `session/new` is answered before anything only a turn needs is imported (issue 32, ADR 0052).

What `session/new` waits for right after `initialize` is the interpreter's
time importing the session part; every module it does not need is time the
editor's thread opening waits for. The real `term2 acp` runs under a small
probe that records `sys.modules` at the instant the `session/new` reply is
written to the protocol descriptor, and holds the turn part's loading (which
start-up begins once the first session opened) until that write: so the
snapshot is what answering needed, whatever the scheduling. No clock is read.
It also records that the garbage collector, off during start-up, is back on by
then, with start-up's objects frozen out of its collections.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.test_native_wires_e2e import model_requests, openai_env
from tests.e2e.test_prompts import make_workspace
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm

PROBE = r"""
import gc, json, os, sys, threading

snapshot_path = sys.argv[1]
replied = threading.Event()
real_write = os.write


def write(fd, data):
    if fd > 2 and b'"id":2,"result"' in bytes(data[:40]) and not replied.is_set():
        with open(snapshot_path, "w") as out:
            seen = {"modules": sorted(sys.modules), "collecting": gc.isenabled(), "frozen": gc.get_freeze_count()}
            json.dump(seen, out)
        replied.set()
    return real_write(fd, data)


os.write = write

from term2.app.entrypoints import serve  # noqa: E402

load_turn_part = serve._import_turn_modules


def held_turn_part():
    replied.wait(60)  # the turn part loads once the reply is out, not beside it
    load_turn_part()


serve._import_turn_modules = held_turn_part
from term2.__main__ import main  # noqa: E402

main(["acp"])
"""

# What a turn (or a list, a command, a log line) needs and opening a session does not: the LLM and tool ports,
# the turn's updates, the history's types and schema (pydantic itself; its core validates parameters), the
# search, the HTTP client, the use case.
# (v1's command list is made once the reply is queued, while it is written: not checked here.)
TURN_ONLY = (
    "pydantic",
    "term2.domain.history",
    "term2.domain.transcript",
    "term2.ports.llm",
    "term2.ports.tools",
    "term2.ports.updates",
    "term2.adapters.workspace",
    "term2.app.prompting",
    "httpx",
    "term2.ports.mcp",  # and a session that names no MCP server needs no MCP port
    "term2.app.instructions",  # the project's instruction files: made by the first turn that reads them
    "structlog",  # loaded once the first session is answered, start-up's lines kept until then (ADR 0053)
    "term2.app.tools.names",  # the rules for names in a refusal or an answer: a session opened without one
    "term2.app.mcp.names",  # and those for the names an MCP server chooses: with the first server
    "term2.adapters.acp.turns",  # what a connection's prompts need: built with the turn part
    "term2.domain.context_estimate",  # a session's context memory: made by its first turn
    "term2.adapters.sandbox.invocation",  # the sandbox's argv: start-up's check for bwrap needs only its path
    "term2.adapters.store.cursor",  # the list's signed cursors: made by the first list
    "logging.handlers",  # the log file's handler: opened when structlog loads or a library warns
)


class ProbedAgent:
    """The real `term2 acp` under a probe program, over pipes; `ask` sends a request and reads to its answer."""

    def __init__(self, tmp_path: Path, llm: FakeLLMServer, probe: str, snapshot: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
        env.update(openai_env(llm))
        env.update(
            TERM2_HOME=str(tmp_path / "term2-home"),
            XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),
            XDG_STATE_HOME=str(tmp_path / "state"),
        )
        self._stderr = tmp_path / "stderr.log"
        with self._stderr.open("wb") as stderr:
            self._process = subprocess.Popen(
                [sys.executable, "-c", probe, str(snapshot)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=tmp_path,
            )
        self.replies: dict[object, dict[str, Any]] = {}

    def ask(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        stdin, stdout = self._process.stdin, self._process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        stdin.flush()
        while rid not in self.replies:
            line = stdout.readline()
            assert line, self._stderr.read_text()[-3000:]
            message = json.loads(line)
            if "id" in message:
                self.replies[message["id"]] = message
        return self.replies[rid]

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        assert self._process.wait(60) == 0, self._stderr.read_text()[-3000:]


def test_session_new_answered_before_any_turn_module_is_imported(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    snapshot = tmp_path / "modules.json"
    with start_fake_llm() as llm:
        agent = ProbedAgent(tmp_path, llm, PROBE, snapshot)
        try:
            agent.ask(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False}}})
            agent.ask(2, "session/new", {"cwd": str(workspace), "mcpServers": []})
        finally:
            agent.close()
    replies = agent.replies
    created = replies[2]["result"]
    assert created["sessionId"].startswith("sess_")
    assert {o["id"] for o in created["configOptions"]} == {"model", "mode"}  # the whole answer, pickers included
    assert created["modes"]["currentModeId"] == "ask"
    seen = json.loads(snapshot.read_text())
    loaded = set(seen["modules"])
    assert "term2.adapters.store.sqlite_store" in loaded and "pydantic_core._pydantic_core" in loaded
    assert "pydantic_core.core_schema" not in loaded  # the compiled module alone (term2.support.pydantic_core_native)
    assert sorted(m for m in TURN_ONLY if m in loaded) == []
    # start-up ran without collections (term2.__main__); what it made is frozen and collecting is back on
    assert seen["collecting"] and seen["frozen"] > 10_000, seen["frozen"]


TURN_PROBE = r"""
import json, os, sys, threading

snapshot_path = sys.argv[1]
seen = threading.Event()
real_write = os.write


def write(fd, data):
    if fd > 2 and b"agent_message_chunk" in bytes(data) and not seen.is_set():
        with open(snapshot_path, "w") as out:
            json.dump(sorted(sys.modules), out)
        seen.set()
    return real_write(fd, data)


os.write = write
from term2.__main__ import main  # noqa: E402

main(["acp"])
"""


def test_first_turn_answers_without_pydantic_and_the_next_reads_it_back(tmp_path: Path) -> None:
    """A turn only writes history, and pydantic-core writes it without a schema (ADR 0053): the first
    answer streams before pydantic is imported, and before the sandbox a turn without commands never
    uses is made; the schema that reads history back is built after the turn, and the second turn's
    request carries the first turn, read back from the store."""
    workspace = make_workspace(tmp_path)
    snapshot = tmp_path / "modules.json"
    with start_fake_llm() as llm:
        agent = ProbedAgent(tmp_path, llm, TURN_PROBE, snapshot)
        try:
            agent.ask(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            session = agent.ask(2, "session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
            first = agent.ask(3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "one"}]})
            second = agent.ask(4, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "two"}]})
        finally:
            agent.close()
        requests = model_requests(llm, "openai")
    assert first["result"]["stopReason"] == "end_turn" and second["result"]["stopReason"] == "end_turn"
    loaded = set(json.loads(snapshot.read_text()))
    assert "httpx" in loaded and "term2.app.prompting" in loaded  # the probe saw the turn
    assert "pydantic" not in loaded
    assert "term2.adapters.sandbox.bubblewrap" not in loaded  # made by the first command, or after the turn
    assert len(requests) == 2
    said = [m.get("content") for m in requests[1].body["messages"]]
    assert "one" in json.dumps(said) and "echo" in json.dumps(said), said  # the first turn, read back
