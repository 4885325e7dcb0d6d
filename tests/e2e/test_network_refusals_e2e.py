"""A host the proxy refused is shown to the user, escaped, in what each kind of client draws (issue 30, item 12).

Three real `term2 acp` processes: v2, v1 as Zed initializes (display terminals in `_meta`) and a plain
v1 client. In each, a command approved for one host asks for another, once through the HTTP proxy
and once through SOCKS with a name holding an escape sequence and a line break (a command chooses
the name; the user's terminal must not act on it, nor show a line the command forged). The line
naming the refused host must be in the tool call's content the client receives, as the model gets it.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e.test_tools_e2e import WARM_UP_TIMEOUT, Agent, Answers, select, shell_call
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, Message, updates

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)
if not os.path.exists("/usr/bin/curl"):
    pytest.skip("curl is not installed (scripts/setup installs it)", allow_module_level=True)

ZED = {"_meta": {"terminal_output": True, "terminal-auth": True}, "terminal": True}
REFUSED = "blocked: refused.invalid was not approved"
# What the command asks SOCKS for, and how the refusal must name it: every control written out.
FORGED = b"x\x1b]0;owned\x07\n[term2: all clear].test"
FORGED_SHOWN = "blocked: x\\x1b]0;owned\\x07\\x0a[term2:\\x20all\\x20clear].test was not approved"
SOCKS_ASK = (
    "import socket; s = socket.create_connection(('127.0.0.1', 1080)); s.sendall(b'\\x05\\x01\\x00'); s.recv(2); "
    f"h = {FORGED!r}; s.sendall(bytes((5, 1, 0, 3, len(h))) + h + b'\\x00\\x50'); print('socks', s.recv(10)[1])"
)
COMMAND = f'curl -sS http://refused.invalid/; python3 -c "{SOCKS_ASK}"; echo done'
PROGRAM = (
    "import urllib.request\n"
    "try:\n"
    "    urllib.request.urlopen('http://refused.invalid/', timeout=20)\n"
    "except Exception as exc:\n"
    "    print('refused:', exc)\n"
)


@contextlib.contextmanager
def _agent(base: Path, version: int, capabilities: Message | None) -> Iterator[Agent]:
    root = base / "project"
    root.mkdir(exist_ok=True)
    with start_fake_llm() as llm:
        answers = Answers()
        proc = AcpProcess(base, env=llm_env(llm), permission=answers)
        try:
            proc.initialize(version, capabilities)
            yield Agent(proc, llm, answers, base, root)
            assert proc.close() == 0, proc.stderr()[-3000:]
            proc.validate_schemas()
        finally:
            proc.kill()


@pytest.fixture(scope="module")
def agents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Agent]]:
    with contextlib.ExitStack() as stack:
        started = {
            name: stack.enter_context(_agent(tmp_path_factory.mktemp(name), version, caps))
            for name, version, caps in (("v2", 2, None), ("zed", 1, ZED), ("plain", 1, None))
        }
        with ThreadPoolExecutor(len(started)) as pool:
            warm = [pool.submit(a.turn, a.session(), timeout=WARM_UP_TIMEOUT) for a in started.values()]
            for future in warm:
                future.result()
        yield started


def _run(agent: Agent, call: dict[str, Any]) -> tuple[str, list[Message]]:
    """Runs `call` with registry.test approved; its tool call id and this turn's updates for it."""
    agent.llm.state.reset()
    messages = agent.turn(agent.session(), call, policy=select("allow-once"))
    ids = [u["toolCallId"] for u in updates(messages) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert ids, messages
    return ids[0], [u for u in updates(messages) if u.get("toolCallId") == ids[0] or "terminalId" in u]


def _shown(agent: Agent, call_id: str, shown: list[Message]) -> str:
    """Everything the client was given to draw for the call, as it would draw it."""
    if agent.version == 2:
        finals = [u for u in shown if u["sessionUpdate"] == "terminal_update" and "output" in u]
        texts = [base64.b64decode(u["output"]["data"]).decode() for u in finals]
    else:
        texts = [u["_meta"]["terminal_output"]["data"] for u in shown if "terminal_output" in u.get("_meta", {})]
    final = [u for u in shown if u.get("status") in ("completed", "failed")][-1]
    texts += [c["content"]["text"] for c in final.get("content", []) if c["type"] == "content"]
    return "".join(texts)


@pytest.mark.parametrize("client", ["v2", "zed", "plain"])
def test_a_refused_host_is_shown_escaped_in_the_command_output(agents: dict[str, Agent], client: str) -> None:
    agent = agents[client]
    call_id, shown = _run(agent, shell_call(COMMAND, network=["registry.test"]))
    drawn = _shown(agent, call_id, shown)
    assert "done" in drawn and REFUSED in drawn, drawn
    assert FORGED_SHOWN in drawn, drawn
    assert "\x1b]0;owned" not in drawn and "\n[term2: all clear]" not in drawn
    assert REFUSED in str(agent.llm.requests[-1].body)  # the model is told as before


@pytest.mark.parametrize("client", ["v2", "plain"])
def test_a_refused_host_is_shown_for_a_program(agents: dict[str, Agent], client: str) -> None:
    agent = agents[client]
    call_id, shown = _run(agent, {"name": "run_code", "arguments": {"code": PROGRAM, "network": ["registry.test"]}})
    drawn = _shown(agent, call_id, shown)
    assert "refused:" in drawn and REFUSED in drawn, drawn


def test_a_refused_host_is_also_a_notice_for_a_client_that_takes_notices(tmp_path: Path) -> None:
    """Issue 29 part 4 (ADR 0046): the same refusal, still in the command's output the model reads, is
    also a `notice` for a v1 client that advertised `session.notices`, escaped as in the output."""
    with _agent(tmp_path, 1, {"session": {"notices": {}}}) as agent:
        call_id, shown = _run(agent, shell_call(COMMAND, network=["registry.test"]))
        assert REFUSED in _shown(agent, call_id, shown)
        notices = [u for u in updates(agent.proc.log) if u["sessionUpdate"] == "notice"]
        titles = [n["title"] for n in notices]
        assert REFUSED in titles and FORGED_SHOWN in titles, titles
        assert not any("\x1b" in t or "\n" in t for t in titles)
        assert all(n["severity"] == "warning" for n in notices)
        assert REFUSED in str(agent.llm.requests[-1].body)  # the model still reads it in the output
