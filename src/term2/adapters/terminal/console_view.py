"""The turn drawn on a terminal with rich: streamed text, then Markdown; a line a tool call.

While a message streams, its last lines are shown in a transient live area
(with the tool calls still running); when it ends, the area is cleared and
the whole message is printed once as Markdown, so the scrollback holds only
finished things. Thinking is dimmed, and shown only with `--verbose`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from term2.adapters.terminal import drawing
from term2.adapters.terminal.view import Ended
from term2.domain.history import ToolCall
from term2.ports.updates import (
    CompactionChanged,
    MessageChunk,
    Notice,
    PlanChanged,
    SessionEvent,
    StateChanged,
    TerminalChunk,
    ToolCallChanged,
    UsageChanged,
    WholeMessage,
)

REFRESH_PER_SECOND = 8


def terminal_console(*, stderr: bool = False) -> Console:
    """The console a turn or a question is drawn on (stdout's terminal, or stderr's for the script modes)."""
    return Console(stderr=stderr, highlight=False)


def tty_console(file: TextIO, fd: int) -> Console:
    """A console on the controlling terminal: questions asked there while stdout and stderr may be pipes.

    rich measures stdin, stdout and stderr for its width, none of which may be
    this terminal, so its size is read from the terminal's own fd.
    """
    try:
        width, height = os.get_terminal_size(fd)
    except OSError:
        width, height = 0, 0
    return Console(file=file, highlight=False, width=width or None, height=height or None)


def tail(text: str, width: int, height: int) -> str:
    """The end of `text` that fits `height` rows of `width` columns (wrapped lines counted as rows)."""
    width = max(width, 1)
    kept: list[str] = []
    rows = 0
    for line in reversed(text.split("\n")):
        rows += max(1, -(-len(line) // width))
        if rows > height:
            break
        kept.append(line)
    return "\n".join(reversed(kept))


class _LiveArea:
    """What is still happening, redrawn in place: the streaming message's tail and the running calls."""

    def __init__(self, view: ConsoleView) -> None:
        self._view = view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        view = self._view
        height = max(3, (options.height or console.size.height) - 2 - len(view.running))
        if view.text and (view.verbose or not view.thought):
            shown = tail(view.text, options.max_width, height)
            yield Text(drawing.shown(shown), style="dim italic" if view.thought else "")
        for call_id, call in view.running.items():
            yield drawing.tool_line(call, nested=call.parent_id is not None)
            last = view.live_output.get(call_id)
            if last:
                yield Text(f"    {drawing.shown(last)}", style="dim", no_wrap=True, overflow="ellipsis")
        waited = view.waited()
        if waited is not None:  # redrawn with the area (auto refresh): the seconds count up by themselves
            tokens = f" · {view.used:,} tokens" if view.used else ""
            yield Text(f"waiting for the model… {waited} s{tokens}", style="dim")


class ConsoleView:
    """An `ExecView` for a terminal: the `UpdateSink` the prompt use case reports the turn through."""

    def __init__(self, console: Console, *, verbose: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self._clock = clock
        # When a model request went out and has not answered yet (ADR 0045, part 3): the live area says how
        # long, so a slow model is not a blank screen. None: not waiting on the model.
        self._waiting_since: float | None = None
        self.verbose = verbose
        self.message_id: str | None = None
        self.text = ""
        self.thought = False
        self.running: dict[str, ToolCall] = {}
        self.live_output: dict[str, str] = {}
        self._context: tuple[int, int, bool] | None = None  # used, window, and whether `used` is an estimate
        self._live: Live | None = None
        self._held = 0  # questions on the terminal: the live area stays away while one waits

    # -- the sink ---------------------------------------------------------------------

    @property
    def used(self) -> int | None:
        return self._context[0] if self._context is not None else None

    def waited(self) -> int | None:
        """Whole seconds the model has been awaited, or None when it is not."""
        return None if self._waiting_since is None else int(self._clock() - self._waiting_since)

    def _follow(self, event: SessionEvent) -> None:
        """Whether a model request is out and unanswered: from the turn's start, or from the last running call's
        end (its result goes back to the model), to the first text, thought or call; never while asking."""
        if isinstance(event, (MessageChunk, WholeMessage)):
            self._waiting_since = None
        elif isinstance(event, StateChanged):
            running = event.state == "running"
            self._waiting_since = (self._waiting_since or self._clock()) if running else None
        elif isinstance(event, ToolCallChanged):
            if not event.call.status.is_final:
                self._waiting_since = None
            elif not (self.running.keys() - {event.call.tool_call_id}):
                self._waiting_since = self._clock()

    async def send(self, session_id: str, event: SessionEvent) -> None:
        self._follow(event)
        if self._waiting_since is not None:
            self._show()
        if isinstance(event, Notice) and event.severity != "info" and event.fallback is not None:
            self._end_message()  # a retry: one line, shown even where thoughts are hidden
            self.notice(event.text)
            return
        if isinstance(event, Notice):  # the terminal draws news as the thought or message it was
            chunk = event.as_chunk()
            if chunk is None:
                return
            event = chunk
        if isinstance(event, MessageChunk):
            if event.message_id != self.message_id or event.thought != self.thought:
                self._end_message()
                self.message_id, self.thought = event.message_id, event.thought
            self.text += event.text
            self._show()
            return
        if isinstance(event, TerminalChunk):
            lines = event.data.decode("utf-8", "replace").strip().splitlines()
            if lines:
                self.live_output[event.tool_call_id] = lines[-1]
            return
        if isinstance(event, UsageChanged):
            self._context = (event.used, event.size, event.estimated)
            return
        if isinstance(event, StateChanged) and event.state == "idle":
            self._stop()  # the last message waits for `finish`: it may be term2's report of a failure
            return
        self._end_message()
        if isinstance(event, WholeMessage):
            self._print_message(event.text, event.thought)
        elif isinstance(event, ToolCallChanged):
            self._tool_call(event.call)
        elif isinstance(event, PlanChanged):
            self._print(drawing.checklist(event.plan))
        elif isinstance(event, CompactionChanged):
            self._print(Text(f"context compaction {event.status.replace('_', ' ')}", style="dim italic"))
        # The user's own message, compaction summaries and the other states have nothing to show here.

    def notice(self, text: str) -> None:
        self._print(Text(drawing.shown(text), style="yellow"))

    def finish(self, ended: Ended) -> None:
        self._waiting_since = None
        if ended.error is not None and self.message_id is not None and self.text.endswith(ended.error):
            # term2's own failure report: plain text, so `<provider>/<model>` is not taken for markup
            self.message_id, self.text, self.thought = None, "", False
            self._print(Text(f"error: {drawing.shown(ended.error)}", style="red"))
        self._end_message()
        self._stop()
        self.console.print(drawing.summary(ended.stop_reason.value.lstrip("_"), ended.spent, self._context))

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The live area cleared for a question on the terminal; it comes back with the next update."""
        self._waiting_since = None  # the question is what waits now, not the model
        self._end_message()
        self._stop()
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1

    # -- drawing ----------------------------------------------------------------------

    def _tool_call(self, call: ToolCall) -> None:
        if call.status.is_final:
            self.running.pop(call.tool_call_id, None)
            self.live_output.pop(call.tool_call_id, None)
            self._print(drawing.finished_call(call))
        else:
            self.running[call.tool_call_id] = call
            self._show()

    def _end_message(self) -> None:
        if self.message_id is not None:
            text, thought = self.text, self.thought
            self.message_id, self.text, self.thought = None, "", False
            self._print_message(text, thought)

    def _print_message(self, text: str, thought: bool) -> None:
        if not text.strip():
            return
        if thought:
            if self.verbose:
                self._print(Text(drawing.shown(text.strip()), style="dim italic"))
            return
        self._print(Markdown(drawing.shown(text)))

    def _print(self, renderable: RenderableType) -> None:
        self.console.print(renderable)
        self._refresh()

    def _show(self) -> None:
        if self._held:
            return
        if self._live is None:
            self._live = Live(
                _LiveArea(self),
                console=self.console,
                transient=True,
                auto_refresh=True,
                refresh_per_second=REFRESH_PER_SECOND,
                redirect_stderr=False,
            )
            self._live.start()
        self._live.refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def _stop(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            self.running.clear()  # a call still running when the area closes is drawn again when it ends
            live.update(Group())
            live.stop()
