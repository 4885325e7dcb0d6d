"""A JSON-RPC Dispatcher double: handlers looked up in plain tables.

The connection's contract tests need a dispatcher whose every answer (which
methods exist, run inline, may be batched) is set per test, with no ACP
session logic behind it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[[Any], Awaitable[Any]]


@dataclass
class TableDispatcher:
    requests: dict[str, Handler] = field(default_factory=dict)
    notifications: dict[str, Handler] = field(default_factory=dict)
    inline: frozenset[str] = frozenset()
    batches: bool = False
    unbatchable: frozenset[str] = frozenset()

    def request_handler(self, method: str) -> Handler | None:
        return self.requests.get(method)

    def notification_handler(self, method: str) -> Handler | None:
        return self.notifications.get(method)

    def is_inline(self, method: str) -> bool:
        return method in self.inline

    def batches_allowed(self) -> bool:
        return self.batches

    def batchable(self, method: str) -> bool:
        return method not in self.unbatchable
