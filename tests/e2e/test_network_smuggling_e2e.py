"""Request smuggling through a real `term2 acp` (issue 30, item 8; ADR 0041): the model's approved command
talks raw HTTP to term2's proxy, and a lenient server on 127.0.0.1 (reached through `[network.resolve]`)
records every byte it gets. A pipelined second request with its own `Host`, and a header with a bare LF,
must never reach it: it sees one rebuilt request, and the command sees a 400 for the malformed one.
The proxy, bridge and sandbox are the ones tests/sandbox/test_threats_smuggling.py drives directly;
here the config, the approval and the tool call are term2's own, as a user's session has them.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, Message
from tests.support.lenient_server import ONE, SMUGGLED, lenient_server

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)

BARE_LF = b"GET http://lenient.test/lf HTTP/1.1\r\nX-A: 1\nHost: evil.test\r\n\r\n"

# Each case on its own connection to the proxy the sandbox names, its side ended, the status line printed.
CLIENT = """
import base64, json, os, socket, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
for name, data in json.load(open("cases.json")):
    sock = socket.create_connection((proxy.hostname, proxy.port))
    sock.sendall(base64.b64decode(data))
    sock.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    print(name, "=>", answer.split(b"\\r\\n", 1)[0].decode(), answer.count(b"HTTP/1.1 200"))
"""


def _allow(params: Message) -> Message:
    return {"outcome": {"outcome": "selected", "optionId": "allow-once"}}


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def test_a_smuggled_request_never_reaches_a_lenient_approved_server(tmp_path: Path, root: Path) -> None:
    cases = [("pipelined", ONE + SMUGGLED), ("bare LF", BARE_LF)]
    (root / "cases.json").write_text(json.dumps([(n, base64.b64encode(d).decode()) for n, d in cases]))
    (root / "client.py").write_text(CLIENT)
    with lenient_server() as lenient, start_fake_llm() as llm:
        config = tmp_path / "xdg-config" / "term2" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[network.resolve]\n"lenient.test:80" = "127.0.0.1:{lenient.port}"\n')
        proc = AcpProcess(tmp_path, env=llm_env(llm), permission=_allow)
        try:
            proc.initialize(2)
            sid = proc.new_session(root)
            arguments = {"command": "python3 client.py", "network": ["lenient.test"]}
            llm.push({"tool_calls": [{"name": "run_shell", "arguments": arguments}]})
            proc.prompt_v2(sid, "go", 180.0)
            result = next(str(r.body) for r in reversed(llm.requests) if "=>" in str(r.body))
            assert "pipelined => HTTP/1.1 200 OK 1" in result  # the first answered, once
            assert "bare LF => HTTP/1.1 400 Bad Request 0" in result
            assert lenient.connections() == [
                b"GET /one HTTP/1.1\r\nHost: lenient.test\r\nAccept: */*\r\nConnection: close\r\n\r\n"
            ]
            proc.close()
            proc.validate_schemas()
        finally:
            proc.kill()
