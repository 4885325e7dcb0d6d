"""Issue 7, part 2: property-based fuzzing of a real `term2 acp` over stdio.

Each test spawns ONE long-running `python -m term2 acp` and throws hypothesis
examples at it: invalid JSON bytes, wrong types for every envelope field, huge
strings, deep nesting, unknown and `_`-prefixed methods, duplicated ids in
flight, null/missing ids, batches (v2; refused by v1 and before initialize),
session methods with mutated params, and floods of notifications.

Every line of an example is run through an oracle that mirrors JSON-RPC 2.0
and term2's ACP spec, giving the answers the agent owes: how many, for which
id, and which error codes are allowed. After each example we check that

* the process is alive and every stdout line is a JSON-RPC message;
* each request got EXACTLY one answer (ids are unique per example; a request
  that repeats an in-flight id gets its own answer too), notifications none,
  and the answers to batch members came inside a batch array;
* every error code is the one for its input class (see ALLOWED CODES below).

At the end of each test the whole transcript is validated against the
official ACP schemas, the process must exit 0 on EOF, and a fresh process on
the same TERM2_HOME must list every page of sessions (including every session
the fuzzer created) while SQLite's integrity_check says ok.

ALLOWED CODES, by input class:

* line that is not JSON (bad bytes, bad UTF-8, too deep)  -> -32700, id null
* JSON that is not a request object (scalar, wrong/missing "jsonrpc", no or
  non-string "method", invalid id type or int outside int64)  -> -32600; the id
  is echoed only when it is a valid id, else null
* request with non-structured params (string, number, bool) -> -32600
  (JSON-RPC: params MUST be structured; -32602 also accepted)
* batch on v1 or before initialize, empty batch -> one -32600, id null
* `initialize` or `session/prompt` request inside a batch -> -32600
* unknown method, `_`-prefixed extension, session/load on v2 -> -32601
* session method before initialize, second initialize -> -32600
* initialize with unusable params -> -32602
* session method with bad params, unknown session, bad cwd/cursor -> -32602
  (or a result when the mutated params happen to be valid)
* a request repeating the id of one still in flight -> -32600 (so any request
  with a duplicated id may get -32600)
* a request targeted by `$/cancel_request` -> -32800 allowed
* -32000 (busy) and -32603 (close that did not settle, failed v1 turn) are
  never allowed here: the fuzzer never prompts a real session, so neither can
  happen, and an Internal error means an unhandled exception (a bug).

Budget: the "ci" profile keeps the directory under ~90 s on 2 cores; set
TERM2_FUZZ_EXAMPLES=N for a long campaign (docs/fuzzing.md).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.acp_process import AcpProcess
from tests.support.schemas import validate_outgoing

# --------------------------------------------------------------------------- budget

_SUPPRESS = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.large_base_example,
    HealthCheck.filter_too_much,
    HealthCheck.function_scoped_fixture,
]
settings.register_profile(
    "ci", max_examples=60, deadline=None, database=None, suppress_health_check=_SUPPRESS, print_blob=True
)
_LONG = int(os.environ.get("TERM2_FUZZ_EXAMPLES", "0") or 0)
settings.register_profile("long", parent=settings.get_profile("ci"), max_examples=max(_LONG, 1))
FUZZ = settings.get_profile("long" if _LONG > 0 else "ci")

ANSWER_TIMEOUT = 60.0
FLOOD_BYTES = 4 * 1024 * 1024  # a notification flood is at most this much

# --------------------------------------------------------------------------- markers


class Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


FRESH_INT = Marker("FRESH_INT")  # a new id, unique for the whole process
FRESH_STR = Marker("FRESH_STR")
PREV = Marker("PREV")  # the id most recently made fresh (duplicates, cancel targets)
KNOWN_SESSION = Marker("KNOWN_SESSION")  # a session this process really created
WORKSPACE = Marker("WORKSPACE")  # the real workspace directory
A_FILE = Marker("A_FILE")  # a regular file (not a directory)


@dataclass(frozen=True)
class Raw:
    """Bytes sent as they are (may contain several lines)."""

    data: bytes


@dataclass(frozen=True)
class Encoded:
    """A JSON value (with markers) sent as one line."""

    value: Any


@dataclass(frozen=True)
class Mutated:
    """A JSON value (with markers) whose encoding is then damaged at the byte level."""

    value: Any
    position: int
    kind: str
    junk: bytes


@dataclass(frozen=True)
class Repeated:
    """One line sent `times` times (notification floods)."""

    value: Any
    times: int


# --------------------------------------------------------------------------- strategies

INT64 = 2**63
SESSION_METHODS_ALL = (
    "session/new",
    "session/load",
    "session/list",
    "session/resume",
    "session/close",
    "session/prompt",
    "session/set_config_option",  # v1 only (ADR 0043)
    "session/set_mode",  # v1 only (ADR 0044)
)
SURROGATES = ("\ud800", "\udbff", "\udc80", "\udfff")

# `n` is the size of the JSON encoding, so "😀" (12 bytes escaped) stays a few MB on the wire.
huge_strings = st.builds(
    lambda ch, n: ch * (n // (len(json.dumps(ch)) - 2)),
    st.sampled_from(["a", "é", "/", '"', "\\", "\u2028", "\x00", "😀", "\ud800"]),
    st.one_of(st.integers(0, 64), st.integers(64 * 1024, 3 * 1024 * 1024)),
)
texts = st.one_of(
    st.text(max_size=20),
    st.builds(lambda t, s: t + s, st.text(max_size=5), st.sampled_from(SURROGATES)),
    st.sampled_from(["", "/", ".", "..", "sess_", "sess_00000000", "a.b", "null", "\n", "\r\n", "{}"]),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=12,
)
any_string = st.one_of(texts, huge_strings)
some_value = st.one_of(json_values, huge_strings)

ids = st.one_of(
    st.just(FRESH_INT),
    st.just(FRESH_STR),
    st.none(),
    st.booleans(),
    st.floats(),
    st.sampled_from([INT64, -INT64 - 1, 2**70, INT64 - 1, -INT64, 0.5, 1.0]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
methods = st.one_of(
    st.sampled_from(["initialize", *SESSION_METHODS_ALL, "session/cancel", "$/cancel_request"]),
    st.sampled_from(["_term2/x", "_", "_meta", "_zed/ext", "session/unknown", "", "SESSION/NEW", "session/new "]),
    st.builds(lambda s: "_" + s, st.text(max_size=10)),
    st.text(max_size=15),
    huge_strings,
)
params_values = st.one_of(
    st.dictionaries(texts, some_value, max_size=4), st.lists(json_values, max_size=3), json_scalars
)

cwds = st.one_of(
    st.just(WORKSPACE),
    st.just(A_FILE),
    st.sampled_from(["/", "/nonexistent/term2-fuzz", "relative/dir", "", ".", "/tmp/\x00x", "~"]),
    any_string,
    json_values,
)
session_ids = st.one_of(st.just(KNOWN_SESSION), any_string, json_values)
replay_from = st.one_of(
    st.just({"type": "start"}),
    st.builds(lambda t: {"type": t}, any_string),
    json_values,
)
cursors = st.one_of(
    any_string,
    json_values,
    st.builds(
        lambda a, b: f"{a}.{b}", st.text("ABCDEFabcdef0123456789-_=", max_size=40), st.text("abc-_", max_size=43)
    ),
)


def _fields(required: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]]) -> Any:
    """Params that are often close to valid: each field may be missing, valid-ish or random."""
    return st.fixed_dictionaries(
        {k: v for k, v in required.items()},
        optional={
            **optional,
            "_meta": st.one_of(json_values, st.just({"traceparent": "00-ab-cd-01"})),
            "extra": some_value,
        },
    ).flatmap(
        lambda d: st.one_of(
            st.just(d), st.builds(lambda drop: {k: v for k, v in d.items() if k != drop}, st.sampled_from([*d, "none"]))
        )
    )


def method_params(version: int | None) -> st.SearchStrategy[tuple[str, Any]]:
    empty_lists = st.one_of(st.just([]), json_values)
    prompt_blocks = st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": any_string}),
            st.fixed_dictionaries({"type": st.just("resource_link"), "uri": any_string, "name": any_string}),
            st.fixed_dictionaries({"type": st.sampled_from(["image", "audio", "resource", ""]), "data": any_string}),
            json_values,
        ),
        max_size=3,
    )
    per_method = {
        "session/new": _fields({"cwd": cwds}, {"mcpServers": empty_lists, "additionalDirectories": empty_lists}),
        "session/list": _fields({}, {"cursor": cursors, "cwd": cwds}),
        "session/resume": _fields(
            {"sessionId": session_ids, "cwd": cwds}, {"replayFrom": replay_from, "mcpServers": empty_lists}
        ),
        "session/load": _fields({"sessionId": session_ids, "cwd": cwds}, {"mcpServers": empty_lists}),
        "session/close": _fields({"sessionId": session_ids}, {}),
        # Never KNOWN_SESSION: the fuzzer does not run real turns (no model configured).
        "session/prompt": _fields({"sessionId": any_string, "prompt": st.one_of(prompt_blocks, json_values)}, {}),
        "initialize": _fields(
            # never one that could succeed: the pre-initialize test should stay before initialize
            {
                "protocolVersion": st.one_of(json_values, st.sampled_from([0, -1, "2", 1.5, None, True])).filter(
                    lambda v: not can_initialize({"protocolVersion": v})
                )
            },
            {"clientCapabilities": json_values},
        ),
    }
    pairs = [st.tuples(st.just(m), st.one_of(p, params_values)) for m, p in per_method.items()]
    return st.one_of(*pairs)


def requests(version: int | None, request_id: Any = None) -> st.SearchStrategy[dict[str, Any]]:
    rid = st.just(request_id) if request_id is not None else st.sampled_from([FRESH_INT, FRESH_STR])
    return st.builds(
        lambda mp, i: {"jsonrpc": "2.0", "id": i, "method": mp[0], "params": mp[1]},
        method_params(version),
        rid,
    )


notifications = st.one_of(
    st.builds(
        lambda p: {"jsonrpc": "2.0", "method": "session/cancel", "params": p},
        st.one_of(st.fixed_dictionaries({"sessionId": session_ids}), json_values),
    ),
    st.builds(
        lambda p: {"jsonrpc": "2.0", "method": "$/cancel_request", "params": p},
        st.one_of(st.fixed_dictionaries({"requestId": st.one_of(st.just(PREV), ids, json_values)}), json_values),
    ),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, methods, params_values),
    st.builds(lambda m: {"jsonrpc": "2.0", "method": m}, methods),
)

_MISSING = object()


def _envelope(jsonrpc: Any, rid: Any, method: Any, params: Any, extra: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {}
    for key, value in (("jsonrpc", jsonrpc), ("id", rid), ("method", method), ("params", params)):
        if value is not _MISSING:
            message[key] = value
    message.update(extra)
    return message


envelopes = st.builds(
    _envelope,
    st.one_of(st.just("2.0"), st.just(_MISSING), st.sampled_from(["1.0", "2", 2.0, 2, None, "2.0 "]), json_values),
    st.one_of(ids, st.just(_MISSING)),
    st.one_of(methods, st.just(_MISSING), json_values),
    st.one_of(st.just(_MISSING), params_values),
    st.dictionaries(st.sampled_from(["result", "error", "_meta", "x"]), json_values, max_size=2),
)
responses = st.builds(
    lambda i, body: {"jsonrpc": "2.0", "id": i, **body},
    st.one_of(ids, json_values),
    st.one_of(
        st.builds(lambda r: {"result": r}, json_values),
        st.builds(
            lambda e: {"error": e},
            st.one_of(json_values, st.fixed_dictionaries({"code": json_values, "message": json_values})),
        ),
    ),
)


def _deep(n: int, opener: str) -> bytes:
    closer = {"[": "]", '{"a":': "}"}[opener]
    inner = opener * n + "1" + closer * n if opener != "[" else "[" * n + "]" * n
    return ('{"jsonrpc":"2.0","id":"DEEP","method":"session/list","params":{"cursor":' + inner + "}}").encode()


raw_lines = st.one_of(
    st.binary(max_size=64).map(lambda b: Raw(b + b"\n")),
    st.sampled_from(
        [
            b"{not json\n",
            b"\xff\xfe\x00\n",
            b"}{\n",
            b"[[[\n",
            b"null\n",
            b'"s"\n',
            b"42\n",
            b"[]\n",
            b"{}\n",
            b"\xef\xbb\xbf{}\n",
            b'{"jsonrpc":"2.0","method":"x"\n',
            b"\r\n",
            b"   \n",
            b"\x00\n",
            b"NaN\n",
            b'{"jsonrpc":"2.0","id":1e400,"method":"x"}\n',
            b'{"jsonrpc":"2.0","id":"\\ud800","method":"x"}\n',
            b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"x"}\n',
        ]
    ).map(Raw),
    # deep nesting: always parsed (<=200) or always a parse error (>=5000)
    st.builds(
        lambda n, o: Raw(_deep(n, o) + b"\n"),
        st.one_of(st.integers(1, 200), st.integers(5000, 200_000)),
        st.sampled_from(["[", '{"a":']),
    ),
    st.builds(lambda n: Raw(b"[" * n + b"]" * n + b"\n"), st.integers(5000, 300_000)),
)


def mutated(version: int | None) -> st.SearchStrategy[Mutated]:
    return st.builds(
        Mutated,
        st.one_of(requests(version), envelopes),
        st.integers(0, 10_000),
        st.sampled_from(["truncate", "flip", "insert", "delete"]),
        st.binary(min_size=1, max_size=4),
    )


def singles(version: int | None) -> st.SearchStrategy[Any]:
    return st.one_of(
        requests(version).map(Encoded),
        envelopes.map(Encoded),
        notifications.map(Encoded),
        responses.map(Encoded),
        raw_lines,
        mutated(version),
        st.builds(Repeated, notifications, st.integers(1, 400)),
    )


def batches(version: int | None) -> st.SearchStrategy[Encoded]:
    member = st.one_of(requests(version), envelopes, notifications, responses, json_scalars)
    return st.lists(member, max_size=6).map(Encoded)


def duplicates(version: int | None) -> st.SearchStrategy[list[Any]]:
    """The same id, fresh for this example, on 2-4 requests sent back to back."""
    return st.builds(
        lambda first, rest: [Encoded(first), *(Encoded(r) for r in rest)],
        requests(version),
        st.lists(
            st.one_of(
                requests(version, PREV), st.builds(lambda m: {"jsonrpc": "2.0", "id": PREV, "method": m}, methods)
            ),
            min_size=1,
            max_size=3,
        ),
    )


def cases(version: int | None) -> st.SearchStrategy[list[Any]]:
    part = st.one_of(
        singles(version).map(lambda s: [s]),
        batches(version).map(lambda b: [b]),
        duplicates(version),
    )
    return st.lists(part, min_size=1, max_size=6).map(lambda parts: [line for p in parts for line in p])


# --------------------------------------------------------------------------- oracle


@dataclass
class Expect:
    request_id: Any
    codes: set[int]
    result_ok: bool = False
    batch: bool = False
    method: str | None = None

    def accepts(self, answer: dict[str, Any], via_batch: bool) -> bool:
        if via_batch != self.batch:
            return False
        if "result" in answer:
            # Requests may share an id; only session/new answers with a session id, so a result is
            # matched to its own method when answers to one id come back in either order.
            result = answer["result"]
            opens = isinstance(result, dict) and isinstance(result.get("sessionId"), str)
            return self.result_ok and opens == (self.method == "session/new")
        error = answer.get("error")
        return isinstance(error, dict) and error.get("code") in self.codes


def valid_id(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return -INT64 <= value < INT64
    return value is None or isinstance(value, str)


def id_key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


def oracle(message: Any, version: int | None, in_batch: bool) -> Expect | None:
    """The answer term2 owes for one decoded message (None: no answer)."""
    safe = message.get("id") if isinstance(message, dict) and valid_id(message.get("id")) else None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return Expect(safe, {-32600}, batch=in_batch)
    method = message.get("method", _MISSING)
    if in_batch and isinstance(method, str) and "id" in message and method in ("initialize", "session/prompt"):
        return Expect(safe, {-32600}, batch=True)
    if method is _MISSING:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a response; unknown ids are ignored
        return Expect(safe, {-32600}, batch=in_batch)
    if not isinstance(method, str):
        return Expect(safe, {-32600}, batch=in_batch)
    params = message.get("params")
    if params is not None and not isinstance(params, (dict, list)):
        return Expect(safe, {-32600, -32602}, batch=in_batch) if "id" in message else None
    if "id" not in message:
        return None
    request_id = message["id"]
    if not valid_id(request_id):
        return Expect(None, {-32600}, batch=in_batch)
    known = method == "initialize" or method in SESSION_METHODS_ALL
    if method in ("session/load", "session/set_config_option", "session/set_mode") and version == 2:
        known = False
    if not known:
        return Expect(request_id, {-32601}, batch=in_batch)
    if method == "initialize":
        # The fuzzer never sends an initialize that could succeed (see method_params).
        return Expect(request_id, {-32600} if version is not None else {-32602}, batch=in_batch)
    if version is None:
        return Expect(request_id, {-32600}, batch=in_batch)
    return Expect(request_id, {-32602}, result_ok=True, batch=in_batch, method=method)


def can_initialize(params: Any) -> bool:
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    return isinstance(requested, int) and not isinstance(requested, bool) and requested >= 1


def _initializes(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and message.get("method") == "initialize"
        and valid_id(message.get("id", _MISSING))
        and can_initialize(message.get("params"))
    )


# --------------------------------------------------------------------------- harness


@dataclass
class Sent:
    """What one example sent: the lines and the answers they are owed."""

    by_id: dict[tuple[str, Any], list[Expect]] = field(default_factory=dict)
    nulls: list[Expect] = field(default_factory=list)
    cancelled: set[tuple[str, Any]] = field(default_factory=set)
    request_counts: dict[tuple[str, Any], int] = field(default_factory=dict)
    answers: dict[tuple[str, Any], list[tuple[dict[str, Any], bool]]] = field(default_factory=dict)

    def add(self, expect: Expect | None) -> None:
        if expect is None:
            return
        if expect.request_id is None:
            self.nulls.append(expect)
        else:
            self.by_id.setdefault(id_key(expect.request_id), []).append(expect)

    def pool(self, key: tuple[str, Any]) -> list[Expect]:
        return self.nulls if key == id_key(None) else self.by_id.get(key, [])

    def open(self) -> int:
        owed = sum(len(v) for v in self.by_id.values()) + len(self.nulls)
        return owed - sum(len(v) for v in self.answers.values())

    def relax(self) -> None:
        """Duplicated in-flight ids may get -32600; cancelled requests may get -32800."""
        for key, count in self.request_counts.items():
            expects = self.nulls if key == id_key(None) else self.by_id.get(key, [])
            for expect in expects:
                if count > 1:
                    expect.codes.add(-32600)
                if key in self.cancelled:
                    expect.codes.add(-32800)


class Harness:
    def __init__(self, root: Path, version: int | None) -> None:
        self.root = root
        self.home = root / "home"
        self.workspace = root / "project"
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "README.md").write_text("# fuzz\n")
        self.client = AcpProcess(root, home=self.home)
        self.version: int | None = None
        self.numbers = itertools.count(1_000_000)
        self.prev: Any = "no-prev"
        self.known_sessions: list[str] = []
        self.created: set[str] = set()
        self.methods_by_id: dict[tuple[str, Any], set[str]] = {}
        self.examples = 0
        self.failed = False
        self.initial_version = version
        self.retired: list[AcpProcess] = []
        if version is not None:
            self.version = self.client.initialize(version)["protocolVersion"]
            for _ in range(2):
                sid = self.client.new_session(self.workspace)
                self.known_sessions.append(sid)
                self.created.add(sid)

    # -- substitution -------------------------------------------------------
    def fill(self, value: Any, example: int) -> Any:
        if value is FRESH_INT:
            self.prev = next(self.numbers)
            return self.prev
        if value is FRESH_STR:
            self.prev = f"fz-{next(self.numbers)}"
            return self.prev
        if value is PREV:
            return self.prev
        if value is KNOWN_SESSION:
            return self.known_sessions[example % len(self.known_sessions)] if self.known_sessions else "sess_none"
        if value is WORKSPACE:
            return str(self.workspace)
        if value is A_FILE:
            return str(self.workspace / "README.md")
        if isinstance(value, dict):
            return {
                self.fill(k, example) if isinstance(k, Marker) else k: self.fill(v, example) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.fill(v, example) for v in value]
        return value

    # -- one example ----------------------------------------------------------
    def run(self, case: list[Any]) -> None:
        self.examples += 1
        sent = Sent()
        try:
            for item in case:
                self._send(item, sent)
            sent.relax()
            self._collect(sent)
            self._settle(sent)
            self._sentinel()
            rc = self.client.proc.poll()
            assert rc is None, f"term2 died (rc={rc})\n{self.client.stderr()[-4000:]}"
        except BaseException:
            self._resync()
            raise

    def _resync(self) -> None:
        """After a failed example, leave a clean connection for the next one (shrinking reuses it)."""
        self.failed = True
        if self.client.proc.poll() is None:
            try:
                time.sleep(0.5)
                sentinel = f"sentinel-{next(self.numbers)}"
                self.client.send({"jsonrpc": "2.0", "id": sentinel, "method": "_fuzz/sentinel"})
                while True:
                    line = self.client.next(timeout=ANSWER_TIMEOUT)
                    if isinstance(line, dict) and line.get("id") == sentinel:
                        return
            except Exception:  # fall through to a fresh process
                pass
        # term2 died or hung: continue on a fresh process over the same home
        self.retired.append(self.client)
        self.client.kill()
        self.client = AcpProcess(self.root, home=self.home)
        self.version = self.client.initialize(self.initial_version)["protocolVersion"] if self.initial_version else None

    def _send(self, item: Any, sent: Sent) -> None:
        if isinstance(item, Raw):
            self._expect_bytes(item.data, sent)
            self.client.send_raw(item.data)
            return
        if isinstance(item, Repeated):
            line = _encode(self.fill(item.value, self.examples)) + b"\n"
            data = line * max(1, min(item.times, FLOOD_BYTES // len(line)))
            self._expect_bytes(data, sent)
            self.client.send_raw(data)
            return
        line = _encode(self.fill(item.value, self.examples))
        if isinstance(item, Mutated):
            line = _mutate(line, item)
        data = line.replace(b"\n", b"") + b"\n" if isinstance(item, Encoded) else line + b"\n"
        self._expect_bytes(data, sent)
        self.client.send_raw(data)

    def _track(self, value: Any, sent: Sent) -> None:
        """Remember request ids (duplicates), cancel targets and methods (schema checks)."""
        members = value if isinstance(value, list) else [value]
        for message in members:
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                continue
            if message["method"] == "$/cancel_request" and "id" not in message:
                params = message.get("params")
                if isinstance(params, dict) and "requestId" in params and valid_id(params["requestId"]):
                    sent.cancelled.add(id_key(params["requestId"]))
            if "id" in message and valid_id(message["id"]):
                key = id_key(message["id"])
                sent.request_counts[key] = sent.request_counts.get(key, 0) + 1
                self.methods_by_id.setdefault(key, set()).add(message["method"])

    def _expect_bytes(self, data: bytes, sent: Sent) -> None:
        """Split like term2's reader does and run each line through the oracle."""
        for raw in data.split(b"\n")[:-1]:
            line = raw.rstrip(b"\r")
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, RecursionError):
                sent.add(Expect(None, {-32700}))
                continue
            if isinstance(message, list):
                if self.version != 2:
                    sent.add(Expect(None, {-32600}))  # v1 and before initialize: no batches
                elif not message:
                    sent.add(Expect(None, {-32600}))
                else:
                    for member in message:
                        sent.add(oracle(member, self.version, in_batch=True))
                    self._track(message, sent)
            else:
                expect = oracle(message, self.version, in_batch=False)
                if self.version is None and expect is not None and _initializes(message):
                    # initialize runs inline, before the next line is read: from here on
                    # the connection speaks the negotiated version (a mutation can do this).
                    requested = message["params"]["protocolVersion"]
                    self.version = 2 if requested >= 2 else 1
                    expect = Expect(message["id"], set(), result_ok=True, method="initialize")
                sent.add(expect)
                self._track(message, sent)

    def _collect(self, sent: Sent) -> None:
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while sent.open():
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"missing answers: {_short(sent.by_id)} nulls={_short(sent.nulls)}"
            try:
                line = self.client.next(timeout=remaining)
            except Exception as exc:
                raise AssertionError(
                    f"no answer ({exc!r}); still owed {_short(sent.by_id)} nulls={_short(sent.nulls)}\n"
                    f"{self.client.stderr()[-4000:]}"
                ) from exc
            self._match(line, sent)

    def _match(self, line: Any, sent: Sent) -> None:
        via_batch = isinstance(line, list)
        if via_batch:
            assert self.version == 2, f"a batch was sent on a v{self.version} connection: {_short(line)}"
            assert line, "empty batch reply"
        for answer in line if via_batch else [line]:
            if "method" in answer:
                continue  # agent notification (e.g. replayed history)
            assert "id" in answer, f"answer without id: {_short(answer)}"
            key = id_key(answer["id"])
            bucket = sent.answers.setdefault(key, [])
            bucket.append((answer, via_batch))
            assert len(bucket) <= len(sent.pool(key)), (
                f"unexpected answer{' in a batch' if via_batch else ''} (unknown id or one answer too many): "
                f"{_short(answer)}; owed for this id: {_short(sent.pool(key))}"
            )

    def _settle(self, sent: Sent) -> None:
        """Pair every answer with a distinct expectation of its id (a bipartite matching)."""
        for key, answers in sent.answers.items():
            pairs = _matching(answers, sent.pool(key))
            for answer, expect in pairs:
                if "result" in answer and expect.method == "session/new" and isinstance(answer["result"], dict):
                    session_id = answer["result"].get("sessionId")
                    assert isinstance(session_id, str), answer
                    self.created.add(session_id)
                    self.known_sessions.append(session_id)

    def _sentinel(self) -> None:
        """Every line before this one has been read; nothing else is owed."""
        sentinel = f"sentinel-{next(self.numbers)}"
        self.client.send({"jsonrpc": "2.0", "id": sentinel, "method": "_fuzz/sentinel"})
        while True:
            line = self.client.next(timeout=ANSWER_TIMEOUT)
            answers = line if isinstance(line, list) else [line]
            if any(a.get("id") == sentinel for a in answers if "method" not in a):
                assert not isinstance(line, list) and line["error"]["code"] == -32601, line
                return
            assert all("method" in a for a in answers), f"answer after all were matched: {_short(line)}"

    # -- end of test ----------------------------------------------------------
    def finish(self) -> None:
        if self.version is None:
            self.version = self.client.initialize(2)["protocolVersion"]
        self.client.assert_stdout_is_protocol()
        assert self.client.close(timeout=30) == 0, self.client.stderr()[-4000:]
        validate_transcript(self.client, self.version, self.methods_by_id)
        check_store(self.root, self.home, self.created)

    def kill(self) -> None:
        for client in [*self.retired, self.client]:
            client.kill()


def _matching(answers: list[tuple[dict[str, Any], bool]], expects: list[Expect]) -> list[tuple[dict[str, Any], Expect]]:
    """A perfect matching of answers to expectations (Kuhn's algorithm), or AssertionError."""
    owner: dict[int, int] = {}  # expectation index -> answer index

    def place(a: int, seen: set[int]) -> bool:
        answer, via_batch = answers[a]
        for e, expect in enumerate(expects):  # a free expectation first: keeps recursion shallow
            if e not in owner and expect.accepts(answer, via_batch):
                owner[e] = a
                return True
        for e, expect in enumerate(expects):
            if e in seen or not expect.accepts(answer, via_batch):
                continue
            seen.add(e)
            if e not in owner or place(owner[e], seen):
                owner[e] = a
                return True
        return False

    for a in range(len(answers)):
        if not place(a, set()):
            raise AssertionError(
                f"wrong answer{' in a batch' if answers[a][1] else ''}: {_short(answers[a][0])}; "
                f"the answers for this id were {_short(answers)}; owed: {_short(expects)}"
            )
    return [(answers[a][0], expects[e]) for e, a in owner.items()]


def _encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


def _mutate(line: bytes, item: Mutated) -> bytes:
    at = item.position % (len(line) + 1)
    if item.kind == "truncate":
        return line[:at]
    if item.kind == "flip" and at < len(line):
        return line[:at] + bytes([line[at] ^ item.junk[0]]) + line[at + 1 :]
    if item.kind == "delete":
        return line[:at] + line[at + len(item.junk) :]
    return line[:at] + item.junk + line[at:]


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def validate_transcript(client: AcpProcess, version: int, methods_by_id: dict[tuple[str, Any], set[str]]) -> None:
    """Everything term2 sent, against the official schema of the negotiated version.

    Like AcpProcess.validate_schemas(), but a result is checked against the
    method(s) sent with its id, so duplicated ids do not confuse the check.
    """
    client.assert_stdout_is_protocol()
    for direction, message in client.transcript:
        if direction != "agent":
            continue
        if isinstance(message, list):
            assert version == 2, "batch reply on v1"
        for item in message if isinstance(message, list) else [message]:
            if "result" in item and "method" not in item:
                candidates = methods_by_id.get(id_key(item["id"])) or {"initialize", "session/new"}
                failures = []
                for method in sorted(candidates):
                    try:
                        validate_outgoing(version, item, method)
                        break
                    except AssertionError as exc:
                        failures.append(str(exc))
                else:
                    raise AssertionError("\n".join(failures))
            else:
                validate_outgoing(version, item)


def check_store(root: Path, home: Path, created: set[str]) -> None:
    """A fresh process on the same home lists every page; SQLite is intact."""
    fresh = AcpProcess(root, home=home)
    try:
        fresh.initialize(2)
        listed: list[str] = []
        params: dict[str, Any] = {}
        for _ in range(1000):
            page = fresh.result("session/list", params, timeout=60)
            listed.extend(s["sessionId"] for s in page["sessions"])
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        else:
            raise AssertionError("session/list never ended")
        assert len(listed) == len(set(listed)), "a session was listed twice"
        assert created <= set(listed), f"sessions lost: {created - set(listed)}"
        assert fresh.close(timeout=30) == 0
        fresh.validate_schemas()
    finally:
        fresh.kill()
    database = home / "sessions.sqlite3"
    assert database.is_file()
    with sqlite3.connect(database) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


# --------------------------------------------------------------------------- tests


@pytest.fixture
def harness_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started: list[Harness] = []

    def make(version: int | None) -> Harness:
        harness = Harness(tmp_path_factory.mktemp("fuzz"), version)
        started.append(harness)
        return harness

    yield make
    for harness in started:
        harness.kill()


def test_before_initialize(harness_factory: Any) -> None:
    """Anything before initialize: parse errors, -32600 for session methods and batches."""
    harness = harness_factory(None)

    @FUZZ
    @given(case=cases(None))
    def example(case: list[Any]) -> None:
        harness.run(case)

    example()
    harness.finish()


@pytest.mark.parametrize("version", [1, 2])
def test_initialized_connection(harness_factory: Any, version: int) -> None:
    """Envelopes, raw bytes, batches, duplicates and mutated session params on v1/v2."""
    harness = harness_factory(version)
    assert harness.version == version

    @FUZZ
    @given(case=cases(version))
    def example(case: list[Any]) -> None:
        harness.run(case)

    example()
    harness.finish()
