"""The approval port on a terminal: the gate's own options, answered by the person at the keyboard.

Only a terminal can approve. `TerminalApprover` shows what is asked (the
title, why, the command or the proposed diff) and the options the gate
offered, numbered, and waits for a line; only a number (or `y`, the first
allow, or `n`, reject) naming an offered option counts, anything typed before
the question was shown is discarded, anything else asks again, and the end of
input denies. The terminal is stdin when it is one, else the controlling
terminal opened by name (`ControllingTerminal`, as git, ssh and sudo ask when a
pipe feeds them). `NoTerminalApprover`, used when neither exists, denies every
request and says so on stderr: there is no flag that answers for the user
(ADR 0029).
"""

from __future__ import annotations

import os
import termios
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol, TextIO

import anyio
from rich.console import Console, Group, RenderableType
from rich.text import Text

from term2.adapters.terminal import drawing
from term2.adapters.terminal.drawing import shown
from term2.domain.approval import Choice, OptionKind, PermissionOption
from term2.domain.history import DiffOutput
from term2.ports.approval import ApprovalDecision, ApprovalRequest

MAX_LINE = 4096
SHORTCUTS = {
    "y": OptionKind.ALLOW_ONCE,
    "yes": OptionKind.ALLOW_ONCE,
    "n": OptionKind.REJECT_ONCE,
    "no": OptionKind.REJECT_ONCE,
}


class LineSource(Protocol):
    async def readline(self) -> str | None:
        """The next line typed, without its end; None when input has ended."""


CONTROLLING_TERMINAL = "/dev/tty"


class ControllingTerminal:
    """The process's controlling terminal, opened by name so a person can answer while stdin is a pipe.

    Opened read-write with `O_NOCTTY` (it must never become a controlling
    terminal by accident) and `O_CLOEXEC`, so no child (and no sandboxed
    command, which also runs in a session of its own) inherits it. Without a
    controlling terminal the open fails (ENXIO, or ENOENT/EACCES/ENODEV in a
    bare container) and there is no one to ask.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.file = os.fdopen(fd, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)

    @classmethod
    def open(cls, path: str = CONTROLLING_TERMINAL) -> ControllingTerminal | None:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        if not os.isatty(fd):
            os.close(fd)
            return None
        return cls(fd)

    def close(self) -> None:
        """Flush and close; a terminal gone meanwhile (hung up) must not change how term2 exits."""
        try:
            self.file.close()  # flushes; the fd itself is closed below (closefd=False)
        except OSError:
            pass
        finally:
            os.close(self.fd)


class FdLines:
    """Lines from a terminal's file descriptor, read without blocking the event loop (so Ctrl-C cancels)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self._fd)
            try:
                data = os.read(self._fd, MAX_LINE)
            except BlockingIOError:
                continue
            if not data:
                return None
            self._buffer = (self._buffer + data)[-MAX_LINE:]
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    def discard_typed_ahead(self) -> None:
        """Forget what was typed before a question is shown: a `y` typed earlier must not answer it."""
        self._buffer = b""
        if os.isatty(self._fd):
            try:
                termios.tcflush(self._fd, termios.TCIFLUSH)
            except termios.error:
                pass


def question(request: ApprovalRequest) -> RenderableType:
    """What the user is asked: the title, why, the command or the diff, and the numbered options."""
    parts: list[RenderableType] = [Text(f"? {shown(request.title)}", style="bold yellow")]
    if request.description:
        parts.append(Text(f"  {shown(request.description)}", style="yellow"))
    if request.command is not None:
        parts.append(Text(f"    $ {shown(request.command.command)}", style="bold"))
    parts.extend(drawing.diff(c) for c in request.tool_call.content if isinstance(c, DiffOutput))
    for number, option in enumerate(request.options, 1):
        style = "red" if option.kind is OptionKind.REJECT_ONCE else "green"
        parts.append(Text(f"  {number}) {shown(option.name)}", style=style))
    return Group(*parts)


def pick(options: tuple[PermissionOption, ...], answer: str) -> PermissionOption | None:
    """The offered option an answer names, or None when it names none."""
    answer = answer.strip().lower()
    if answer.isdigit() and 1 <= int(answer) <= len(options):
        return options[int(answer) - 1]
    kind = SHORTCUTS.get(answer)
    return next((o for o in options if o.kind is kind), None) if kind is not None else None


class TerminalApprover:
    """Asks on the terminal, one question at a time (parallel calls wait their turn)."""

    def __init__(
        self,
        console: Console,
        lines: LineSource,
        hold: Callable[[], AbstractContextManager[None]] = nullcontext,
        discard_typed_ahead: Callable[[], None] = lambda: None,
    ) -> None:
        self._console = console
        self._lines = lines
        self._hold = hold  # clears the live drawing while a question waits
        self._discard_typed_ahead = discard_typed_ahead  # before each question is shown, never after
        self._one_at_a_time = anyio.Lock()

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        if not request.options:
            return ApprovalDecision(None, "no_interaction")
        async with self._one_at_a_time:
            with self._hold():
                self._discard_typed_ahead()
                self._console.print(question(request))
                while True:
                    self._console.print(Text(f"  choose 1-{len(request.options)} (y/n): ", style="bold"), end="")
                    answer = await self._lines.readline()
                    if answer is None:
                        self._console.print(Text("\n  no answer: rejected", style="red"))
                        return ApprovalDecision(None, "cancelled")
                    option = pick(request.options, answer)
                    if option is not None:
                        break
                    self._console.print(Text(f"  {answer.strip()!r} is not one of the options", style="red"))
        if option.choice is Choice.REJECT:
            return ApprovalDecision(None, "rejected")
        return ApprovalDecision(option.choice)


def asking_on(
    console: Console, fd: int, hold: Callable[[], AbstractContextManager[None]] = nullcontext
) -> TerminalApprover:
    """Questions drawn on `console`, answered by lines typed on the terminal `fd`."""
    lines = FdLines(fd)
    return TerminalApprover(console, lines, hold, lines.discard_typed_ahead)


class NoTerminalApprover:
    """No one to ask: every approval fails closed, with a line on stderr naming what was refused."""

    def __init__(self, errors: TextIO) -> None:
        self._errors = errors

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        self._errors.write(
            f"term2: refused without asking (no terminal to ask on): {shown(request.title)} "
            "Approvals are asked only on a terminal; run term2 exec on one to answer them.\n"
        )
        self._errors.flush()
        return ApprovalDecision(None, "no_interaction")
