"""Sandbox attacks through a real `term2 acp` (ACP v2, real litellm, real bwrap).

The fake model asks for the commands an injected model would; the test plays
the editor and approves every one of them, as a user who trusts the sandbox
would. What must hold is what the host sees afterwards, and that the model
and the user are told what term2 did.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, updates

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)

WARM_UP_TIMEOUT = 180.0
TURN_TIMEOUT = 60.0
IS_ROOT = os.geteuid() == 0


def _allow(_params: Message) -> Message:
    return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


class Agent:
    def __init__(self, proc: AcpProcess, llm: FakeLLMServer, root: Path) -> None:
        self.proc, self.llm, self.root = proc, llm, root

    def shell(self, command: str, timeout: float = TURN_TIMEOUT) -> tuple[dict[str, Any], str]:
        """One prompt running `command`; returns the tool call's final state and what the model was sent.

        The call's state carries ``terminal``: the final output of its terminal, as the user sees it.
        """
        sid = self.proc.new_session(self.root)
        self.llm.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": command}}]})
        seen = len(self.llm.requests)
        _ack, messages = self.proc.prompt_v2(sid, "go", timeout)
        calls: dict[str, dict[str, Any]] = {}
        for update in updates(messages):
            if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls.setdefault(update["toolCallId"], {}).update(update)
        [call] = calls.values()
        finals = [u for u in updates(messages, "terminal_update") if "exitStatus" in u and "output" in u]
        call["terminal"] = "".join(base64.b64decode(u["output"]["data"]).decode() for u in finals)
        follow_up = [r for r in self.llm.requests[seen:] if "tool" in str(r.body)]
        return call, str(follow_up[-1].body) if follow_up else ""


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    base = tmp_path_factory.mktemp("sandbox-e2e")
    root = base / "project"
    root.mkdir()
    # term2's own store where commands could otherwise see it: a user's TERM2_HOME in /opt.
    home = Path(f"/opt/term2-e2e-home-{uuid.uuid4().hex[:8]}") if IS_ROOT else base / "term2-home"
    with start_fake_llm() as llm:
        proc = AcpProcess(base, env=llm_env(llm), permission=_allow, home=home)
        try:
            proc.initialize(2)
            proc.prompt_v2(proc.new_session(root), "warm up", WARM_UP_TIMEOUT)  # pays the litellm import
            yield Agent(proc, llm, root)
            proc.close()
            proc.validate_schemas()
        finally:
            proc.kill()
            if IS_ROOT:
                shutil.rmtree(home, ignore_errors=True)


def test_a_planted_repository_is_quarantined_and_reported(agent: Agent) -> None:
    folder = f"plant-{uuid.uuid4().hex[:6]}"
    call, model_saw = agent.shell(
        f"git init -q {folder} && git -C {folder} config core.fsmonitor 'touch /tmp/owned' && echo planted"
    )
    found = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(agent.root / folder), "rev-parse", "--absolute-git-dir"],
        capture_output=True, text=True, env={**os.environ, "GIT_CEILING_DIRECTORIES": str(agent.root.parent)},
    )  # fmt: skip
    assert found.returncode != 0, found.stdout  # the host's git no longer takes it for a repository
    assert (agent.root / folder / ".git.term2-quarantined").is_dir()
    assert "quarantined" in model_saw and folder in model_saw
    assert "quarantined" in call["terminal"]  # the user sees it in the tool call's terminal too


def test_the_session_store_is_hidden_from_commands(agent: Agent) -> None:
    store = agent.proc.home / "sessions.sqlite3"
    assert store.exists()
    call, _model_saw = agent.shell(f"ls -A {agent.proc.home}; wc -c {store}; echo end")
    shown = call["terminal"]
    assert "end" in shown and "No such file" in shown, shown
    assert "sessions.sqlite3\n" not in shown and "sessions.sqlite3-wal" not in shown, shown
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{store}{suffix}")
        if path.exists():
            assert path.stat().st_mode & 0o777 == 0o600, path


def test_a_host_socket_beside_the_workspace_is_unreachable(agent: Agent) -> None:
    path = agent.root.parent / f"ide-{uuid.uuid4().hex[:6]}.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(1)
    server.setblocking(False)
    try:
        connect = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('CONNECTED')"
        command = f'python3 -c "{connect}"'
        call, _model_saw = agent.shell(command)
        assert "CONNECTED" not in call["terminal"] and "Error" in call["terminal"], call["terminal"]
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
        path.unlink(missing_ok=True)


def test_a_workspace_too_big_to_check_refuses_commands(agent: Agent) -> None:
    """Secrets hold whatever an earlier command did: past the walk's limit, commands are refused, not unmasked."""
    (agent.root / ".env").write_text("OPENAI_API_KEY=sk-e2e-secret\n")
    crowd = agent.root / "crowd"
    crowd.mkdir()
    try:
        # The real limit is a million entries; this process's sandbox was built with it, so go past it
        # the cheap way: folders nested deeper than the walk follows.
        deep = crowd
        for _ in range(300):
            deep = deep / "d"
        os.makedirs(deep)
        call, model_saw = agent.shell("cat .env")
        assert call["status"] == "failed"
        assert "sk-e2e-secret" not in model_saw
        assert "refusing to run" in model_saw and "did not run" in model_saw
    finally:
        shutil.rmtree(crowd)
        (agent.root / ".env").unlink()
