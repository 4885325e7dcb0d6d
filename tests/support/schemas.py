"""Validate messages term2 *sent* against the official ACP JSON schemas.

The schemas come from the pinned ``@agentclientprotocol/sdk`` npm package
(installed by ``npm ci --prefix conformance``), not from a copy in this repo:
the point is to check term2 against exactly what the SDK clients ship.

* v1: ``schema/v1/schema.json`` of 2.4.0 (the npm alias ``sdk24``, ADR 0043)
* v2: ``schema/v2/schema.unstable.json`` of 1.4.0, which term2's v2 page binds

Both are Draft 2020-12 and tag every params/result definition with
``x-method`` (wire method) and ``x-side`` (which peer *handles* the method).
So for an agent-sent message the definition is found mechanically:

* request / notification the agent sends -> handled by the client
  (``x-side`` client/both/protocol), e.g. ``session/update`` ->
  ``SessionNotification`` (v1) / ``UpdateSessionNotification`` (v2);
* response the agent sends -> answers a request the agent handles
  (``x-side`` agent/both), e.g. ``session/prompt`` -> ``PromptResponse``;
* error response -> ``Error``.

The JSON-RPC envelope (``jsonrpc``, ``id`` shape, result xor error) is checked
here directly because the schema's root ``anyOf`` accepts almost anything for
a response (``{}`` matches several result types) and gives useless messages.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

REPO_ROOT = Path(__file__).resolve().parents[2]
SDK_DIR = REPO_ROOT / "conformance" / "node_modules" / "@agentclientprotocol" / "sdk"
SDK24_DIR = REPO_ROOT / "conformance" / "node_modules" / "sdk24"
SCHEMA_FILES = {
    1: SDK24_DIR / "schema" / "v1" / "schema.json",
    2: SDK_DIR / "schema" / "v2" / "schema.unstable.json",
}
NPM_HINT = "run `npm ci --prefix conformance` from the repo root (needs Node 20+)"

# Handling side of definitions the *agent* may send: requests/notifications are
# handled by the client; responses answer requests the agent handles.
_SENT_KIND_SIDES = {
    "request": ("client", "both"),
    "notification": ("client", "both", "protocol"),
    "response": ("agent", "both"),
}
_KIND_SUFFIX = {
    "request": "Request",
    "notification": "Notification",
    "response": "Response",
}


class SchemaFilesMissingError(RuntimeError):
    """The SDK package (and therefore the schemas) is not installed."""


# --------------------------------------------------------------------------
# Formats. jsonschema only checks formats when given a FormatChecker, and its
# default one silently skips date-time/uri when optional libraries are absent.


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
    r"(?:[Zz]|[+-](\d{2}):(\d{2}))$"
)


def is_rfc3339_datetime(value: object) -> bool:
    """Strict RFC 3339 date-time: the offset (``Z`` or ``±hh:mm``) is required.

    A naive ``datetime.now().isoformat()`` fails here, as it does in the v2
    TS client (which then silently drops the field).
    """
    if not isinstance(value, str):
        return True  # formats only constrain strings; "type" handles the rest
    m = _RFC3339.match(value)
    if not m:
        return False
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    try:
        date(year, month, day)
    except ValueError:
        return False
    if hour > 23 or minute > 59 or second > 60:  # 60 = leap second
        return False
    off_h, off_m = m.group(8), m.group(9)
    return off_h is None or (int(off_h) <= 23 and int(off_m) <= 59)


def _int_format(lo: int, hi: int):
    def check(value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True  # not a number: leave it to "type"
        if isinstance(value, float) and not value.is_integer():
            return False
        return lo <= value <= hi

    return check


def _is_double(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    return math.isfinite(value)


_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def _is_uri(value: object) -> bool:
    # Deliberately light: an absolute URI needs a scheme. (rfc3987 is absent.)
    return not isinstance(value, str) or bool(_URI_SCHEME.match(value))


def make_format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker()
    checker.checks("date-time")(is_rfc3339_datetime)
    checker.checks("uri")(_is_uri)
    checker.checks("double")(_is_double)
    for name, (lo, hi) in {
        "int32": (-(2**31), 2**31 - 1),
        "int64": (-(2**63), 2**63 - 1),
        "uint16": (0, 2**16 - 1),
        "uint32": (0, 2**32 - 1),
        "uint64": (0, 2**64 - 1),
    }.items():
        checker.checks(name)(_int_format(lo, hi))
    return checker


FORMAT_CHECKER = make_format_checker()


# --------------------------------------------------------------------------
# Schema loading and definition lookup.


def schema_path(version: int) -> Path:
    if version not in SCHEMA_FILES:
        raise ValueError(f"unknown ACP protocol version {version!r}; expected 1 or 2")
    path = SCHEMA_FILES[version]
    if not path.is_file():
        raise SchemaFilesMissingError(
            f"ACP v{version} schema not found at {path}. The conformance kit needs the "
            f"pinned @agentclientprotocol/sdk package: {NPM_HINT}."
        )
    return path


@cache
def load_schema(version: int) -> dict[str, Any]:
    return json.loads(schema_path(version).read_text(encoding="utf-8"))


@cache
def _definition_index(version: int) -> dict[tuple[str, str], str]:
    """(kind, method) -> $defs name, for every message kind an agent may send."""
    index: dict[tuple[str, str], str] = {}
    for name, body in load_schema(version)["$defs"].items():
        method, side = body.get("x-method"), body.get("x-side")
        if not method:
            continue
        for kind, sides in _SENT_KIND_SIDES.items():
            if side in sides and name.endswith(_KIND_SUFFIX[kind]):
                index[(kind, method)] = name
    return index


def definition_for(version: int, kind: str, method: str) -> str | None:
    """Name of the $defs entry for an agent-sent ``kind`` of ``method``."""
    return _definition_index(version).get((kind, method))


@cache
def _validator(version: int, definition: str) -> Draft202012Validator:
    schema = load_schema(version)
    if definition not in schema["$defs"]:
        raise KeyError(f"ACP v{version} schema has no definition {definition!r}")
    wrapper = {
        "$schema": schema["$schema"],
        "$defs": schema["$defs"],
        "$ref": f"#/$defs/{definition}",
    }
    return Draft202012Validator(wrapper, format_checker=FORMAT_CHECKER)


def _describe(err: ValidationError) -> str:
    where = "/".join(str(p) for p in err.absolute_path) or "<root>"
    message = err.message if len(err.message) <= 300 else err.message[:300] + "…"
    return f"at {where}: {message}"


# "not" marks the open unions' catch-all variant, which only fails because the
# tag is a known one; like a const mismatch it says "not the variant you meant".
_TAG_MISMATCH = ("const", "enum", "not")


def _explain(err: ValidationError) -> list[str]:
    """Leaf reasons of an error, focusing ``anyOf``/``oneOf`` on the branches
    whose discriminator (a ``const``/``enum``) matched: for a tagged union like
    ``SessionUpdate`` that is the variant the sender meant, e.g. "messageId is
    a required property" instead of "not valid under any of the given schemas".
    """
    if not err.context:
        return [_describe(err)]
    branches: dict[object, list[ValidationError]] = {}
    for sub in err.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = [subs for subs in branches.values() if not any(s.validator in _TAG_MISMATCH for s in subs)]
    if not meant:  # no variant's tag matched: the plain message says it best
        return [_describe(err)]
    return [reason for subs in meant for sub in subs for reason in _explain(sub)]


def _short(obj: Any, limit: int = 600) -> str:
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "…"


def check_definition(version: int, definition: str, instance: Any, context: str) -> None:
    """Validate ``instance`` against ``$defs[definition]`` or raise AssertionError."""
    errors = list(_validator(version, definition).iter_errors(instance))
    if not errors:
        return
    best = best_match(errors)
    ordered = [best, *(e for e in errors if e is not best)]
    reasons = list(dict.fromkeys(r for e in ordered for r in _explain(e)))
    lines = [
        f"ACP v{version} {context}: does not match schema definition {definition!r}",
        *(f"  - {r}" for r in reasons[:6]),
        f"  instance: {_short(instance)}",
    ]
    raise AssertionError("\n".join(lines))


# --------------------------------------------------------------------------
# Public API.


def _is_extension(method: str) -> bool:
    # `_`-prefixed methods are ACP extensions: their payload is free-form.
    return method.startswith("_")


def validate_outgoing(version: int, message: dict[str, Any], request_method: str | None = None) -> None:
    """Assert that one JSON-RPC message *sent by term2* is valid ACP ``version``.

    ``request_method`` is required for success responses (the method of the
    request being answered; track it by id, see :class:`SchemaRecorder`).
    Raises AssertionError with a readable explanation.
    """
    load_schema(version)  # fail early with the npm hint if not installed
    if not isinstance(message, dict):  # AssertionError on purpose: a test failure
        raise AssertionError(f"ACP v{version}: message must be a JSON object, got {_short(message)}")
    if message.get("jsonrpc") != "2.0":
        raise AssertionError(f'ACP v{version}: "jsonrpc" must be "2.0" in {_short(message)}')

    if "method" in message:
        method = message["method"]
        if not isinstance(method, str):
            raise AssertionError(f"ACP v{version}: method must be a string in {_short(message)}")
        kind = "request" if "id" in message else "notification"
        if kind == "request":
            check_definition(version, "RequestId", message["id"], f"{method} request id")
        if _is_extension(method):
            return
        definition = definition_for(version, kind, method)
        if definition is None:
            raise AssertionError(
                f"ACP v{version}: {method!r} is not an agent->client {kind} in the schema: {_short(message)}"
            )
        check_definition(version, definition, message.get("params"), f"{kind} {method!r} params")
        return

    if "id" not in message:
        raise AssertionError(f"ACP v{version}: response without id: {_short(message)}")
    check_definition(version, "RequestId", message["id"], "response id")
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        raise AssertionError(f"ACP v{version}: a response needs exactly one of result/error: {_short(message)}")
    if has_error:
        check_definition(version, "Error", message["error"], f"error response to {request_method!r}")
        return
    if request_method is None:
        raise AssertionError(
            f"ACP v{version}: cannot validate result of id {message['id']!r} without the "
            f"request method (unknown or already-answered id?): {_short(message)}"
        )
    if _is_extension(request_method):
        return
    definition = definition_for(version, "response", request_method)
    if definition is None:
        raise AssertionError(f"ACP v{version}: no response definition for {request_method!r}")
    check_definition(version, definition, message["result"], f"{request_method!r} result")


class SchemaRecorder:
    """Validate a conversation as it happens, tracking request id -> method.

    Feed what the client sent with :meth:`client_sent` (to learn the methods of
    requests the agent will answer) and what term2 sent with :meth:`agent_sent`
    (validated). v2 lines may be JSON-RPC batches (arrays); v1 forbids them.
    """

    def __init__(self, version: int) -> None:
        self.version = version
        self.pending: dict[Any, str] = {}
        self.validated = 0
        load_schema(version)

    def _items(self, message: Any, who: str) -> list[Any]:
        if isinstance(message, list):
            if self.version == 1:
                raise AssertionError(f"ACP v1 forbids batches, but the {who} sent one: {_short(message)}")
            return message
        return [message]

    def client_sent(self, message: Any) -> None:
        for item in self._items(message, "client"):
            if isinstance(item, dict) and isinstance(item.get("method"), str) and "id" in item:
                self.pending[_id_key(item["id"])] = item["method"]

    def agent_sent(self, message: Any) -> None:
        for item in self._items(message, "agent"):
            method = None
            if isinstance(item, dict) and "method" not in item and "id" in item:
                method = self.pending.pop(_id_key(item["id"]), None)
            validate_outgoing(self.version, item, method)
            self.validated += 1

    def agent_line(self, line: str) -> None:
        """Validate one raw stdout line of term2 (must be a single JSON value)."""
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"agent stdout line is not JSON ({exc}): {line[:300]!r}") from exc
        self.agent_sent(message)


def _id_key(request_id: Any) -> tuple[str, Any]:
    # 1 and "1" are different JSON-RPC ids; True would collide with 1 in a dict.
    return (type(request_id).__name__, request_id)


def iter_transcript(path: Path) -> Iterator[tuple[str, str]]:
    """Yield (direction, raw line) from a transcript written by the Node clients.

    Each transcript line is ``{"dir": "agent" | "client", "line": "<raw text>"}``;
    ``agent`` = a line term2 wrote on stdout, ``client`` = a line the SDK
    client wrote to term2's stdin.
    """
    for n, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.strip():
            continue
        entry = json.loads(text)
        if entry.get("dir") not in ("agent", "client") or not isinstance(entry.get("line"), str):
            raise ValueError(f"{path}:{n}: malformed transcript entry {text[:200]!r}")
        yield entry["dir"], entry["line"]


def validate_transcript(version: int, path: Path | str) -> SchemaRecorder:
    """Schema-validate every agent line of a transcript; return the recorder."""
    recorder = SchemaRecorder(version)
    for direction, line in iter_transcript(Path(path)):
        if direction == "client":
            recorder.client_sent(json.loads(line))
        else:
            recorder.agent_line(line)
    return recorder


def validate_all(version: int, messages: Iterable[tuple[str, Any]]) -> SchemaRecorder:
    """Like :func:`validate_transcript` for in-memory ("client"|"agent", message) pairs."""
    recorder = SchemaRecorder(version)
    for direction, message in messages:
        (recorder.client_sent if direction == "client" else recorder.agent_sent)(message)
    return recorder
