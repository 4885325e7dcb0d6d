"""acpx, the headless ACP command-line client (npm ``acpx``, pinned in
``conformance/package.json``), drives a real ``term2 acp`` backed by the fake LLM.

acpx launches a custom agent with ``--agent '<command line>'``; the command is
our relay (``tests/support/acp_tee.py``) wrapped around ``python -m term2 acp``,
so every line of every term2 process acpx starts is recorded and then checked
against the official ACP v1 JSON schema (acpx speaks v1).

What acpx does with term2 here:

* ``sessions new``: a short-lived term2 (initialize, session/new);
* ``prompt``: acpx's detached "queue owner" starts a second term2, reattaches
  with ``session/resume`` and prompts; later prompts, ``cancel`` and
  ``sessions close`` go through that same owner and agent process;
* ``--approve-all`` / ``--deny-all`` answer ``session/request_permission``
  with term2's allow-once / reject option;
* ``cancel``: ``session/cancel`` during a slow stream -> stopReason cancelled;
* ``sessions list``: another short-lived term2 answering ``session/list``;
* ``sessions close``: ``session/close`` on the live agent.

Version: acpx 0.15.1 is the newest release whose lock ``npm ci`` installs from
the registry (0.16+ depend on ``@openclaw/fs-safe`` 0.10/0.12, whose optional
per-platform packages exist there only for linux-x64, e.g. no
``@openclaw/fs-safe-darwin-arm64@0.12.0``: npm writes a lock without them and
``npm ci`` then rejects it as out of sync). Every acpx release declares
``engines.node >=22.13``; on Node 20 npm only warns (EBADENGINE) and
everything used here works.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer
from tests.support.schemas import NPM_HINT, REPO_ROOT, iter_transcript, validate_transcript

ACPX_VERSION = "0.15.1"
ACPX_BIN = REPO_ROOT / "conformance" / "node_modules" / ".bin" / "acpx"
TEE = REPO_ROOT / "tests" / "support" / "acp_tee.py"
LONG_TEXT = " ".join(f"word{i}" for i in range(300))


def require_acpx() -> Path:
    """The acpx executable; raise (never skip) when Node or the package is missing."""
    if shutil.which("node") is None:
        raise RuntimeError("`node` is required to run acpx")
    if not ACPX_BIN.exists():
        raise RuntimeError(f"acpx is not installed in conformance/node_modules: {NPM_HINT}")
    return ACPX_BIN


class Acpx:
    """Runs acpx commands against one workspace, with a private HOME (~/.acpx)."""

    def __init__(self, tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer) -> None:
        self.bin = require_acpx()
        self.tee_dir = tmp_path / "tee"
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.workspace = workspace
        agent = [sys.executable, str(TEE), "--transcript-dir", str(self.tee_dir), "--"]
        agent += [sys.executable, "-m", "term2", "acp"]
        self.agent = shlex.join(agent)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TERM2_", "ACPX"))}
        env.update(llm_env(fake_llm))
        env.update(
            {
                "HOME": str(self.home),
                "TERM2_HOME": str(tmp_path / "term2-home"),
                "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
                "PYTHONUNBUFFERED": "1",
                "NO_COLOR": "1",
            }
        )
        self.env = env
        self.log: list[str] = []

    def argv(self, *args: str) -> list[str]:
        # --ttl bounds the detached queue owner (and its term2) if a test dies midway.
        return [str(self.bin), "--agent", self.agent, "--cwd", str(self.workspace), "--ttl", "30", *args]

    def run(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        proc = subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.workspace,
            timeout=timeout,
            check=False,
        )
        self.log.append(
            f"$ acpx {' '.join(args)}  -> exit {proc.returncode} in {time.monotonic() - started:.1f}s\n"
            f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
        )
        assert proc.returncode == 0, self.explain()
        return proc

    def start(self, out: Path, *args: str) -> subprocess.Popen[bytes]:
        with out.open("wb") as sink:
            return subprocess.Popen(
                self.argv(*args), stdout=sink, stderr=subprocess.STDOUT, env=self.env, cwd=self.workspace
            )

    def explain(self) -> str:
        return "\n".join(self.log)[-8000:]

    # -- transcripts of the term2 processes acpx started -------------------
    def transcripts(self) -> list[Path]:
        return sorted(self.tee_dir.glob("*.jsonl")) if self.tee_dir.is_dir() else []

    def agent_lines(self) -> Iterator[dict[str, Any]]:
        for path in self.transcripts():
            for direction, line in iter_transcript(path):
                if direction == "agent":
                    yield json.loads(line)

    def client_methods(self) -> list[str]:
        return [
            json.loads(line).get("method", "")
            for path in self.transcripts()
            for direction, line in iter_transcript(path)
            if direction == "client"
        ]

    def wait_for_agent_line(self, needle: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in self.transcripts():
                if any(d == "agent" and needle in line for d, line in iter_transcript(path)):
                    return
            time.sleep(0.1)
        raise AssertionError(f"term2 never wrote {needle!r}\n{self.explain()}")

    def stop_leftovers(self) -> None:
        """SIGTERM the relays (hence term2) and acpx queue owners this test started, if any live on."""
        pids = [int(p.stem.rsplit("-", 1)[1]) for p in self.transcripts()]
        for lock in (self.home / ".acpx" / "queues").glob("*.lock"):
            try:
                pids.append(int(json.loads(lock.read_text())["pid"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        for pid in pids:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"acp_tee" in cmdline or b"acpx" in cmdline:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass


def prompt_result(stdout: str) -> tuple[str, str | None]:
    """(agent text, stopReason) from ``acpx --format json prompt`` output (NDJSON ACP messages)."""
    text, stop = "", None
    for raw in stdout.splitlines():
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        update = message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
        if update.get("sessionUpdate") == "agent_message_chunk" and update["content"].get("type") == "text":
            text += update["content"]["text"]
        result = message.get("result")
        if isinstance(result, dict) and "stopReason" in result:
            stop = result["stopReason"]
    return text, stop


@pytest.mark.timeout(240)
def test_acpx_drives_term2(tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()

    def write(name: str) -> dict[str, Any]:
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": str(outside / name), "content": name}}]}

    fake_llm.push(
        {"text": "Hello world"},
        write("allowed.txt"),
        {"text": "wrote it"},
        write("rejected.txt"),
        {"text": "could not write it"},
        {"text": LONG_TEXT, "chunk_delay": 0.1},
    )
    acpx = Acpx(tmp_path, workspace, fake_llm)
    assert acpx.run("--version").stdout.strip() == ACPX_VERSION
    try:
        # A session in the workspace: a term2 of its own answers session/new.
        session_id = acpx.run("sessions", "new").stdout.strip().splitlines()[-1]
        assert session_id.startswith("sess_"), acpx.explain()

        # Streamed text. acpx's queue owner starts term2 and reattaches with session/resume.
        text, stop = prompt_result(acpx.run("--format", "json", "prompt", "say hello").stdout)
        assert (text, stop) == ("Hello world", "end_turn"), acpx.explain()

        # Permission: --approve-all picks allow-once, --deny-all picks reject.
        out = acpx.run("--approve-all", "--format", "json", "prompt", "write outside (allowed)").stdout
        assert prompt_result(out) == ("wrote it", "end_turn"), acpx.explain()
        assert (outside / "allowed.txt").read_text() == "allowed.txt"
        out = acpx.run("--deny-all", "--format", "json", "prompt", "write outside (rejected)").stdout
        assert prompt_result(out) == ("could not write it", "end_turn"), acpx.explain()
        assert not (outside / "rejected.txt").exists()

        # Cancel a slow stream from a second acpx process.
        long_out = tmp_path / "long.out"
        background = acpx.start(long_out, "--format", "json", "prompt", "a long answer")
        try:
            acpx.wait_for_agent_line("word1")
            acpx.run("cancel")
            assert background.wait(timeout=60) == 0, long_out.read_text()[-3000:]
        finally:
            if background.poll() is None:
                background.kill()
        text, stop = prompt_result(long_out.read_text())
        assert stop == "cancelled", long_out.read_text()[-3000:]
        assert text.startswith("word0 word1") and len(text) < len(LONG_TEXT)

        # session/list, answered by another short-lived term2.
        listing = json.loads(acpx.run("--format", "json", "sessions", "list").stdout.strip().splitlines()[-1])
        mine = [s for s in listing["sessions"] if s["sessionId"] == session_id]
        assert mine and mine[0]["cwd"] == str(workspace), listing

        # session/close on the live agent.
        assert session_id in acpx.run("sessions", "close").stdout
    finally:
        acpx.stop_leftovers()

    # Everything acpx asked of term2 and how term2 answered.
    methods = acpx.client_methods()
    for method in ("initialize", "session/new", "session/resume", "session/prompt", "session/cancel"):
        assert method in methods, (method, methods)
    assert "session/list" in methods and "session/close" in methods, methods
    permission_requests = [m for m in acpx.agent_lines() if m.get("method") == "session/request_permission"]
    assert len(permission_requests) == 2
    failed = [
        m["params"]["update"]
        for m in acpx.agent_lines()
        if m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "tool_call_update"
        and m["params"]["update"].get("status") == "failed"
    ]
    assert len(failed) == 1, failed

    # Every line term2 wrote, per process (one ACP connection each), against the v1 schema.
    transcripts = acpx.transcripts()
    assert len(transcripts) >= 3, transcripts
    validated = 0
    for path in transcripts:
        recorder = validate_transcript(1, path)
        assert recorder.pending == {}, (path.name, recorder.pending)
        validated += recorder.validated
    assert validated > 20
