"""Progress on stderr while `term2 exec` waits on the model, so a slow model is not a blank screen.

A wrapper around the script views (the final answer, `--json`): stdout is
theirs and stays byte for byte what it was; this writes to stderr only. With
stderr a terminal, one status line (elapsed time and tokens so far) is drawn
in place and erased before anything else is passed on, so every other line
lands on a clean row. Otherwise a plain line at most every PLAIN_EVERY_S
seconds, as a CI log keeps it. Waiting means: a model request is out and has
not answered yet (from the turn's start, or from the moment the last tool call
ended, to the first text); a question on the terminal holds it off.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

import anyio

from term2.adapters.terminal.view import Ended, ExecView
from term2.ports.updates import (
    MessageChunk,
    Notice,
    SessionEvent,
    StateChanged,
    ToolCallChanged,
    UsageChanged,
    WholeMessage,
)

PLAIN_EVERY_S = 5.0  # a CI log gets one line per this many seconds of waiting, no more
REDRAW_EVERY_S = 0.5  # the terminal's line is redrawn this often
ERASE = "\r\x1b[2K"


class Progress:
    """An `ExecView` that passes everything on to `inner` and says, on stderr, how long the model has been awaited."""

    def __init__(
        self, inner: ExecView, errors: TextIO, terminal: bool, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._inner = inner
        self._errors = errors
        self._terminal = terminal
        self._clock = clock
        self._since: float | None = None  # when the wait began; None: not waiting on the model
        self._running: set[str] = set()
        self._tokens: int | None = None
        self._drawn = False
        self._said_at: float | None = None  # the last plain line's time
        self._held = 0  # questions on the terminal: nothing is drawn while one waits

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self._erase()
        self._follow(event)
        if isinstance(event, Notice) and said_on_stderr(event):  # a retry: one plain line, whatever the view does
            self._inner.notice(event.text)
        await self._inner.send(session_id, event)

    def notice(self, text: str) -> None:
        self._erase()
        self._inner.notice(text)

    def finish(self, ended: Ended) -> None:
        self._since = None
        self._erase()
        self._inner.finish(ended)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing drawn while a question is asked (it may be on this very terminal)."""
        self._erase()
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    async def run(self) -> None:
        """Redraw (terminal) or say (plain lines) while waiting; cancelled with the run."""
        while True:
            await anyio.sleep(REDRAW_EVERY_S if self._terminal else 1.0)
            self.tick()

    def tick(self) -> None:
        if self._since is None or self._held:
            return
        now = self._clock()
        waited = int(now - self._since)
        tokens = f" · {self._tokens:,} tokens" if self._tokens else ""
        if self._terminal:
            self._errors.write(f"{ERASE}term2: waiting for the model… {waited} s{tokens}")
            self._errors.flush()
            self._drawn = True
        elif now - (self._said_at if self._said_at is not None else self._since) >= PLAIN_EVERY_S:
            self._said_at = now
            self._errors.write(f"term2: waiting for the model… {waited} s{tokens}\n")
            self._errors.flush()

    def _follow(self, event: SessionEvent) -> None:
        if isinstance(event, UsageChanged):
            self._tokens = event.used
            return
        if isinstance(event, (MessageChunk, WholeMessage)):
            self._stop()  # the model is answering: no longer waiting for it
            return
        if isinstance(event, StateChanged):
            self._start() if event.state == "running" else self._stop()
            return
        if isinstance(event, ToolCallChanged):
            call_id = event.call.tool_call_id
            if event.call.status.is_final:
                self._running.discard(call_id)
                if not self._running:
                    self._start()  # the results go back to the model: the next request
            else:
                self._running.add(call_id)
                self._stop()

    def _start(self) -> None:
        if self._since is None:
            self._since = self._clock()
            self._said_at = None

    def _stop(self) -> None:
        self._since = None

    def _erase(self) -> None:
        if self._drawn:
            self._errors.write(ERASE)
            self._errors.flush()
            self._drawn = False


def said_on_stderr(event: Notice) -> bool:
    """News an editor shows as text and a script's reader must see too: a retry of the model request."""
    return event.severity != "info" and event.fallback is not None
