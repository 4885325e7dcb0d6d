"""Issue 31 end to end, a first run: the README's commands, the default model, and one clear line (the right
exit status, no stored session) for no key, a missing URL or config, a wrong key, a server that is down or
never answers; then `term2 doctor`. Each through the real process with a fresh HOME.

The fake model server answers as the provider does (a real 401 body for a wrong key); a server that is down
is a port nobody listens on, and one that never answers is a socket that accepts and stays silent.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.exec_process import PtyExec
from tests.support.fresh_home import Fresh, free_port, one_error_line, quiet

# --- a first run ---------------------------------------------------------------------


def test_the_readme_first_screen_with_only_the_openai_key_answers(fresh: Fresh) -> None:
    """`export OPENAI_API_KEY=…` then `term2 exec "explain this repository"`: the default model answers."""
    ran = fresh.term2("exec", "explain this repository", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "echo: explain this repository\n"
    assert fresh.llm.requests[0].body["model"] == "gpt-5"  # the documented default for OPENAI_API_KEY
    assert quiet(ran.stderr) == ""


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
