"""`term2 exec` into a pipe or a file without `--json`: stdout is the final answer's text and nothing else.

The final answer is the last message the model wrote (what it says after its
last tool call); thinking, tool calls and notices are not part of it. A
turn that did not end normally says why on stderr, and a failed one leaves
stdout empty: its error is not an answer.
"""

from __future__ import annotations

from typing import TextIO

from term2.adapters.terminal.drawing import shown
from term2.adapters.terminal.view import Ended
from term2.domain.turn import StopReason
from term2.ports.updates import MessageChunk, SessionEvent, WholeMessage


class FinalTextView:
    def __init__(self, out: TextIO, errors: TextIO) -> None:
        self._out = out
        self._errors = errors
        self._message_id: str | None = None
        self._text: list[str] = []

    async def send(self, session_id: str, event: SessionEvent) -> None:
        if isinstance(event, (MessageChunk, WholeMessage)) and not event.thought:
            if event.message_id != self._message_id:
                self._message_id, self._text = event.message_id, []
            self._text.append(event.text)

    def notice(self, text: str) -> None:
        self._errors.write(f"term2: {shown(text)}\n")  # stderr is often the terminal
        self._errors.flush()

    def finish(self, ended: Ended) -> None:
        if ended.stop_reason is StopReason.ERROR:
            self.notice(f"the turn failed: {ended.error}")
            return
        answer = "".join(self._text)
        if answer:
            self._out.write(answer if answer.endswith("\n") else answer + "\n")
            self._out.flush()
        if ended.stop_reason is not StopReason.END_TURN:
            self.notice(f"the turn stopped: {ended.stop_reason.value}")
