"""Issue 31 item 2 over ACP, through the real `term2 acp` with a fresh HOME: v1 `initialize` advertises one
auth method (`terminal`, args ["login"], only to a client that runs one; `agent` otherwise) and the logout
capability, each reply checked against the 2.4.0 v1 schema; `authenticate` says what to do, then succeeds once
`term2 login` stored a key; `logout` forgets it; v2 advertises nothing and has neither method. A stored key
never reaches the log file, the transcript, a sandboxed command's environment or an MCP server's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_login_e2e import KEY, PtyLogin, base_only, stored_file
from tests.e2e.test_mcp_e2e import fake_server, recorded
from tests.support.acp_process import AcpProcess, allow_kind
from tests.support.fresh_home import Fresh, fresh_home
from tests.support.schemas import check_definition


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Fresh]:
    with fresh_home(tmp_path) as made:
        made.llm.configure(require_key=KEY)
        yield made


def acp(fresh: Fresh, tmp_path: Path, base: bool = True, **extra: str) -> AcpProcess:
    """`term2 acp` without any key variable; `base`: OpenAI's base URL pointed at the fake server (a base URL of
    one's own may need no key, ADR 0045, so without it the model needs a key)."""
    env = (base_only(fresh) if base else fresh.env()) | {"TERM2_LOG_LEVEL": "", **extra}
    return AcpProcess(tmp_path, env=env, permission=allow_kind("allow_once"), home=fresh.home / "unused")


def prompt(proc: AcpProcess, sid: str, text: str = "hi") -> dict[str, Any]:
    return proc.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout=120)


def test_v1_advertises_the_agent_method_and_authenticate_succeeds_once_a_key_is_stored(
    fresh: Fresh, tmp_path: Path
) -> None:
    proc = acp(fresh, tmp_path, base=False, TERM2_MODEL="openai/gpt-5")  # a model configured, its key not yet stored
    try:
        result = proc.initialize(1)
        check_definition(1, "InitializeResponse", result, "initialize")
        assert [m["id"] for m in result["authMethods"]] == ["api-key"] and "type" not in result["authMethods"][0]
        assert "OPENAI_API_KEY" in result["authMethods"][0]["description"]
        assert result["agentCapabilities"]["auth"] == {"logout": {}}

        refused = proc.call("authenticate", {"methodId": "api-key"})["error"]
        assert refused["code"] == -32000 and "set OPENAI_API_KEY" in refused["data"]["message"]
        assert "term2 login" in refused["data"]["message"]
        wrong = proc.call("authenticate", {"methodId": "term2-login"})["error"]
        assert wrong["code"] == -32602  # a terminal method is never passed to authenticate

        ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n")  # e.g. in another window
        assert ran.returncode == 0, ran.stderr
        assert proc.result("authenticate", {"methodId": "api-key"}) == {}
        sid = proc.new_session(fresh.root)

        assert proc.result("logout", {}) == {}
        assert json.loads(stored_file(fresh).read_text()) == {}
        again = prompt(proc, sid)["error"]  # after logout, the stored key is gone from this process too
        assert again["code"] == -32000 and "set OPENAI_API_KEY" in again["data"]["message"]
        assert proc.call("authenticate", {"methodId": "api-key"})["error"]["code"] == -32000
        assert proc.close() == 0
        proc.validate_schemas()
    finally:
        proc.kill()
    assert proc.stderr() == ""


def test_authenticate_after_a_login_in_a_process_started_without_any_model_says_to_restart(
    fresh: Fresh, tmp_path: Path
) -> None:
    proc = acp(fresh, tmp_path, base=False)
    try:
        proc.initialize(1)
        assert fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n").returncode == 0
        refused = proc.call("authenticate", {"methodId": "api-key"})["error"]
        assert refused["code"] == -32000 and "restart the agent" in refused["data"]["message"]
        assert proc.close() == 0
        proc.validate_schemas()
    finally:
        proc.kill()


def test_v1_offers_terminal_login_only_to_a_client_that_runs_one(fresh: Fresh, tmp_path: Path) -> None:
    proc = acp(fresh, tmp_path)
    try:
        result = proc.initialize(1, capabilities={"auth": {"terminal": True}})
        check_definition(1, "InitializeResponse", result, "initialize")
        assert result["authMethods"] == [
            {
                "type": "terminal",
                "id": "term2-login",
                "name": "Log in with an API key",
                "description": "Pick a provider and paste its key; term2 checks it and stores it for later runs.",
                "args": ["login"],
            }
        ]
        assert proc.close() == 0
        proc.validate_schemas()
    finally:
        proc.kill()
    # The client runs the command it starts term2 with, the method's args appended: `term2 acp login`.
    shell = PtyLogin(base_only(fresh), fresh.root, ["acp", "login"])
    try:
        shell.expect("Provider")
        shell.send(b"openai\n")
        shell.expect("not shown")
        shell.send(KEY.encode() + b"\n")
        assert shell.wait() == 0, shell.text()  # zero: the login succeeded
        assert KEY not in shell.text()
    finally:
        shell.kill()
    # ... then reconnects: the new process reads the stored key
    proc = acp(fresh, tmp_path)
    try:
        proc.initialize(1, capabilities={"auth": {"terminal": False}})
        sid = proc.new_session(fresh.root)
        fresh.llm.push({"text": "hello"})
        assert prompt(proc, sid)["result"]["stopReason"] == "end_turn"
        assert proc.close() == 0
    finally:
        proc.kill()


def test_v2_advertises_no_auth_method_and_has_neither_method(fresh: Fresh, tmp_path: Path) -> None:
    proc = acp(fresh, tmp_path)
    try:
        result = proc.initialize(2)
        assert result == {
            "protocolVersion": 2,
            "info": {"name": "term2", "title": "term2", "version": result["info"]["version"]},
            "capabilities": {"session": {}},
        }
        assert proc.call("authenticate", {"methodId": "api-key"})["error"]["code"] == -32601
        assert proc.call("logout", {})["error"]["code"] == -32601
        assert proc.close() == 0
    finally:
        proc.kill()


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="a command needs bubblewrap")
def test_a_stored_key_never_reaches_the_log_the_transcript_a_command_or_an_mcp_server(
    fresh: Fresh, tmp_path: Path
) -> None:
    assert fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n").returncode == 0
    proc = acp(fresh, tmp_path, TERM2_MODEL="openai/fake-model", TERM2_LOG_LEVEL="debug")
    try:
        proc.initialize(1)
        record = tmp_path / "calls.jsonl"
        server = fake_server("fake", record, "m")
        sid = proc.result("session/new", {"cwd": str(fresh.root), "mcpServers": [server]})["sessionId"]
        command = f"env; cat /proc/1/environ; cat {stored_file(fresh)}"
        fresh.llm.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]})
        fresh.llm.push({"tool_calls": [{"name": "mcp__fake__env", "arguments": {"name": "OPENAI_API_KEY"}}]})
        fresh.llm.push({"text": "done"})
        assert prompt(proc, sid, f"hi (not the key: {KEY[:6]})")["result"]["stopReason"] == "end_turn"
        assert proc.close() == 0
    finally:
        proc.kill()
    assert [c["tool"] for c in recorded(record)] == ["env"]
    sent = [json.dumps(r.body) for r in fresh.llm.requests]
    shell_result, mcp_result = sent[-2], sent[-1]
    assert "PATH=" in shell_result and KEY not in shell_result  # the command's environment, shown to the model
    assert "<unset>" in mcp_result and KEY not in mcp_result  # the MCP server's environment
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in fresh.llm.requests)  # yet it was used
    assert KEY not in fresh.log_file.read_text()
    store = fresh.home / ".local" / "share" / "term2"
    assert all(KEY.encode() not in f.read_bytes() for f in store.rglob("*") if f.is_file())  # the transcript
    assert KEY not in proc.stderr()


def test_a_key_stored_after_start_is_redacted_from_the_log_like_one_read_at_start(fresh: Fresh, tmp_path: Path) -> None:
    """A server whose error quotes the key it was sent: the log file must not keep it, though the key was
    read from the store only when `authenticate` came, long after logging was set up."""
    proc = acp(fresh, tmp_path, TERM2_MODEL="openai/fake-model", TERM2_LOG_LEVEL="debug")
    try:
        proc.initialize(1)
        assert fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n").returncode == 0
        assert proc.result("authenticate", {"methodId": "api-key"}) == {}
        sid = proc.new_session(fresh.root)
        fresh.llm.push({"status": 400, "error_message": f"this request's key {KEY} is not allowed here"})
        assert "error" in prompt(proc, sid)
        assert fresh.llm.requests[-1].headers.get("authorization") == f"Bearer {KEY}"  # read from the store
        assert proc.close() == 0
    finally:
        proc.kill()
    logged = fresh.log_file.read_text()
    assert "is not allowed here" in logged and KEY not in logged
    assert KEY not in proc.stderr()
