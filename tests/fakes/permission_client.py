"""The client's side of session/request_permission, for driving AcpApprover without a peer.

It stands where AcpApprover expects its JsonRpcConnection; `during` runs while
the request is pending, so a test can change the session under a question
the client is about to answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class GrantingClient:
    """Answers every request with its allow-once option; remembers (method, params) of each."""

    during: Callable[[], object] = lambda: None
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.sent.append((method, params))
        self.during()
        option = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
