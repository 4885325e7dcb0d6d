"""What every way of showing a turn (terminal, JSON lines, the bare answer) offers the exec driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from term2.domain.turn import StopReason
from term2.ports.updates import SessionEvent, Spent


@dataclass(frozen=True, slots=True)
class Ended:
    """How the one turn ended, for the view's closing words."""

    session_id: str
    stop_reason: StopReason
    error: str | None = None
    spent: Spent | None = None
    kept: bool = True  # False: the session was removed (new, and its turn never reached a model)
    refused: int = 0  # tool calls the gate refused during the turn


class ExecView(Protocol):
    """An `UpdateSink` that can also say something to the user and close the run."""

    async def send(self, session_id: str, event: SessionEvent) -> None: ...

    def notice(self, text: str) -> None:
        """A line for the person at the terminal; never on a script's stdout."""

    def finish(self, ended: Ended) -> None: ...
