"""Drive a real `term2 acp` subprocess over its stdio, the way an editor does.

Every line term2 writes is kept; `close()` checks that each one is a JSON-RPC
message and validates the whole conversation against the official ACP JSON
schemas for the negotiated version.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.schemas import validate_all

Message = dict[str, Any]
PermissionPolicy = Callable[[Message], Message | None]
ClientMethod = Callable[[Message], Message]  # a request's params -> its result; raise ClientError to refuse


class ClientError(Exception):
    """Raised by a ClientMethod: the client answers the request with this JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def allow_kind(kind: str) -> PermissionPolicy:
    """Answer permission requests with the first offered option of `kind`."""

    def answer(params: Message) -> Message:
        for option in params["options"]:
            if option["kind"] == kind:
                return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
        raise AssertionError(f"no option of kind {kind} offered: {params['options']}")

    return answer


def is_jsonrpc(message: object) -> bool:
    if isinstance(message, list):
        return bool(message) and all(is_jsonrpc(m) for m in message)
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if "method" in message:
        return isinstance(message["method"], str)
    return "id" in message and (("result" in message) ^ ("error" in message))


class AcpProcess:
    def __init__(
        self,
        workdir: Path,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        permission: PermissionPolicy | None = None,
        home: Path | None = None,
        client_methods: dict[str, ClientMethod] | None = None,
    ) -> None:
        self.workdir = workdir
        self.client_methods = client_methods or {}  # requests term2 sends that this client serves (fs/...)
        self.home = home or workdir / "term2-home"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
        full_env.update(
            {
                "TERM2_HOME": str(self.home),
                "XDG_CONFIG_HOME": str(workdir / "xdg-config"),
                "TERM2_LOG_LEVEL": "debug",
                "PYTHONUNBUFFERED": "1",
            }
        )
        full_env.update(env or {})
        self.stderr_path = workdir / f"stderr-{time.monotonic_ns()}.log"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "term2", "acp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=full_env,
            cwd=workdir,
        )
        self.transcript: list[tuple[str, Any]] = []
        self.raw_lines: list[bytes] = []
        self.version: int | None = None
        self.permission = permission
        self.permission_requests: list[Message] = []
        self._inbox: queue.Queue[Message | None] = queue.Queue()
        self._next_id = 0
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- plumbing ---------------------------------------------------------
    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.raw_lines.append(raw)
            try:
                message = json.loads(raw)
            except ValueError:
                self._inbox.put({"__invalid__": raw.decode("utf-8", "replace")})
                continue
            self.transcript.append(("agent", message))
            asks_permission = isinstance(message, dict) and message.get("method") == "session/request_permission"
            if asks_permission and "id" in message and self.permission is not None:
                self.permission_requests.append(message)
                answer = self.permission(message["params"])
                if answer is not None:
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": answer})
                continue
            if isinstance(message, dict) and "id" in message and message.get("method") in self.client_methods:
                self._serve(message)
                continue
            self._inbox.put(message)
        self._inbox.put(None)

    def _serve(self, message: Message) -> None:
        try:
            reply: Message = {"result": self.client_methods[message["method"]](message["params"])}
        except ClientError as err:
            reply = {"error": {"code": err.code, "message": err.message}}
        self.send({"jsonrpc": "2.0", "id": message["id"], **reply})

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.transcript.append(("client", message))
        self.send_raw(json.dumps(message).encode() + b"\n")

    def request(self, method: str, params: Any = None) -> int:
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
        message: Message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def next(self, timeout: float = 10.0) -> Message:
        item = self._inbox.get(timeout=timeout)
        if item is None:
            raise EOFError("term2 closed stdout")
        if "__invalid__" in item:
            raise AssertionError(f"term2 wrote a non-JSON line on stdout: {item['__invalid__']!r}")
        return item

    def collect_until(self, predicate: Callable[[Message], bool], timeout: float = 15.0) -> list[Message]:
        """Every message up to and including the first one matching `predicate`."""
        deadline = time.monotonic() + timeout
        seen: list[Message] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching message; saw {json.dumps(seen)[:2000]}")
            message = self.next(remaining)
            seen.append(message)
            if predicate(message):
                return seen

    def call(self, method: str, params: Any = None, timeout: float = 15.0) -> Message:
        """Send a request and return its response (notifications before it are kept in `.log`)."""
        request_id = self.request(method, params)
        messages = self.collect_until(lambda m: m.get("id") == request_id and "method" not in m, timeout)
        self.log = messages[:-1]
        return messages[-1]

    def result(self, method: str, params: Any = None, timeout: float = 15.0) -> Any:
        response = self.call(method, params, timeout)
        assert "result" in response, f"{method} failed: {response}"
        return response["result"]

    # -- ACP helpers ------------------------------------------------------
    def initialize(self, version: int = 2, capabilities: Message | None = None) -> Message:
        """``capabilities``: more v1 ``clientCapabilities`` (e.g. ``{"session": {"compaction": {}}}``)."""
        if version >= 2:
            params: Message = {"protocolVersion": version, "info": {"name": "pytest", "version": "1"}}
        else:
            params = {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, **(capabilities or {})},
                "clientInfo": {"name": "pytest", "version": "1"},
            }
        result = self.result("initialize", params)
        self.version = result["protocolVersion"]
        return result  # type: ignore[no-any-return]

    def new_session(self, cwd: Path | str) -> str:
        params: Message = {"cwd": str(cwd)}
        if self.version == 1:
            params["mcpServers"] = []
        return self.result("session/new", params)["sessionId"]  # type: ignore[no-any-return]

    def prompt_v2(self, session_id: str, text: str, timeout: float = 30.0) -> tuple[Message, list[Message]]:
        """Send a v2 prompt; return (ack, updates up to and including the idle state_update)."""
        request_id = self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )
        messages = self.collect_until(lambda m: _is_idle(m, session_id), timeout)
        acks = [m for m in messages if m.get("id") == request_id and "method" not in m]
        assert len(acks) == 1, f"expected one ack, got {acks}"
        return acks[0], messages

    def stderr(self) -> str:
        if not self._stderr.closed:
            self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    # -- shutdown and checks ----------------------------------------------
    def close(self, timeout: float = 10.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(5)
            self._stderr.close()

    def terminate(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        self.proc.send_signal(sig)
        rc = self.proc.wait(timeout)
        self._reader.join(5)
        self._stderr.close()
        return rc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._stderr.close()

    def assert_stdout_is_protocol(self) -> None:
        for raw in self.raw_lines:
            assert raw.endswith(b"\n"), f"unterminated stdout line {raw[:200]!r}"
            message = json.loads(raw)
            assert is_jsonrpc(message), f"stdout line is not JSON-RPC: {raw[:300]!r}"

    def validate_schemas(self) -> None:
        self.assert_stdout_is_protocol()
        assert self.version is not None, "never initialized"
        validate_all(self.version, self.transcript)


def is_update(session_id: str, kind: str, **fields: Any) -> Callable[[Message], bool]:
    """A predicate for `collect_until`: a `session/update` of `kind` for `session_id` with `fields`."""

    def match(message: Message) -> bool:
        if message.get("method") != "session/update" or message["params"]["sessionId"] != session_id:
            return False
        update = message["params"]["update"]
        return update["sessionUpdate"] == kind and all(update.get(k) == v for k, v in fields.items())

    return match


def _is_idle(message: Message, session_id: str) -> bool:
    return is_update(session_id, "state_update", state="idle")(message)


def updates(messages: list[Message], kind: str | None = None) -> list[Message]:
    out = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    return [u for u in out if kind is None or u["sessionUpdate"] == kind]


def bare(payload: Message) -> Message:
    """A prompt result or idle update without what a turn spent (`usage`, `_meta`): for exact comparisons.

    What is spent is checked where it is the subject (tests/e2e/test_native_wires_e2e.py).
    """
    return {key: value for key, value in payload.items() if key not in ("usage", "_meta")}


def replayed_by_a_new_process(
    workdir: Path,
    env: dict[str, str],
    home: Path,
    version: int,
    method: str,
    params: Message,
    check: Callable[[AcpProcess], None],
) -> list[Message]:
    """Everything a fresh `term2 acp` sends while it answers `method` (`session/load`, or a resume from the
    start): a session's replay as a new editor window gets it. `check` judges that process's stdout."""
    proc = AcpProcess(workdir, env=env, home=home)
    try:
        proc.initialize(version)
        result = proc.result(method, params)
        assert set(result) <= ({"configOptions", "modes"} if version == 1 else set()), result  # v1's pickers (ADR 0043)
        sent = list(proc.log)
        assert proc.close() == 0
        check(proc)
        return sent
    finally:
        proc.kill()
