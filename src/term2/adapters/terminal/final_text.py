"""`term2 exec` into a pipe or a file without `--json`: stdout is the final answer's text and nothing else.

The final answer is the last message the model wrote (what it says after its
last tool call); thinking, tool calls and notices are not part of it. A
turn that did not end normally says why on stderr, and a failed one leaves
stdout empty: its error is not an answer.
"""

from __future__ import annotations

import os
from typing import TextIO

from term2.adapters.terminal.drawing import shown
from term2.adapters.terminal.view import Ended, ExecView
from term2.domain.turn import StopReason
from term2.ports.updates import MessageChunk, SessionEvent, WholeMessage


class FinalAnswer:
    """The last message the model wrote, followed through the update stream (each view that needs it keeps one)."""

    def __init__(self) -> None:
        self._message_id: str | None = None
        self._text: list[str] = []

    def follow(self, event: SessionEvent) -> None:
        if isinstance(event, (MessageChunk, WholeMessage)) and not event.thought:
            if event.message_id != self._message_id:
                self._message_id, self._text = event.message_id, []
            self._text.append(event.text)

    def text(self, ended: Ended) -> str:
        """The answer; none for a failed turn, whose last message is term2's report of the failure."""
        return "" if ended.stop_reason is StopReason.ERROR else "".join(self._text)


class FinalTextView:
    def __init__(self, out: TextIO, errors: TextIO) -> None:
        self._out = out
        self._errors = errors
        self._answer = FinalAnswer()

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self._answer.follow(event)

    def notice(self, text: str) -> None:
        self._errors.write(f"term2: {shown(text)}\n")  # stderr is often the terminal
        self._errors.flush()

    def finish(self, ended: Ended) -> None:
        if ended.stop_reason is StopReason.ERROR:
            self.notice(f"the turn failed: {ended.error}")
            return
        answer = self._answer.text(ended)
        if answer:
            self._out.write(answer if answer.endswith("\n") else answer + "\n")
            self._out.flush()
        if ended.stop_reason is not StopReason.END_TURN:
            self.notice(f"the turn stopped: {ended.stop_reason.value}")


class AnswerToFile:
    """`-o FILE`: whichever way the turn is shown, its final answer is also written to FILE (as codex's `-o`).

    Written whole through a temporary file and a rename, so a script reading
    FILE never sees half an answer; a failed turn writes nothing.
    """

    def __init__(self, view: ExecView, path: str) -> None:
        self._view = view
        self._path = path
        self._answer = FinalAnswer()

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self._answer.follow(event)
        await self._view.send(session_id, event)

    def notice(self, text: str) -> None:
        self._view.notice(text)

    def finish(self, ended: Ended) -> None:
        self._view.finish(ended)
        if ended.stop_reason is StopReason.ERROR:
            return
        answer = self._answer.text(ended)
        partial = f"{self._path}.term2-{os.getpid()}.tmp"
        try:
            with open(partial, "w", encoding="utf-8", errors="replace") as handle:
                handle.write(answer if not answer or answer.endswith("\n") else answer + "\n")
            os.replace(partial, self._path)
        except OSError as exc:
            self._view.notice(f"could not write the answer to {self._path}: {exc.strerror or exc}")
