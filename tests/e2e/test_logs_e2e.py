"""Issue 31 end to end, logs and the protocol process: stderr empty during an ordinary ACP turn (the log file
has it), the log folder never a workspace, `auth_required` on v1 without a key, and `term2 acp` typed at a
terminal. Each through the real process with a fresh HOME."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_mcp_e2e import fake_server, recorded
from tests.support.acp_process import AcpProcess, allow_kind
from tests.support.exec_process import PtyExec
from tests.support.fresh_home import Fresh
from tests.support.schemas import check_definition

# --- logs ----------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="a command needs bubblewrap")
def test_an_ordinary_acp_turn_with_a_command_and_an_mcp_server_leaves_stderr_empty(
    fresh: Fresh, tmp_path: Path
) -> None:
    env = fresh.keyed(TERM2_LOG_LEVEL="", TERM2_MODEL="openai/fake-model")
    proc = AcpProcess(tmp_path, env=env, permission=allow_kind("allow_once"), home=fresh.home / "unused")
    try:
        proc.initialize(1)
        record = tmp_path / "calls.jsonl"
        sid = proc.result("session/new", {"cwd": str(fresh.root), "mcpServers": [fake_server("fake", record, "m")]})[
            "sessionId"
        ]
        fresh.llm.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo hi from bwrap"}}]})
        fresh.llm.push({"tool_calls": [{"name": "mcp__fake__echo", "arguments": {"text": "hi"}}]})
        prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
        assert proc.result("session/prompt", prompt, timeout=120)["stopReason"] == "end_turn"
        assert [c["tool"] for c in recorded(record)] == ["echo"]
        assert proc.close() == 0
        proc.validate_schemas()
    finally:
        proc.kill()
    assert proc.stderr() == ""
    lines = [json.loads(line) for line in fresh.log_file.read_text().splitlines()]
    start = next(line for line in lines if line["event"] == "term2 started")
    assert start["command"] == "acp" and start["model"] == "openai/fake-model" and start["endpoint"] == "127.0.0.1"
    assert start["protocol_version"] == 1
    assert "sk-test" not in fresh.log_file.read_text()
    assert any(line.get("session_id") == sid for line in lines)  # the turn is in the file
    assert (fresh.log_file.stat().st_mode & 0o777, fresh.log_file.parent.stat().st_mode & 0o777) == (0o600, 0o700)


def test_the_log_folder_is_never_a_workspace(fresh: Fresh) -> None:
    """A workspace holding the logs would let its commands read what every session logged."""
    state = fresh.home / ".local" / "state"
    (state / "term2").mkdir(parents=True, mode=0o700)
    for folder in (state, state / "term2"):
        ran = fresh.term2("exec", "-C", str(folder), "hi", env=fresh.keyed())
        assert ran.returncode == 2, ran.stderr
        assert "cannot be a workspace" in ran.stderr
    assert not fresh.llm.requests


def test_acp_v1_without_a_key_answers_the_prompt_with_auth_required(fresh: Fresh, tmp_path: Path) -> None:
    proc = AcpProcess(tmp_path, env=fresh.env(TERM2_LOG_LEVEL=""), home=fresh.home / "store")
    try:
        proc.initialize(1)
        sid = proc.new_session(fresh.root)
        answer = proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
        assert proc.close() == 0
        proc.validate_schemas()
    finally:
        proc.kill()
    error: dict[str, Any] = answer["error"]
    assert error["code"] == -32000 and error["message"] == "Authentication required"
    assert "set OPENAI_API_KEY" in error["data"]["message"]
    check_definition(1, "Error", error, "session/prompt's auth_required")
    assert proc.stderr() == ""


def test_acp_on_a_terminal_says_what_it_is_and_quits_on_ctrl_c(fresh: Fresh) -> None:
    shell = PtyAcp(fresh.keyed(), fresh.root)
    try:
        shell.expect("this is the Agent Client Protocol server an editor starts")
        shell.expect('term2 exec "explain this repository"')
        shell.send(b"\x03")
        assert shell.wait() == 130
        assert "Traceback" not in shell.text()
    finally:
        shell.kill()


def test_acp_on_a_terminal_still_serves_a_client_that_speaks(fresh: Fresh) -> None:
    shell = PtyAcp(fresh.keyed(), fresh.root)
    try:
        shell.expect("this is the Agent Client Protocol server an editor starts")
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        shell.send(json.dumps(hello).encode() + b"\n")
        shell.expect('"protocolVersion":1')
        listing = {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}
        shell.send(json.dumps(listing).encode() + b"\n")
        shell.expect('"sessions":[]')  # answered by the server itself, which watches for Ctrl-C by now
        shell.send(b"\x03")  # a clean exit, as on SIGTERM
        assert shell.wait() == 0
        assert "Traceback" not in shell.text()
    finally:
        shell.kill()


class PtyAcp(PtyExec):
    """`term2 acp` on a pseudo-terminal, as a person would start it by hand."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        super().__init__([], env, cwd, command=("acp",))
