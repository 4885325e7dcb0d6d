"""Issue 31 part 3, `term2 exec`'s progress on stderr while the model is slow, through the real process.

The fake model holds its answer until the test has seen the progress it
expects and releases it (`"hold"`), so nothing here depends on how fast the
machine is: the wait lasts exactly as long as the test needs.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time

import pytest

from tests.support.fresh_home import Fresh


def _start(fresh: Fresh, args: list[str], stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "term2", "exec", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=fresh.keyed(),
        cwd=fresh.root,
        start_new_session=True,  # no controlling terminal
    )


class _Collect:
    """Everything read from an fd, by a thread; `until` waits for a text to appear."""

    def __init__(self, fd: int) -> None:
        self.data = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the pty's last writer closed
                return
            if not chunk:
                return
            with self._lock:
                self.data += chunk

    def text(self) -> str:
        with self._lock:
            return self.data.decode("utf-8", "replace")

    def until(self, needle: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            assert proc.poll() is None, f"exited {proc.returncode} before {needle!r}: {self.text()}"
            assert time.monotonic() < deadline, f"{needle!r} never came: {self.text()}"
            select.select([], [], [], 0.05)

    def join(self) -> None:
        self._thread.join(10)


@pytest.mark.parametrize("as_json", [False, True], ids=["final-text", "json"])
def test_plain_progress_lines_on_a_piped_stderr_and_stdout_unchanged(fresh: Fresh, as_json: bool) -> None:
    fresh.llm.push({"hold": "slow", "text": "done at last"})
    args = ["--json", "go"] if as_json else ["go"]
    proc = _start(fresh, args, subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    errors = _Collect(proc.stderr.fileno())
    errors.until("term2: waiting for the model… ", proc)
    fresh.llm.release("slow")
    out = proc.stdout.read().decode()
    assert proc.wait(90) == 0, errors.text()
    errors.join()
    lines = errors.text().splitlines()
    assert lines and all(line.startswith("term2: waiting for the model… ") for line in lines), lines
    assert "\r" not in errors.text() and "\x1b" not in errors.text()  # plain lines for a log
    if as_json:
        parsed = [json.loads(line) for line in out.splitlines()]
        assert parsed[-1]["type"] == "result" and parsed[-1]["text"] == "done at last"
        assert all(p["type"] == "update" for p in parsed[:-1])
    else:
        assert out == "done at last\n"


def test_a_status_line_on_a_terminal_stderr_is_drawn_in_place_and_erased(fresh: Fresh) -> None:
    """stdout a pipe, stderr a terminal (`term2 exec … > answer.txt` at a shell): the line is redrawn with a
    carriage return and erased before anything else is written there; stdout is the answer alone."""
    master, slave = pty.openpty()
    fresh.llm.push({"hold": "slow", "text": "done at last"})
    proc = _start(fresh, ["go"], slave)
    os.close(slave)
    assert proc.stdout is not None
    errors = _Collect(master)
    try:
        errors.until("waiting for the model… ", proc)
        fresh.llm.release("slow")
        out = proc.stdout.read().decode()
        assert proc.wait(90) == 0, errors.text()
        errors.join()
    finally:
        os.close(master)
    drawn = errors.text()
    # only the line, redrawn over itself, and erased for good when the turn ended: nothing left on the row
    status = r"\r\x1b\[2Kterm2: waiting for the model… \d+ s( · [\d,]+ tokens)?"
    assert re.fullmatch(rf"({status}|\r\x1b\[2K)*{status}(\r\x1b\[2K)+", drawn), repr(drawn)
    assert out == "done at last\n"


@pytest.mark.parametrize("as_json", [False, True], ids=["final-text", "json"])
def test_each_retry_is_one_plain_line_on_stderr(fresh: Fresh, as_json: bool) -> None:
    """Two 503s, then the answer: two lines saying so, no JSON log line, stdout as without retries."""
    fresh.llm.push({"status": 503}, {"status": 503}, {"text": "done at last"})
    ran = fresh.term2("exec", *(["--json"] if as_json else []), "go", env=fresh.keyed())
    assert ran.returncode == 0, ran.stderr
    lines = ran.stderr.splitlines()
    assert len(lines) == 2, ran.stderr
    for attempt, line in zip((2, 3), lines, strict=True):
        assert re.fullmatch(rf"term2: Retrying in [\d.]+ s \({attempt}/6\): .+", line), line
    assert "{" not in ran.stderr
    if as_json:
        assert json.loads(ran.stdout.splitlines()[-1])["text"] == "done at last"
    else:
        assert ran.stdout == "done at last\n"


def test_a_model_silent_past_first_token_timeout_is_retried_with_one_line(fresh: Fresh) -> None:
    """The first request is held for ever (never released): `first_token_timeout` (1 s here) ends it, the
    retry is one line on stderr, and the second request answers. Before, only request_timeout (600 s) would."""
    fresh.llm.push({"hold": "never", "text": "lost"}, {"text": "done at last"})
    env = fresh.keyed(TERM2_FIRST_TOKEN_TIMEOUT="1", TERM2_REQUEST_TIMEOUT="600")
    ran = fresh.term2("exec", "go", env=env, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "done at last\n"
    (line,) = [line for line in ran.stderr.splitlines() if "Retrying" in line]
    assert re.fullmatch(r"term2: Retrying in [\d.]+ s \(2/6\): .*", line), line
    assert len(fresh.llm.requests) == 2


@pytest.mark.parametrize("variable", ["TERM2_FIRST_TOKEN_TIMEOUT", "TERM2_CONNECT_TIMEOUT"])
def test_the_timeouts_are_checked_at_start(fresh: Fresh, variable: str) -> None:
    ran = fresh.term2("exec", "go", env=fresh.keyed(**{variable: "0"}))
    assert ran.returncode == 2 and ran.stdout == ""
    assert variable.removeprefix("TERM2_").lower() + " must be a positive number of seconds" in ran.stderr


def test_the_terminal_display_says_how_long_the_model_has_been_awaited(fresh: Fresh) -> None:
    """stdout a terminal (the full display): the live area shows the wait, and the answer replaces it."""
    master, slave = pty.openpty()
    fresh.llm.push({"hold": "slow", "text": "done at last"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "term2", "exec", "go"],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**fresh.keyed(), "COLUMNS": "100", "LINES": "30"},
        cwd=fresh.root,
        start_new_session=True,
    )
    os.close(slave)
    screen = _Collect(master)
    try:
        screen.until("waiting for the model… ", proc)
        fresh.llm.release("slow")
        assert proc.wait(90) == 0, screen.text()
        screen.join()
    finally:
        os.close(master)
    drawn = screen.text()
    assert drawn.index("waiting for the model… ") < drawn.index("done at last"), repr(drawn)
