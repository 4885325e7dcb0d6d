"""An UpdateSink double: the session updates a use case sent, in order, kept for asserts."""

from __future__ import annotations

from dataclasses import dataclass, field

from term2.ports.updates import SessionEvent


@dataclass
class RecordingSink:
    events: list[SessionEvent] = field(default_factory=list)

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self.events.append(event)
