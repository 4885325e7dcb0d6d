"""ACP version negotiation and the `initialize` result, with the standard library only.

Both the server and the launcher's early answer use this, so there is one
definition of what term2 advertises on each version. A refusal is the
connection's own RpcError, and the early answer accepts ids and encodes its
reply with the connection's helpers (envelopes.py), so the two cannot drift.
The results are typed with the schemas' definitions, imported for mypy only:
this module is on the start-up path, which must not load them, nor anyio
(ADR 0003, ADR 0012).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from term2.adapters.acp.auth_methods import auth_methods
from term2.adapters.acp.envelopes import encode, result_reply, valid_id
from term2.adapters.acp.errors import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1, v2

    Negotiated = tuple[Literal[1], v1.InitializeResponse] | tuple[Literal[2], v2.InitializeResponse]


def negotiate(params: Any, v2_enabled: bool, info: Mapping[str, str], images: bool = False) -> Negotiated:
    """Pick one version for the connection and build the matching `initialize` result.

    `images`: the launcher's model takes images, so v1 advertises `promptCapabilities.image`
    (a session switched to a model without vision refuses an image prompt by name, ADR 0046).

    Raises RpcError (invalid params) when no version can be picked.
    """
    requested = params.get("protocolVersion") if isinstance(params, dict) else None
    if not isinstance(requested, int) or isinstance(requested, bool):
        raise RpcError(INVALID_PARAMS, "Invalid params for initialize: protocolVersion must be an integer")
    if requested < 1:
        raise RpcError(INVALID_PARAMS, f"Unsupported protocol version {requested}: term2 speaks ACP 1 and 2")
    implementation: v1.Implementation = {"name": info["name"], "title": info["title"], "version": info["version"]}
    if requested >= 2 and v2_enabled:
        v2_result: v2.InitializeResponse = {
            "protocolVersion": 2,
            "info": implementation,
            "capabilities": {"session": {}},
        }
        return 2, v2_result
    v1_result: v1.InitializeResponse = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": images, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {
                "list": {},
                "resume": {},
                "close": {},
                "delete": {},
                "additionalDirectories": {},
            },
            "auth": {"logout": {}},
        },
        # terminal login only for a client that runs one; the agent method otherwise (ADR 0047)
        "authMethods": auth_methods(params.get("clientCapabilities")),
        "agentInfo": implementation,
    }
    return 1, v1_result


@dataclass(frozen=True, slots=True)
class ClientCaps:
    """What the client said it can do, as far as term2 acts on it; all off for a client that said nothing.

    `fs_read`/`fs_write`: it serves `fs/read_text_file` / `fs/write_text_file` (v1 `clientCapabilities.fs`).
    `terminal_output`: it renders display-only terminals from tool-call `_meta` (Zed's
    `clientCapabilities._meta.terminal_output`). `compaction`: see `client_takes_compaction`.
    """

    compaction: bool = False
    notices: bool = False  # v1 `clientCapabilities.session.notices`: news goes as `notice` updates (ADR 0046)
    fs_read: bool = False
    fs_write: bool = False
    terminal_output: bool = False


def client_caps(params: Any, version: int) -> ClientCaps:
    """The client's capabilities from `initialize` params; v2 keeps to its page (none of the v1 ones)."""
    compaction = client_takes_compaction(params, version)
    if version != 1:
        return ClientCaps(compaction=compaction)
    caps = _object(params.get("clientCapabilities") if isinstance(params, dict) else None)
    fs, meta = _object(caps.get("fs")), _object(caps.get("_meta"))
    return ClientCaps(
        compaction=compaction,
        notices=isinstance(_object(caps.get("session")).get("notices"), dict),
        fs_read=fs.get("readTextFile") is True,
        fs_write=fs.get("writeTextFile") is True,
        terminal_output=meta.get("terminal_output") is True,
    )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def client_takes_compaction(params: Any, version: int) -> bool:
    """Whether the client may be sent `compaction_update`s.

    v1 allows them only to a client that advertised
    `clientCapabilities.session.compaction` (an object; null or absent means
    no); the v2 draft has no such capability and always allows them.
    """
    if version == 2:
        return True
    caps = params.get("clientCapabilities") if isinstance(params, dict) else None
    session = caps.get("session") if isinstance(caps, dict) else None
    return isinstance(session, dict) and isinstance(session.get("compaction"), dict)


def early_answer(
    line: bytes, v2_enabled: bool, info: Mapping[str, str], images: bool = False
) -> tuple[int, bytes, ClientCaps] | None:
    """Answer a first line that is a well-formed `initialize` request, before the server exists.

    Anything else (malformed JSON, another method, bad params) returns None and
    is left to the full server, which owns every error reply.
    """
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or message.get("method") != "initialize":
        return None
    request_id = message.get("id")
    if request_id is None or not valid_id(request_id):  # no id, or null: the server answers it
        return None
    try:
        version, result = negotiate(message.get("params"), v2_enabled, info, images)
    except RpcError:
        return None
    reply = encode(result_reply(request_id, result)) + b"\n"
    return version, reply, client_caps(message.get("params"), version)
