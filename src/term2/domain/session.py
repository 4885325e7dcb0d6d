"""A session: one conversation bound to one canonical workspace root."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from term2.domain.truncation import ellipsize


class SessionState(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    CLOSED = "closed"


TITLE_LIMIT = 80


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    cwd: str
    created_at: datetime
    updated_at: datetime
    title: str | None = None
    state: SessionState = SessionState.IDLE

    def touched(self, now: datetime) -> Session:
        return replace(self, updated_at=now)

    def titled_from(self, prompt_text: str) -> Session:
        """The first prompt names the session; later prompts leave the name alone."""
        if self.title:
            return self
        line = " ".join(prompt_text.split())
        if not line:
            return self
        return replace(self, title=ellipsize(line, TITLE_LIMIT))

    def with_state(self, state: SessionState) -> Session:
        return replace(self, state=state)


@dataclass(frozen=True, slots=True)
class SessionPage:
    sessions: tuple[Session, ...]
    next_cursor: str | None
