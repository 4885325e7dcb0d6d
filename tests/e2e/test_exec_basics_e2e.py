"""Issue 31 end to end, `term2 exec`'s basics: `--json`'s result, `-o`, a closed pipe, what is kept, `--help`,
`term2 sessions` and `--resume last`. Each through the real process with a fresh HOME."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.support.fresh_home import Fresh, one_error_line, quiet

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
    assert quiet(stderr) == ""


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


# --- a tool the turn needed was refused ------------------------------------------------

SHELL = {"tool_calls": [{"name": "run_shell", "arguments": {"command": "echo hi > made.txt"}}]}
EDIT = {"tool_calls": [{"name": "write_file", "arguments": {"path": "README.md", "content": "gone\n"}}]}


@pytest.mark.parametrize(
    ("mode", "call", "why"),
    [([], SHELL, "refused without asking (no terminal to ask on)"), (["--mode", "read-only"], EDIT, None)],
    ids=["ask-without-a-terminal", "read-only"],
)
def test_a_turn_whose_tool_call_was_refused_exits_6(
    fresh: Fresh, mode: list[str], call: dict[str, object], why: str | None
) -> None:
    """The model's answer after the refusal is an ordinary end of turn; before issue 31's item, status 0."""
    fresh.llm.push(call, {"text": "I could not do it."})
    ran = fresh.term2("exec", *mode, "--json", "run the tests and fix them", env=fresh.keyed())
    assert ran.returncode == 6, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    assert (result["stopReason"], result["refusedToolCalls"], result["text"]) == ("end_turn", 1, "I could not do it.")
    assert not (fresh.root / "made.txt").exists() and (fresh.root / "README.md").read_text() == "# demo\n"
    assert "1 tool call was refused, so the work may be incomplete (exit status 6)" in ran.stderr
    if why is not None:
        assert why in ran.stderr
    plain = fresh.term2("exec", *mode, "say hi", env=fresh.keyed())  # no tool asked: still 0
    assert (plain.returncode, plain.stdout) == (0, "echo: say hi\n"), plain.stderr


def test_the_exit_statuses_are_in_exec_help(fresh: Fresh) -> None:
    ran = fresh.term2("exec", "--help", env=fresh.env(COLUMNS="200"))
    assert "6 the turn ended but a tool call it needed" in " ".join(ran.stdout.split())


# --- --max-turns ---------------------------------------------------------------------------

READ = {"tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}]}


def test_max_turns_stops_the_turn_after_n_model_requests_with_status_5(fresh: Fresh) -> None:
    """The model would go on reading for ever; `--max-turns 2` lets it ask twice, over the default of 50."""
    fresh.llm.push(READ, READ, READ, READ, {"text": "done"})
    ran = fresh.term2("exec", "--json", "--max-turns", "2", "read it again and again", env=fresh.keyed())
    assert ran.returncode == 5, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    assert (result["stopReason"], result["turns"]) == ("max_turn_requests", 2)
    assert len(fresh.llm.requests) == 2
    # over the configured limit too, and refused below 1 before anything runs
    wide = fresh.term2("exec", "--json", "--max-turns", "3", "go", env=fresh.keyed(TERM2_MAX_TURN_REQUESTS="1"))
    assert wide.returncode == 0, wide.stderr
    assert json.loads(wide.stdout.splitlines()[-1])["turns"] == 3
    zero = fresh.term2("exec", "--max-turns", "0", "go", env=fresh.keyed())
    assert zero.returncode == 2 and zero.stdout == ""
