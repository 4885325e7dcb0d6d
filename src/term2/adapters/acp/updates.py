"""The update sink over a JSON-RPC connection: events rendered for the negotiated version."""

from __future__ import annotations

from typing import Any, Protocol

from term2.ports.updates import SessionEvent


class Notifier(Protocol):
    async def notify(self, method: str, params: dict[str, Any]) -> None: ...


class Renderer(Protocol):
    def render(self, event: SessionEvent, replay: bool = False) -> list[dict[str, Any]]: ...


class AcpUpdateSink:
    def __init__(self, notifier: Notifier, renderer: Renderer) -> None:
        self._notifier = notifier
        self._renderer = renderer

    async def send(self, session_id: str, event: SessionEvent) -> None:
        await self._emit(session_id, event, replay=False)

    async def replay(self, session_id: str, event: SessionEvent) -> None:
        await self._emit(session_id, event, replay=True)

    async def _emit(self, session_id: str, event: SessionEvent, replay: bool) -> None:
        for update in self._renderer.render(event, replay=replay):
            await self._notifier.notify("session/update", {"sessionId": session_id, "update": update})
