"""JSON-RPC error codes and the exception that carries one to the wire."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types.v1 import Error  # v2 defines the same error object

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
SERVER_BUSY = -32000  # term2's spec: a second foreground prompt for a session
AUTH_REQUIRED = -32000  # v1 Authentication: the agent needs credentials before it can serve (same code)


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: object | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> Error:
        error: Error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ConnectionClosed(Exception):
    """The peer went away before answering our request."""
