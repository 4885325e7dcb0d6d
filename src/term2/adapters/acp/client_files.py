"""The client files port over ACP v1: `fs/read_text_file` and `fs/write_text_file` requests to the editor.

Only what the client advertised at `initialize` is ever sent (a client that
did not offer a method gets no request for it). Any error answer means the
client did not act, and says so as the port's error, with the client's own
code and words for the log; a disconnect is the one case where a write's
fate is unknown. Any answer without an error counts as a done write: the
result carries nothing else, and some clients answer `null`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from term2.adapters.acp.errors import ConnectionClosed, RpcError
from term2.adapters.acp.negotiation import ClientCaps
from term2.ports.client_files import ClientFileError

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1


class Requester(Protocol):
    async def request(self, method: str, params: Mapping[str, object]) -> Any: ...


class AcpClientFiles:
    """One per connection; the session each request belongs to is named in it."""

    def __init__(self, connection: Requester, caps: ClientCaps) -> None:
        self._connection = connection
        self._caps = caps

    @property
    def reads(self) -> bool:
        return self._caps.fs_read

    @property
    def writes(self) -> bool:
        return self._caps.fs_write

    async def read_text(self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        if not self.reads:
            raise ClientFileError("the client does not serve fs/read_text_file")
        params: v1.ReadTextFileRequest = {"sessionId": session_id, "path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = await self._ask("fs/read_text_file", params, path)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ClientFileError(f"the client's answer to reading {path} holds no text")
        return content

    async def write_text(self, session_id: str, path: str, content: str) -> None:
        if not self.writes:
            raise ClientFileError("the client does not serve fs/write_text_file")
        params: v1.WriteTextFileRequest = {"sessionId": session_id, "path": path, "content": content}
        await self._ask("fs/write_text_file", params, path)

    async def _ask(self, method: str, params: Mapping[str, object], path: str) -> Any:
        try:
            return await self._connection.request(method, params)
        except ConnectionClosed:
            gone = f"the client went away before answering {method} for {path}"
            raise ClientFileError(gone, answered=False) from None
        except RpcError as err:
            refused = f"the client answered {method} for {path} with error {err.code}: {err.message}"
            raise ClientFileError(refused) from None
