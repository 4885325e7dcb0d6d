"""A session: one conversation bound to its canonical workspace roots (`cwd` and any additional ones)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from term2.domain.approval import ApprovalMode
from term2.domain.truncation import ellipsize
from term2.domain.visible_text import visible


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
    # The model and effort chosen for this session (ADR 0043); model None: the launcher's (a session stored
    # before sessions kept a model), effort None: none sent, the model's own default.
    model: str | None = None
    effort: str | None = None
    mode: ApprovalMode = ApprovalMode.ASK  # which questions the gate skips (ADR 0044); ask in older sessions
    # The editor's additional directories (ACP v1), canonical, as last opened: each a root like `cwd`. Reported
    # by session/list; a load or resume names its own list, which replaces this one (ADR 0051).
    additional_directories: tuple[str, ...] = ()

    def touched(self, now: datetime) -> Session:
        return replace(self, updated_at=now)

    def titled_from(self, prompt_text: str) -> Session:
        """The first prompt names the session; later prompts leave the name alone."""
        if self.title:
            return self
        line = " ".join(prompt_text.split())  # one line, whatever breaks the prompt held
        if not line:
            return self
        return replace(self, title=ellipsize(visible(line), TITLE_LIMIT))  # nothing in it acts on the display

    def with_state(self, state: SessionState) -> Session:
        return replace(self, state=state)

    def with_model(self, model: str, effort: str | None) -> Session:
        return replace(self, model=model, effort=effort)

    def with_mode(self, mode: ApprovalMode) -> Session:
        return replace(self, mode=mode)

    def with_directories(self, directories: tuple[str, ...]) -> Session:
        return replace(self, additional_directories=directories)

    @property
    def roots(self) -> tuple[str, ...]:
        return (self.cwd, *self.additional_directories)


@dataclass(frozen=True, slots=True)
class SessionPage:
    sessions: tuple[Session, ...]
    next_cursor: str | None
