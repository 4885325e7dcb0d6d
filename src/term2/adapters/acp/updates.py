"""The update sink over a JSON-RPC connection: events rendered for the negotiated version."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from term2.ports.updates import SessionEvent

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1, v2


class Notifier(Protocol):
    async def notify(self, method: str, params: Mapping[str, object]) -> None: ...


class Renderer(Protocol):
    """Builds whole `session/update` params, typed by each version's renderer."""

    def notifications(
        self, session_id: str, event: SessionEvent, replay: bool
    ) -> Sequence[v1.SessionNotification] | Sequence[v2.UpdateSessionNotification]: ...


class AcpUpdateSink:
    def __init__(self, notifier: Notifier, renderer: Renderer) -> None:
        self._notifier = notifier
        self._renderer = renderer

    async def send(self, session_id: str, event: SessionEvent) -> None:
        await self._emit(session_id, event, replay=False)

    async def replay(self, session_id: str, event: SessionEvent) -> None:
        await self._emit(session_id, event, replay=True)

    async def _emit(self, session_id: str, event: SessionEvent, replay: bool) -> None:
        for params in self._renderer.notifications(session_id, event, replay):
            await self._notifier.notify("session/update", params)
