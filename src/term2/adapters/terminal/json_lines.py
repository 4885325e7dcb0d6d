"""`term2 exec --json`: the turn's update stream, one JSON object a line, then the result.

Each update line is `{"type": "update", "sessionId": …, "update": …}` where
`update` is what an ACP client is sent as `session/update`'s `update`; the
composition root hands in the ACP v2 renderer (and its `Usage`), so a script
reads exactly the shapes an editor does (ADR 0029). The last line is `{"type": "result", …}`.
Nothing else is written to this stream; lines are ASCII (`\\u` escapes), so a
lone surrogate in a model's text cannot make one unreadable.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from term2.adapters.terminal.drawing import shown
from term2.adapters.terminal.final_text import FinalAnswer
from term2.adapters.terminal.view import Ended
from term2.domain.turn import StopReason
from term2.domain.usage import CURRENCY
from term2.ports.updates import SessionEvent, Spent

RenderUpdate = Callable[[SessionEvent], Sequence[Mapping[str, Any]]]
RenderUsage = Callable[[Spent], Mapping[str, Any]]  # the ACP renderer's own `Usage`, handed in by the root


def result_of(ended: Ended, usage: RenderUsage, text: str = "", duration_ms: int = 0) -> dict[str, Any]:
    """The last line: how the turn ended, the answer's text, the session, how long it took, how many model
    requests it made (`turns`), and its tokens keyed as ACP's `Usage` with the turn's and the session's cost;
    `usage` is null and `usageReported` false when the server counted nothing (issue 33).
    A script needs nothing else to use the answer or continue the session (`--resume <sessionId>`)."""
    stop = "error" if ended.stop_reason is StopReason.ERROR else ended.stop_reason.value
    spent = ended.spent
    counts = None
    if spent is not None and spent.reported:  # never zeros passed off as measured: no count, no `usage`
        cost = {"turn": spent.turn_cost, "session": spent.session_cost, "currency": CURRENCY}
        counts = {**usage(spent), "cost": cost}
    result: dict[str, Any] = {
        "type": "result",
        "stopReason": stop,
        "sessionId": ended.session_id if ended.kept else None,
        "text": text,
        "durationMs": duration_ms,
        "turns": spent.requests if spent is not None else 0,
        "usage": counts,
        "usageReported": spent is not None and spent.reported,
        "refusedToolCalls": ended.refused,  # > 0 with end_turn: exit status 6
    }
    if ended.error is not None:
        result["error"] = ended.error
    return result


class JsonLinesView:
    def __init__(self, out: TextIO, render: RenderUpdate, errors: TextIO, usage: RenderUsage) -> None:
        self._out = out
        self._render = render
        self._errors = errors
        self._usage = usage
        self._answer = FinalAnswer()
        self._started = time.monotonic()

    def _line(self, obj: Mapping[str, Any]) -> None:
        self._out.write(json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n")
        self._out.flush()

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self._answer.follow(event)
        for update in self._render(event):
            self._line({"type": "update", "sessionId": session_id, "update": update})

    def notice(self, text: str) -> None:
        self._errors.write(f"term2: {shown(text)}\n")  # stderr is often the terminal
        self._errors.flush()

    def finish(self, ended: Ended) -> None:
        elapsed = round((time.monotonic() - self._started) * 1000)
        self._line(result_of(ended, self._usage, self._answer.text(ended), elapsed))
