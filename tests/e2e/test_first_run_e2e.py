"""Issue 31 end to end: a first run, `term2 exec`'s basics, the log file and `term2 doctor`, each through the
real process with a fresh HOME (no TERM2_HOME, no config: the defaults a new user gets).

The fake model server answers as the provider does (a real 401 body for a wrong key); a server that is down
is a port nobody listens on, and one that never answers is a socket that accepts and stays silent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_mcp_e2e import fake_server, recorded
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, allow_kind
from tests.support.exec_process import PtyExec
from tests.support.schemas import check_definition

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")


@dataclass
class Fresh:
    """A new user's machine: HOME and nothing else of term2's."""

    home: Path
    root: Path
    llm: FakeLLMServer

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TERM2_", "XDG_", "OPENAI_", "ANTHROPIC_", "HOSTED_VLLM_")) and k not in KEYS
        }
        # Empty counts as unset: the XDG defaults under HOME, even where a helper copies os.environ first.
        env.update(HOME=str(self.home), PYTHONUNBUFFERED="1", XDG_STATE_HOME="", XDG_CONFIG_HOME="", XDG_DATA_HOME="")
        env.update(extra)
        return env

    def keyed(self, **extra: str) -> dict[str, str]:
        """The README's one key, with the OpenAI base URL pointed at the fake server."""
        keys = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": self.llm.base_url + "/v1", **extra}
        return self.env(**keys)

    def term2(
        self, *args: str, env: dict[str, str], stdin: str = "", timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "term2", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )

    @property
    def log_file(self) -> Path:
        return self.home / ".local" / "state" / "term2" / "term2.log"

    def stored_sessions(self) -> int:
        db = self.home / ".local" / "share" / "term2" / "sessions.sqlite3"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as conn:
            return int(conn.execute("select count(*) from sessions").fetchone()[0])


def free_port() -> int:
    """A port nobody listens on: bound, then released (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Fresh]:
    home, root = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    with start_fake_llm() as llm:
        yield Fresh(home, root, llm)


def one_error_line(stderr: str, needle: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert stderr.count(needle) == 1, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


# --- a first run ---------------------------------------------------------------------


def test_the_readme_first_screen_with_only_the_openai_key_answers(fresh: Fresh) -> None:
    """`export OPENAI_API_KEY=…` then `term2 exec "explain this repository"`: the default model answers."""
    ran = fresh.term2("exec", "explain this repository", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "echo: explain this repository\n"
    assert fresh.llm.requests[0].body["model"] == "gpt-5"  # the documented default for OPENAI_API_KEY
    assert ran.stderr == ""


REPO = Path(__file__).resolve().parents[2]


def readme_first_screen() -> list[str]:
    """The README's first `sh` block, the commands a new user copies."""
    text = (REPO / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_first_screen_commands_as_written(fresh: Fresh) -> None:
    """Both commands run as the README writes them (`.venv/bin/term2` being this checkout's), by a shell, with
    only the key its `export` line names: `exec` answers, and `acp` serves an editor's first prompt."""
    lines = readme_first_screen()
    exported = [line for line in lines if line.startswith("export ")]
    assert [line.split("=", 1)[0] for line in exported] == ["export OPENAI_API_KEY"]
    (exec_line,) = [line for line in lines if " exec " in line]
    (acp_line,) = [line for line in lines if line.endswith(" acp")]
    assert exec_line == '.venv/bin/term2 exec "explain this repository"'
    env = fresh.keyed()
    shell_line = exec_line.replace(".venv/bin/term2", str(REPO / ".venv" / "bin" / "term2"))
    ran = subprocess.run(["sh", "-c", shell_line], capture_output=True, text=True, env=env, cwd=fresh.root, timeout=90)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "echo: explain this repository\n", "")

    acp = subprocess.Popen(
        ["sh", "-c", acp_line.replace(".venv/bin/term2", str(REPO / ".venv" / "bin" / "term2"))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=fresh.root,
    )
    assert acp.stdin is not None and acp.stdout is not None and acp.stderr is not None

    def ask(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert acp.stdin is not None and acp.stdout is not None
        acp.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        acp.stdin.write(b"\n")
        acp.stdin.flush()
        while True:
            message = json.loads(acp.stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return message["result"]  # type: ignore[no-any-return]

    try:
        ask(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        sid = ask(2, "session/new", {"cwd": str(fresh.root), "mcpServers": []})["sessionId"]
        answer = ask(3, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]})
        assert answer["stopReason"] == "end_turn"
        acp.stdin.close()
        assert acp.wait(30) == 0
        assert acp.stderr.read() == b""
    finally:
        if acp.poll() is None:
            acp.kill()
            acp.wait()
    assert [r.body["model"] for r in fresh.llm.requests] == ["gpt-5", "gpt-5"]  # the key's default, both ways


def test_no_key_is_one_plain_line_naming_the_variable_exit_2_and_no_session(fresh: Fresh) -> None:
    ran = fresh.term2("exec", "explain this repository", env=fresh.env())
    assert ran.returncode == 2, ran.stderr
    assert ran.stdout == ""
    one_error_line(ran.stderr, "set OPENAI_API_KEY")
    assert "<" not in ran.stderr and "`--model`" not in ran.stderr  # plain text, nothing for Markdown to eat
    assert fresh.stored_sessions() == 0
    assert not fresh.llm.requests


def test_a_self_hosted_model_without_its_url_and_a_missing_config_are_named(fresh: Fresh) -> None:
    ran = fresh.term2("exec", "-m", "hosted_vllm/x", "hi", env=fresh.env())
    assert ran.returncode == 2
    one_error_line(ran.stderr, "set HOSTED_VLLM_API_BASE")
    missing = fresh.home / "nope.toml"
    ran = fresh.term2("exec", "hi", env=fresh.keyed(TERM2_CONFIG=str(missing)))
    assert ran.returncode == 2
    one_error_line(ran.stderr, f"TERM2_CONFIG names {missing}, which does not exist")
    config = fresh.home / "config.toml"
    config.write_text('[providers.corp]\nwire = "anthropic"\n')
    ran = fresh.term2("exec", "-m", "corp/x", "hi", env=fresh.keyed(TERM2_CONFIG=str(config)))
    assert ran.returncode == 2
    one_error_line(ran.stderr, f"{config}: providers.corp.wire = 'anthropic' needs an endpoint")
    assert fresh.stored_sessions() == 0


def test_a_wrong_key_is_said_once(fresh: Fresh) -> None:
    fresh.llm.configure(require_key="sk-right")
    wrong = "sk-test-wrong-0123456789"
    ran = fresh.term2("exec", "hi", env=fresh.keyed(OPENAI_API_KEY=wrong))
    assert ran.returncode == 1
    assert ran.stdout == ""
    one_error_line(ran.stderr, "Incorrect API key provided")
    logged = fresh.log_file.read_text()
    assert "Incorrect API key provided: sk-" in logged and wrong not in logged  # the body, masked as OpenAI does
    assert fresh.stored_sessions() == 0  # no model answered: nothing worth keeping
    ran = fresh.term2("exec", "--json", "hi", env=fresh.keyed())
    result = json.loads(ran.stdout.splitlines()[-1])
    assert (ran.returncode, result["stopReason"], result["sessionId"]) == (1, "error", None)
    assert fresh.stored_sessions() == 0


def test_an_error_on_a_terminal_is_plain_text_not_markdown(fresh: Fresh) -> None:
    """Issue 31: `<provider>/<model>` in an error vanished, drawn as Markdown (taken for HTML); it is drawn as
    written, once the turn has ended, as term2's own error line."""
    fresh.llm.push({"status": 400, "error_message": "use --model <provider>/<model> or **nothing**"})
    proc = PtyExec(["hi"], fresh.keyed(), fresh.root)
    try:
        assert proc.wait() == 1
        screen = proc.text()
    finally:
        proc.kill()
    said = "error: openai/gpt-5 rejected the request (HTTP 400): use --model <provider>/<model> or **nothing**"
    assert said in screen


def test_a_server_that_is_down_is_said_once_without_retry_noise(fresh: Fresh) -> None:
    port = free_port()
    env = fresh.env(
        OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", TERM2_RETRY_MAX_ATTEMPTS="1"
    )
    ran = fresh.term2("exec", "hi", env=env)
    assert ran.returncode == 1
    one_error_line(ran.stderr, f"127.0.0.1:{port}")
    assert fresh.stored_sessions() == 0


def test_a_server_that_never_answers_is_bounded_by_the_configured_timeout(fresh: Fresh) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        env = fresh.env(
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            TERM2_REQUEST_TIMEOUT="1",
            TERM2_RETRY_MAX_ATTEMPTS="1",
        )
        ran = fresh.term2("exec", "hi", env=env)
    assert ran.returncode == 1
    one_error_line(ran.stderr, f"127.0.0.1:{port}")
    assert fresh.stored_sessions() == 0


# --- exec's basics ---------------------------------------------------------------------


def test_json_last_line_carries_answer_session_duration_turns_and_usage(fresh: Fresh) -> None:
    ran = fresh.term2("exec", "--json", "hello there", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    last = json.loads(ran.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["stopReason"] == "end_turn"
    assert last["text"] == "echo: hello there"
    assert last["sessionId"].startswith("sess_")
    assert isinstance(last["durationMs"], int) and last["durationMs"] >= 0
    assert last["turns"] == 1
    assert last["usage"]["inputTokens"] > 0 and last["usage"]["outputTokens"] > 0


def test_output_last_message_writes_the_answer_to_a_file(fresh: Fresh) -> None:
    answer = fresh.home / "answer.md"
    ran = fresh.term2("exec", "-o", str(answer), "--json", "say it", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    assert answer.read_text() == "echo: say it\n"
    assert json.loads(ran.stdout.splitlines()[-1])["text"] == "echo: say it"


def test_a_closed_pipe_ends_quietly(fresh: Fresh) -> None:
    """`term2 exec --json … | head -1`: far more than a pipe holds comes after the first line, so term2 is
    certain to write once head has gone, whatever the timing."""
    fresh.llm.push({"text": "x" * 400_000, "chunks": 4000})
    term2 = subprocess.Popen(
        [sys.executable, "-m", "term2", "exec", "--json", "go"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=fresh.keyed(),
        cwd=fresh.root,
        start_new_session=True,
    )
    assert term2.stdout is not None and term2.stderr is not None
    head = subprocess.run(["head", "-1"], stdin=term2.stdout, capture_output=True, check=True, timeout=90)
    term2.stdout.close()
    status = term2.wait(90)
    stderr = term2.stderr.read().decode()
    assert json.loads(head.stdout)["type"] == "update"
    assert status == 141, stderr
    assert stderr == ""


def test_a_turn_that_failed_after_the_model_answered_keeps_its_session(fresh: Fresh) -> None:
    """Only a turn no model answered is not kept: one that failed half-way holds work worth resuming."""
    fresh.llm.push({"text": "a b c d e", "error_after": 2})
    ran = fresh.term2("exec", "--json", "go", env=fresh.keyed(TERM2_RETRY_MAX_ATTEMPTS="1"))
    result = json.loads(ran.stdout.splitlines()[-1])
    assert (ran.returncode, result["stopReason"]) == (1, "error")
    assert result["sessionId"].startswith("sess_") and fresh.stored_sessions() == 1


def test_a_resumed_session_whose_model_has_no_key_is_refused_before_its_turn(fresh: Fresh) -> None:
    """The launcher's key is checked at start; a session made with another provider's model names its own."""
    both = fresh.keyed(ANTHROPIC_API_KEY="sk-ant-test", ANTHROPIC_BASE_URL=fresh.llm.base_url)
    made = fresh.term2("exec", "--json", "-m", "anthropic/claude-sonnet-4-5", "first", env=both)
    assert made.returncode == 0, made.stderr
    asked = len(fresh.llm.requests)
    # Only the OpenAI key now; any request to Anthropic's own endpoint would meet a dead proxy.
    again = fresh.term2("exec", "--resume", "last", "again", env=fresh.keyed(HTTPS_PROXY="http://127.0.0.1:9"))
    assert again.returncode == 2
    one_error_line(again.stderr, "anthropic/claude-sonnet-4-5 needs an API key: set ANTHROPIC_API_KEY")
    assert len(fresh.llm.requests) == asked


def test_exec_help_has_examples_the_short_flags_and_the_variables(fresh: Fresh) -> None:
    ran = fresh.term2("exec", "--help", env=fresh.env(COLUMNS="120"))
    assert ran.returncode == 0
    lines = [line.strip() for line in ran.stdout.splitlines()]
    assert 'term2 exec "explain this repository"' in lines and "term2 sessions" in lines  # examples, one a line
    for needle in ("Environment:", "OPENAI_API_KEY", "TERM2_LOG_LEVEL", "XDG_STATE_HOME", "-m", "-C", "-o", "141"):
        assert needle in ran.stdout, needle


def test_sessions_lists_them_and_resume_last_continues_the_newest(fresh: Fresh) -> None:
    first = fresh.term2("exec", "--json", "-C", str(fresh.root), "first line of it\nand more", env=fresh.keyed())
    session_id = json.loads(first.stdout.splitlines()[-1])["sessionId"]
    again = fresh.term2("exec", "--json", "--resume", "last", "and again", env=fresh.keyed())
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1])["sessionId"] == session_id
    listed = fresh.term2("sessions", env=fresh.keyed())
    assert listed.returncode == 0, listed.stderr
    (row,) = listed.stdout.splitlines()
    assert re.fullmatch(
        rf"{session_id}  \d{{4}}-\d\d-\d\d \d\d:\d\d  {re.escape(str(fresh.root))}  first line of it and more", row
    )


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
        import pty
        import threading

        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "term2", "acp"], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        self.output = b""
        self._lock = threading.Lock()
        self._status = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


# --- doctor --------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="doctor's sandbox check needs bubblewrap")
def test_doctor_checks_a_first_run_end_to_end(fresh: Fresh) -> None:
    ran = fresh.term2("doctor", env=fresh.keyed())
    assert ran.returncode == 0, ran.stdout + ran.stderr
    said = ran.stdout
    assert "model: ok: openai/gpt-5 (the default for the key found)" in said
    assert "key: ok: OPENAI_API_KEY is set" in said
    assert re.search(
        r"endpoint: ok: 127\.0\.0\.1 answered \(one request: ~16 tokens in, at most 16 out, at most \$0\.\d+\)", said
    )
    assert f"log file: ok: {fresh.log_file}" in said
    assert len(fresh.llm.requests) == 1

    offline = fresh.term2("doctor", "--offline", env=fresh.keyed())
    assert offline.returncode == 0 and "endpoint: ok: 127.0.0.1: not asked (--offline)" in offline.stdout
    assert len(fresh.llm.requests) == 1

    fresh.llm.configure(require_key="sk-right")
    wrong = fresh.term2("doctor", env=fresh.keyed())
    assert wrong.returncode == 1
    assert "endpoint: FAILED: 127.0.0.1:" in wrong.stdout and "(fix: the provider refused the key" in wrong.stdout

    none = fresh.term2("doctor", "--offline", env=fresh.env())
    assert none.returncode == 1
    assert "model: FAILED: none configured and no key found (fix: set one of OPENAI_API_KEY" in none.stdout
    assert "sandbox (bubblewrap): ok" in none.stdout  # the other checks are still made

    unwritable = fresh.term2("doctor", "--offline", env=fresh.keyed(XDG_STATE_HOME=str(fresh.root / "README.md")))
    assert unwritable.returncode == 1
    assert f"log file: FAILED: {fresh.root}/README.md/term2/term2.log (fix: make " in unwritable.stdout
