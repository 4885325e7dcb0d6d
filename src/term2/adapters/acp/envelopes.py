"""JSON-RPC envelopes as term2 reads and writes them: which ids it accepts, how a reply is encoded.

The connection and the launcher's early `initialize` answer (negotiation.py)
must agree on both, and the early answer runs before anyio or structlog are
loaded (ADR 0003): so this module uses the standard library only, and the wire
types for mypy only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from term2.adapters.acp.errors import RpcError
    from term2.adapters.acp.wire_types.v1 import Error, RequestId

ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # ACP's RequestId is an int64


class ResultReply(TypedDict):
    jsonrpc: Literal["2.0"]
    id: RequestId
    result: object


class ErrorReply(TypedDict):
    jsonrpc: Literal["2.0"]
    id: RequestId
    error: Error


def valid_id(value: object) -> bool:
    """A string, an int64 or null: what ACP's RequestId allows (a bool is not an int here)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return ID_MIN <= value <= ID_MAX
    return value is None or isinstance(value, str)


def result_reply(request_id: RequestId, result: object) -> ResultReply:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_reply(request_id: RequestId, err: RpcError) -> ErrorReply:
    return {"jsonrpc": "2.0", "id": request_id, "error": err.to_wire()}


def encode(message: Mapping[str, object] | Sequence[Mapping[str, object]]) -> bytes:
    """One compact line's worth of JSON (no newline); a batch is a list of replies."""
    # ASCII escapes keep lone surrogates from a client's input encodable.
    return json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode("ascii")
