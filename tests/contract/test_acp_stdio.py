"""The launcher and JSON-RPC transport, over a real `term2 acp` subprocess."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.acp_process import is_jsonrpc
from tests.support.procs import children_of

V2_INIT = {"protocolVersion": 2, "info": {"name": "pytest", "version": "1"}}
GUARD = 60.0  # seconds: a guard against a hang only


def test_v2_initialize_is_exactly_the_documented_result(acp, tmp_path: Path) -> None:
    client = acp()
    response = client.call("initialize", V2_INIT)
    from term2 import __version__

    assert response == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": 2,
            "info": {"name": "term2", "title": "term2", "version": __version__},
            "capabilities": {"session": {}},
        },
    }
    client.version = 2
    assert client.close() == 0
    client.validate_schemas()


def test_v1_initialize_advertises_what_is_implemented(acp) -> None:
    client = acp()
    result = client.initialize(1)
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["sessionCapabilities"] == {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "additionalDirectories": {},
    }
    assert caps["promptCapabilities"] == {"image": False, "audio": False, "embeddedContext": True}
    assert [m["id"] for m in result["authMethods"]] == ["api-key"]  # the agent method: no auth.terminal (ADR 0047)
    assert caps["auth"] == {"logout": {}}
    assert result["agentInfo"]["name"] == "term2"
    assert client.close() == 0
    client.validate_schemas()


@pytest.mark.parametrize(("asked", "answered"), [(1, 1), (2, 2), (3, 2), (99, 2)])
def test_version_negotiation(acp, asked: int, answered: int) -> None:
    client = acp()
    params = {
        "protocolVersion": asked,
        "info": {"name": "c", "version": "1"},
        "clientInfo": {"name": "c", "version": "1"},
    }
    assert client.result("initialize", params)["protocolVersion"] == answered
    client.close()


def test_v2_flag_off_gives_v2_clients_version_1(acp) -> None:
    client = acp(env={"TERM2_ACP_V2": "0"})
    assert client.result("initialize", V2_INIT)["protocolVersion"] == 1
    client.close()


@pytest.mark.parametrize("version", [0, -1, "2", None, 1.5])
def test_unusable_versions_get_a_clear_error(acp, version: object) -> None:
    client = acp()
    response = client.call("initialize", {"protocolVersion": version})
    assert response["error"]["code"] == -32602
    assert "protocol" in response["error"]["message"].lower()
    assert client.result("initialize", V2_INIT)["protocolVersion"] == 2  # still serving
    client.close()


def test_requests_before_initialize_are_refused(acp, workspace: Path) -> None:
    client = acp()
    response = client.call("session/new", {"cwd": str(workspace)})
    assert response["error"]["code"] == -32600
    assert "initialize" in response["error"]["message"]
    client.initialize(2)
    assert client.call("initialize", V2_INIT)["error"]["code"] == -32600  # only once
    client.close()


def test_every_jsonrpc_error_code_and_the_process_keeps_serving(acp, workspace: Path) -> None:
    client = acp()
    client.initialize(2)
    client.send_raw(b"{not json\n")
    client.send_raw(b"\xff\xfe\x00garbage\n")
    client.send_raw(b"42\n")
    client.send_raw(b'{"jsonrpc":"1.0","id":7,"method":"session/list"}\n')
    client.send_raw(b'{"jsonrpc":"2.0","id":{"x":1},"method":"session/list"}\n')
    client.notify("no/such/notification", {})
    unknown = client.call("no/such/method", {})
    seen = client.log
    assert [(m["id"], m["error"]["code"]) for m in seen] == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (7, -32600),
        (None, -32600),
    ]
    bad_params = client.call("session/new", {"cwd": 12})
    assert unknown["error"]["code"] == -32601 and "no/such/method" in unknown["error"]["message"]
    assert bad_params["error"]["code"] == -32602 and "cwd" in bad_params["error"]["message"]
    assert client.new_session(workspace).startswith("sess_")
    client.close()
    client.validate_schemas()


def test_flood_of_malformed_lines_then_a_valid_request(acp) -> None:
    client = acp()
    client.initialize(2)
    garbage = b"".join([b"}{\n", b"\x00\x01\x02\n", b"[[[[[[\n", b'{"jsonrpc":"2.0"}\n', b"null\n", b'"str"\n'] * 200)
    client.send_raw(garbage)
    response = client.call("session/list", {}, timeout=30)
    assert "result" in response
    errors = [m for m in client.log if "error" in m]
    assert len(errors) == 1200
    client.close()
    client.validate_schemas()


def test_oversized_line_is_refused_and_serving_continues(acp) -> None:
    client = acp()
    client.initialize(2)
    huge = (
        b'{"jsonrpc":"2.0","id":5,"method":"session/list","params":{"cursor":"' + b"a" * (65 * 1024 * 1024) + b'"}}\n'
    )
    client.send_raw(huge)
    refusal = client.next(timeout=60)
    assert refusal["error"]["code"] == -32600 and "exceeds" in refusal["error"]["message"]
    assert "result" in client.call("session/list", {})
    client.close()


def test_deeply_nested_json_is_a_parse_error(acp) -> None:
    client = acp()
    client.initialize(2)
    client.send_raw(b"[" * 100000 + b"]" * 100000 + b"\n")
    assert client.next()["error"]["code"] in (-32700, -32600)
    assert "result" in client.call("session/list", {})
    client.close()


def test_v2_batches_and_v1_refusal(acp) -> None:
    client = acp()
    client.initialize(2)
    client.send(
        [
            {"jsonrpc": "2.0", "id": "a", "method": "session/list", "params": {}},
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}},
            {"jsonrpc": "2.0", "id": "b", "method": "nope"},
        ]
    )
    batch = client.next()
    assert isinstance(batch, list)
    assert {m["id"] for m in batch} == {"a", "b"}
    client.send([])
    assert client.next()["error"]["code"] == -32600
    client.close()
    client.validate_schemas()

    v1 = acp()
    v1.initialize(1)
    v1.send([{"jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {}}])
    answer = v1.next()
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    v1.close()


def test_meta_and_traceparent_are_accepted(acp, workspace: Path) -> None:
    client = acp()
    client.initialize(2)
    trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    result = client.result("session/new", {"cwd": str(workspace), "_meta": {"traceparent": trace}})
    assert result["sessionId"]
    client.close()
    assert trace in client.stderr()


def test_responses_with_unknown_ids_are_ignored(acp) -> None:
    client = acp()
    client.initialize(2)
    client.send({"jsonrpc": "2.0", "id": 12345, "result": {}})
    client.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert "result" in client.call("session/list", {})
    client.close()


def test_stdout_stays_protocol_even_when_a_library_prints(acp, tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    go = tmp_path / "go"  # made once term2 answered initialize: the library prints after term2 set stdout up
    (hook / "sitecustomize.py").write_text(
        "import os, threading, time\n"
        "def noisy():\n"
        f"    while not os.path.exists({str(go)!r}):\n"
        "        time.sleep(0.01)\n"
        "    print('a library printed this', flush=True)\n"
        "    os.write(1, b'C code wrote this\\n')\n"
        "threading.Thread(target=noisy, daemon=True).start()\n"
    )
    env = {"PYTHONPATH": f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    client = acp(env=env)
    client.initialize(2)
    go.touch()
    deadline = time.monotonic() + GUARD  # a guard against a hang only: waits for the prints, not a delay
    while "C code wrote this" not in client.stderr():
        assert time.monotonic() < deadline, "the library never printed"
        time.sleep(0.01)
    assert "result" in client.call("session/list", {})
    client.close()
    client.validate_schemas()
    assert "a library printed this" in client.stderr()
    assert "C code wrote this" in client.stderr()


def test_eof_shuts_down_promptly_with_exit_0(acp, workspace: Path) -> None:
    client = acp()
    client.initialize(2)
    client.new_session(workspace)
    assert client.close(timeout=GUARD) == 0  # nothing to wait for: exiting at all is the point, not how fast
    assert children_of(client.proc.pid) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_shut_down_with_exit_0(acp, workspace: Path, sig: int) -> None:
    client = acp()
    client.initialize(1)
    client.new_session(workspace)
    assert client.terminate(sig, timeout=GUARD) == 0
    assert children_of(client.proc.pid) == []
    assert all(is_jsonrpc(json.loads(line)) for line in client.raw_lines)
