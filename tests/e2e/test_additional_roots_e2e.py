"""Issue 29 part 4 end to end: a multi-root workspace is one session (ACP v1 `additionalDirectories`, ADR 0051).

A real `term2 acp` over stdio with real bwrap, the fake model asking for the tool calls, this test playing
the editor: it answers every question with allow-once and counts them. Every line term2 writes is
validated against the v1 schema.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer
from tests.support.acp_process import AcpProcess, Message
from tests.support.fresh_home import Fresh
from tests.support.sdk_clients import run_scenario

AGENT = [sys.executable, "-m", "term2", "acp"]

TURN_TIMEOUT = 180.0  # the first prompt of a process imports litellm


class Questions:
    """The editor's answers: allow once, each question kept."""

    def __init__(self) -> None:
        self.asked: list[Message] = []

    def __call__(self, params: Message) -> Message:
        self.asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


def _prompt(client: AcpProcess, llm: FakeLLMServer, sid: str, *calls: dict[str, Any]) -> Message:
    llm.push({"tool_calls": list(calls)})
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
    return client.call("session/prompt", prompt, TURN_TIMEOUT)


def _tool_results(llm: FakeLLMServer) -> list[str]:
    body = llm.requests[-1].body
    return [json.dumps(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.timeout(600)
def test_a_second_root_is_read_edited_and_written_by_commands_as_the_first(
    tmp_path: Path, fake_llm: FakeLLMServer
) -> None:
    app, lib = tmp_path / "app", tmp_path / "lib"
    app.mkdir()
    lib.mkdir()
    (lib / "lib.py").write_text("x = 1\n")
    (lib / ".env").write_text("TOKEN=hunter2\n")
    (tmp_path / "between.txt").write_text("between the roots\n")
    subprocess.run(["git", "init", "-q", str(lib)], check=True)  # the second root's own repository
    (lib / "AGENTS.md").write_text("Lib rule: tabs only.\n")
    questions = Questions()
    client = AcpProcess(tmp_path, env=llm_env(fake_llm), permission=questions)
    try:
        init = client.initialize(1)
        assert init["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
        params = {"cwd": str(app), "mcpServers": [], "additionalDirectories": [str(lib)]}
        sid = client.result("session/new", params)["sessionId"]

        # Read and edit in the second root: nobody is asked.
        read = {"name": "read_file", "arguments": {"path": str(lib / "lib.py")}}
        edit = {
            "name": "edit_file",
            "arguments": {"path": str(lib / "lib.py"), "old_string": "x = 1", "new_string": "x = 2"},
        }
        grep = {"name": "grep", "arguments": {"pattern": "x = ", "path": str(lib)}}
        assert _prompt(client, fake_llm, sid, read, edit, grep)["result"]["stopReason"] == "end_turn"
        assert questions.asked == [] and (lib / "lib.py").read_text() == "x = 2\n"
        assert f"{lib}/lib.py:1:x = 2" in _tool_results(fake_llm)[-1]  # the search view of the second root
        system = fake_llm.requests[-1].body["messages"][0]["content"]
        assert f"Additional workspace roots: {lib}." in json.dumps(system)
        assert f'path=\\"{lib}/AGENTS.md\\"' in json.dumps(system) and "Lib rule: tabs only." in json.dumps(system)

        # A command in the second root writes there, and its `.env` is masked (commands ask, as in the first).
        command = "echo made > made.txt; cat .env; echo read=$?"
        shell = {"name": "run_shell", "arguments": {"command": command, "cwd": str(lib)}}
        _prompt(client, fake_llm, sid, shell)
        assert len(questions.asked) == 1 and (lib / "made.txt").read_text() == "made\n"
        (result,) = _tool_results(fake_llm)[-1:]
        assert "hunter2" not in result and "read=1" in result, result

        # The same command from the first root writes the second too: every root is bound in every command.
        both = {"name": "run_shell", "arguments": {"command": f"echo both > {lib}/both.txt && echo ok"}}
        _prompt(client, fake_llm, sid, both)
        assert (lib / "both.txt").read_text() == "both\n"

        # A path between the roots is outside both: asked.
        before = len(questions.asked)
        between = {"name": "read_file", "arguments": {"path": str(tmp_path / "between.txt")}}
        _prompt(client, fake_llm, sid, between)
        assert len(questions.asked) == before + 1
        assert "between.txt" in questions.asked[-1]["toolCall"]["title"]

        listed = client.result("session/list", {})["sessions"]
        assert [s.get("additionalDirectories") for s in listed if s["sessionId"] == sid] == [[str(lib)]]
        client.close()
        client.validate_schemas()
    finally:
        client.kill()

    # A new process: the roots are listed, and a load that names them makes the second root a root again.
    questions = Questions()
    again = AcpProcess(tmp_path, env=llm_env(fake_llm), permission=questions)
    try:
        again.initialize(1)
        listed = again.result("session/list", {"cwd": str(app)})["sessions"]
        assert listed[0]["sessionId"] == sid and listed[0]["additionalDirectories"] == [str(lib)]
        again.result(
            "session/load", {"sessionId": sid, "cwd": str(app), "mcpServers": [], "additionalDirectories": [str(lib)]}
        )
        edit = {
            "name": "edit_file",
            "arguments": {"path": str(lib / "lib.py"), "old_string": "x = 2", "new_string": "x = 3"},
        }
        _prompt(again, fake_llm, sid, edit)
        assert questions.asked == [] and (lib / "lib.py").read_text() == "x = 3\n"

        # A load that names none (ACP: none active) makes it a folder outside the workspace again.
        again.result("session/load", {"sessionId": sid, "cwd": str(app), "mcpServers": []})
        _prompt(again, fake_llm, sid, {"name": "read_file", "arguments": {"path": str(lib / "lib.py")}})
        assert len(questions.asked) == 1
        assert "additionalDirectories" not in again.result("session/list", {})["sessions"][0]
        again.close()
        again.validate_schemas()
    finally:
        again.kill()


def test_v1_refuses_a_bad_directory_and_v2_refuses_them_all(tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    app = tmp_path / "app"
    (app / "inner").mkdir(parents=True)
    v1 = AcpProcess(tmp_path, env=llm_env(fake_llm))
    v2 = AcpProcess(tmp_path, env=llm_env(fake_llm))
    try:
        v1.initialize(1)
        for directories, message in (
            ([str(app / "inner")], "is inside"),
            (["relative"], "must be an absolute path"),
            (["/"], "cannot be a workspace"),
            ([str(tmp_path / "missing")], "does not exist"),
        ):
            error = v1.call("session/new", {"cwd": str(app), "mcpServers": [], "additionalDirectories": directories})
            assert error["error"]["code"] == -32602 and message in error["error"]["message"], error
        assert v1.result("session/list", {})["sessions"] == []  # nothing was made

        init = v2.initialize(2)
        assert init["capabilities"] == {"session": {}}  # v2 advertises nothing new
        error = v2.call("session/new", {"cwd": str(app), "additionalDirectories": [str(tmp_path / "app" / "inner")]})
        assert error["error"]["code"] == -32602 and "additionalDirectories" in error["error"]["message"]
        v1.close()
        v2.close()
        v1.validate_schemas()
        v2.validate_schemas()
    finally:
        v1.kill()
        v2.kill()


@pytest.mark.timeout(480)
@pytest.mark.parametrize("sdk", ["1.4.0", "2.4.0"])
def test_the_official_sdk_clients_open_a_multi_root_session(sdk: str, tmp_path: Path, fake_llm: FakeLLMServer) -> None:
    """The official v1 clients send `additionalDirectories` on new and load, and validate what comes back;
    the client rejects every question, so the edit in the second root lands only because none is asked."""
    app, lib = tmp_path / "app", tmp_path / "lib"
    app.mkdir()
    lib.mkdir()
    (lib / "lib.py").write_text("x = 1\n")
    edit = {
        "name": "edit_file",
        "arguments": {"path": str(lib / "lib.py"), "old_string": "x = 1", "new_string": "x = 2"},
    }
    fake_llm.push({"tool_calls": [edit]}, {"text": "Edited."})
    steps: list[Any] = [
        "initialize",
        {"op": "new", "additionalDirectories": [str(lib)]},
        {"op": "prompt", "text": "edit lib"},
        {"op": "list"},
        {"op": "load", "additionalDirectories": [str(lib)]},
    ]
    workdir = tmp_path / "scenario"
    workdir.mkdir()
    env = {
        **os.environ,
        **llm_env(fake_llm),
        "TERM2_HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
    }
    config = {
        "cwd": str(app),
        "steps": steps,
        "permissions": [],
        "permissionDefault": "reject_once",
        "timeoutMs": 60000,
    }
    result = run_scenario(1, AGENT, config, workdir, env=env, timeout=220, sdk=sdk)
    assert result.returncode == 0 and result.summary["ok"], result.explain()
    result.validate_transcript()
    initialize = result.summary["initialize"]
    assert initialize["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
    assert result.summary["permissionRequests"] == [] and (lib / "lib.py").read_text() == "x = 2\n"
    (listed,) = next(s for s in result.summary["steps"] if s["index"] == 3)["sessions"]
    assert listed["additionalDirectories"] == [str(lib)]


@pytest.mark.timeout(300)
def test_exec_add_dir_opens_more_roots_and_a_resumed_session_keeps_them(tmp_path: Path, fresh: Fresh) -> None:
    """`term2 exec --add-dir`: no terminal, so every question is refused; the writes land because none is asked."""
    lib = tmp_path / "lib"
    lib.mkdir()

    def write(name: str) -> None:
        call = {"name": "write_file", "arguments": {"path": str(lib / name), "content": name + "\n"}}
        fresh.llm.push({"tool_calls": [call]}, {"text": "Written."})

    write("first.txt")
    ran = fresh.term2("exec", "--add-dir", str(lib), "write in lib", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    assert (lib / "first.txt").read_text() == "first.txt\n"
    write("second.txt")
    ran = fresh.term2("exec", "--resume", "last", "again", env=fresh.keyed())  # the session's own roots
    assert ran.returncode == 0, ran.stderr
    assert (lib / "second.txt").read_text() == "second.txt\n"
    write("third.txt")
    ran = fresh.term2("exec", "write in lib", env=fresh.keyed())  # a new session without it: refused
    assert ran.returncode == 6 and not (lib / "third.txt").exists(), ran.stderr
    ran = fresh.term2("exec", "--add-dir", "/", "anything", env=fresh.keyed())
    assert ran.returncode == 2 and "additionalDirectories[0] / cannot be a workspace" in ran.stderr, ran.stderr
    assert ran.stdout == ""
