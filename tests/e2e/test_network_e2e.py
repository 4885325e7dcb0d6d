"""Network by approval through a real `term2 acp` (ACP v2), real bwrap and fake registries on 127.0.0.1.

The registries are reached the way an air-gapped site reaches its mirror: `[network.resolve]` in the
config sends `registry.test`, `pypi.test` and `evil.test` to local servers. The model names the hosts
it needs; the test plays the editor. What must hold: only approved names are reached, each refusal is
told to the model and the user, a rejected question runs nothing, and nothing outlives the command.
"""

from __future__ import annotations

import base64
import os
import re
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, updates
from tests.support.registries import GREETING, WHEEL, Registry, fake_registry

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)
if not os.path.exists("/usr/bin/curl"):
    pytest.skip("curl is not installed (scripts/setup installs it)", allow_module_level=True)

WARM_UP_TIMEOUT = 180.0
TURN_TIMEOUT = 60.0


class Editor:
    """Answers permission requests with the option the test chose; keeps every request."""

    def __init__(self) -> None:
        self.answer = "allow-once"

    def __call__(self, params: Message) -> Message:
        return {"outcome": {"outcome": "selected", "optionId": self.answer}}


@dataclass
class Run:
    call: dict[str, Any]
    terminal: str  # what the user's terminal shows at the end
    model_saw: str  # the tool result as the model got it
    asked: list[Message]  # the permission requests of this turn


@dataclass
class Agent:
    proc: AcpProcess
    llm: FakeLLMServer
    editor: Editor
    root: Path
    registry: Registry
    evil: Registry

    def run(
        self,
        command: str,
        network: list[str] | None = None,
        *,
        answer: str = "allow-once",
        sid: str = "",
        tool: str = "run_shell",
    ) -> Run:
        sid = sid or self.proc.new_session(self.root)
        self.editor.answer = answer
        arguments: dict[str, Any] = {"code" if tool == "run_code" else "command": command}
        if network is not None:
            arguments["network"] = network
        self.llm.push({"tool_calls": [{"name": tool, "arguments": arguments}]})
        seen, asked = len(self.llm.requests), len(self.proc.permission_requests)
        _ack, messages = self.proc.prompt_v2(sid, "go", TURN_TIMEOUT)
        calls: dict[str, dict[str, Any]] = {}
        for update in updates(messages):
            if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
                calls.setdefault(update["toolCallId"], {}).update(update)
        call = next(iter(calls.values()))  # the call itself; a program's nested calls come after it
        finals = [u for u in updates(messages, "terminal_update") if "exitStatus" in u and "output" in u]
        terminal = "".join(base64.b64decode(u["output"]["data"]).decode() for u in finals)
        follow_up = [r for r in self.llm.requests[seen:] if "tool" in str(r.body)]
        model_saw = str(follow_up[-1].body) if follow_up else ""
        return Run(call, terminal, model_saw, self.proc.permission_requests[asked:])


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    base = tmp_path_factory.mktemp("network-e2e")
    root = base / "project"
    root.mkdir()
    with fake_registry() as registry, fake_registry() as evil, start_fake_llm() as llm:
        config = base / "xdg-config" / "term2" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(
            "[network.resolve]\n"
            f'"registry.test:80" = "127.0.0.1:{registry.port}"\n'
            f'"pypi.test:80" = "127.0.0.1:{registry.port}"\n'
            f'"evil.test:80" = "127.0.0.1:{evil.port}"\n'
        )
        editor = Editor()
        proc = AcpProcess(base, env=llm_env(llm), permission=editor)
        try:
            proc.initialize(2)
            proc.prompt_v2(proc.new_session(root), "warm up", WARM_UP_TIMEOUT)  # pays the litellm import
            yield Agent(proc, llm, editor, root, registry, evil)
            proc.close()
            proc.validate_schemas()
        finally:
            proc.kill()


def test_the_question_names_the_command_the_folder_and_every_host_and_offers_allow_once_only(agent: Agent) -> None:
    sid = agent.proc.new_session(agent.root)
    # Commands allowed for the whole folder first: a command that asks for hosts is asked all the same.
    granted = agent.run("true", answer="allow-folder-session", sid=sid)
    assert granted.call["status"] == "completed" and len(granted.asked) == 1
    assert agent.run("true", sid=sid).asked == []  # the grant holds for commands without network
    run = agent.run("curl -sS http://registry.test/hello", ["registry.test", "*.pythonhosted.org:8443"], sid=sid)
    [request] = run.asked
    params = request["params"]
    assert "curl -sS http://registry.test/hello" in params["title"] and str(agent.root) in params["title"]
    assert "registry.test" in params["title"] and "*.pythonhosted.org:8443" in params["title"]
    assert [o["kind"] for o in params["options"]] == ["allow_once", "reject_once"]
    assert run.call["status"] == "completed", run.model_saw
    assert GREETING.decode().strip() in run.terminal
    again = agent.run("curl -sS http://registry.test/hello", ["registry.test"], sid=sid)
    assert len(again.asked) == 1  # allowed once is never remembered


def test_an_approved_curl_reaches_its_registry(agent: Agent) -> None:
    before = len(agent.registry.requests)
    run = agent.run("curl -sS --fail http://registry.test/hello && echo CURL-OK", ["registry.test"])
    assert run.call["status"] == "completed", run.model_saw
    assert "CURL-OK" in run.terminal and GREETING.decode().strip() in run.model_saw
    assert agent.registry.requests[before:] == [("registry.test", "/hello")]  # Host names what was approved


def test_pip_downloads_from_an_approved_index(agent: Agent) -> None:
    has_pip = subprocess.run(["/usr/bin/python3", "-m", "pip", "--version"], capture_output=True, check=False)
    if has_pip.returncode != 0:
        pytest.skip("the sandbox's python3 has no pip")
    folder = f"dl-{uuid.uuid4().hex[:6]}"
    run = agent.run(
        "python3 -m pip download --no-deps --disable-pip-version-check --no-cache-dir --trusted-host pypi.test "
        f"--index-url http://pypi.test/simple/ -d {folder} demo",
        ["pypi.test"],
    )
    assert run.call["status"] == "completed", run.model_saw
    assert (agent.root / folder / WHEEL).is_file()


def test_a_host_that_was_not_approved_is_refused_and_reported(agent: Agent) -> None:
    before = len(agent.evil.requests)
    run = agent.run("curl -sS --fail http://evil.test/steal; curl -sS --fail https://github.com/", ["registry.test"])
    assert agent.evil.requests[before:] == []  # mapped, but not approved: never reached
    for host in ("evil.test", "github.com"):
        line = f"blocked: {host} was not approved"
        assert line in run.model_saw and line in run.terminal, run.terminal


def test_a_rejected_question_runs_nothing(agent: Agent) -> None:
    marker = f"ran-{uuid.uuid4().hex[:6]}"
    before = len(agent.registry.requests)
    run = agent.run(f"touch {marker}; curl -sS http://registry.test/hello", ["registry.test"], answer="reject")
    assert run.call["status"] == "failed" and "rejected" in run.model_saw
    assert not (agent.root / marker).exists()
    assert agent.registry.requests[before:] == []


def test_loopback_is_reached_only_through_the_host_map(agent: Agent) -> None:
    port = agent.registry.port
    before = len(agent.registry.requests)
    run = agent.run(
        f"curl -sS --noproxy '' http://localhost:{port}/hello; curl -sS --noproxy '' http://127.0.0.1:{port}/hello;"
        " curl -sS http://registry.test/hello",
        [f"localhost:{port}", f"127.0.0.1:{port}", "registry.test"],
    )
    # Approved, but their own addresses are loopback: refused. The mapped name reaches the same server.
    assert "blocked: localhost resolves to" in run.model_saw, run.model_saw
    assert "blocked: 127.0.0.1 resolves to" in run.model_saw
    assert agent.registry.requests[before:] == [("registry.test", "/hello")]


def test_a_redirect_to_a_host_that_was_not_approved_is_refused(agent: Agent) -> None:
    before = len(agent.evil.requests)
    run = agent.run("curl -sS -L http://registry.test/redirect", ["registry.test"])
    assert agent.evil.requests[before:] == []
    assert "blocked: evil.test was not approved" in run.model_saw


def test_udp_and_dns_go_nowhere_with_network_on(agent: Agent) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    program = (
        "import socket\n"
        "for target in (('127.0.0.1', PORT), ('1.1.1.1', 53), ('8.8.8.8', 53)):\n"
        "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    try:\n"
        "        s.sendto(b'leak', target)\n"
        "    except OSError as exc:\n"
        "        print('udp', target, 'failed', exc.errno)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 443)\n"
        "    print('DNS-RESOLVED')\n"
        "except OSError:\n"
        "    print('dns failed')\n"
    ).replace("PORT", str(port))
    try:
        run = agent.run(f"python3 - <<'EOF'\n{program}EOF\ngetent hosts example.com || echo getent-failed",
                        ["example.com"])  # fmt: skip
        with pytest.raises(BlockingIOError):
            listener.recvfrom(64)  # nothing the sandbox sent reached the host's loopback
    finally:
        listener.close()
    assert "DNS-RESOLVED" not in run.terminal and "dns failed" in run.terminal, run.terminal
    assert "getent-failed" in run.terminal
    assert run.terminal.count("failed 101") == 2, run.terminal  # ENETUNREACH: no route out of the namespace


def _proxy_traces() -> list[str]:
    """Listening Unix sockets of term2's proxies on the host, and processes running the in-sandbox bridge."""
    with open("/proc/net/unix") as table:
        sockets = [line.split()[-1] for line in table if "term2-net-" in line]
    bridges = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    if b"/run/term2-network/http.sock" in cmdline.read():
                        bridges.append(entry)
            except OSError:
                pass
    return sockets + bridges + [name for name in os.listdir("/tmp") if name.startswith("term2-net-")]


def test_the_proxy_is_gone_after_the_command(agent: Agent) -> None:
    assert _proxy_traces() == []
    run = agent.run("curl -sS http://registry.test/hello; ls /run/term2-network", ["registry.test"])
    assert run.call["status"] == "completed", run.model_saw
    assert run.terminal.split("\x18")[0].split()[-2:] == ["http.sock", "socks.sock"]  # nothing else is bound in
    assert _proxy_traces() == []


def test_a_command_without_network_still_has_none(agent: Agent) -> None:
    before = len(agent.registry.requests)
    run = agent.run(
        "env | grep -ic proxy; ls /run/term2-network; curl -sS -m 5 http://registry.test/hello;"
        " curl -sS -m 5 -x http://127.0.0.1:3128 http://registry.test/hello; echo END"
    )
    assert run.asked and [o["kind"] for o in run.asked[0]["params"]["options"]][1] == "allow_always"
    assert re.search(r"^0$", run.terminal, re.MULTILINE), run.terminal  # no proxy variables at all
    assert "No such file" in run.terminal and "END" in run.terminal
    assert agent.registry.requests[before:] == []


def test_a_bad_network_argument_is_refused_before_asking(agent: Agent) -> None:
    run = agent.run("true", ["https://registry.test/simple"])
    assert run.asked == [] and run.call["status"] == "failed"
    assert "argument 'network'" in run.model_saw


def test_a_run_code_program_reaches_an_approved_host_and_still_calls_tools(agent: Agent) -> None:
    program = (
        "import urllib.request\n"
        "print(urllib.request.urlopen('http://registry.test/hello', timeout=10).read().decode().strip())\n"
        "try:\n"
        "    urllib.request.urlopen('http://evil.test/steal', timeout=10)\n"
        "except Exception as exc:\n"
        "    print('evil refused', exc)\n"
        "print('listed', 'README' in tools.list_dir(path='.') or 'ok')\n"
    )
    before = len(agent.evil.requests)
    run = agent.run(program, ["registry.test"], tool="run_code")
    [request] = run.asked
    assert "registry.test" in request["params"]["title"]
    assert [o["kind"] for o in request["params"]["options"]] == ["allow_once", "reject_once"]
    assert GREETING.decode().strip() in run.model_saw and "evil refused" in run.model_saw, run.model_saw
    assert "listed" in run.model_saw  # the bridge to term2's tools works beside the network bridge
    assert "blocked: evil.test was not approved" in run.model_saw
    assert agent.evil.requests[before:] == []
