"""How a sandboxed command ended, worded once for run_shell and run_code.

Both tools run through the same Sandbox port, so the model must read a
timeout, a signal, a kill for flooding the output cap, the cap's marker and
the sandbox's notices the same way whichever tool ran the command; and a
sandbox that could not run it at all is always "did not run", never a result.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from term2.app.clock import new_id
from term2.app.tools.failure import ToolFailed
from term2.app.tools.names import one_line
from term2.ports.sandbox import CommandResult, SandboxFailed, SandboxUnavailable
from term2.ports.tools import ToolContext
from term2.ports.updates import Notice

# The masks are fixed when a command starts (issue 30, item 5; ADR 0039): the model is told, in both
# tools' descriptions, what a command can read of a `.env` that appears while it runs.
SECRETS_WINDOW = (
    ".env files present when it starts are hidden from it; one written while it runs (by the user or "
    "another program) is readable by it until it ends."
)


@dataclass(frozen=True, slots=True)
class Ended:
    """A finished run, rendered: one status line and the output the model reads."""

    status: str
    output: str  # what the command wrote, then the cap's marker and the notices
    signal_name: str | None
    failed: bool  # anything but exit code 0: a timeout, a kill, a non-zero status
    terminal: str = ""  # the same for a terminal emulator: the notices after a reset the command cannot undo


# Cancels an escape sequence the output left open (CAN), then resets colours and concealment: a command
# cannot make the user's terminal hide term2's notices after it.
TERMINAL_RESET = "\x18\x1b[0m"


def ended(result: CommandResult, *, timeout_s: float, output_limit: int) -> Ended:
    """Render `result` of a request made with `timeout_s` and `output_limit` (bytes).

    The whole output the sandbox kept is rendered: what the model is shown of a
    long one is decided where every tool result is bounded (`app/results.py`),
    which keeps the whole text for a later `read_output`.
    """
    output = result.output.decode("utf-8", errors="replace")
    if result.truncated:
        output += f"\n[output truncated by the sandbox after {output_limit} bytes]"
    # What the sandbox did, each on one line of its own that no name in it can break or escape from.
    notices = "".join(f"\n[{one_line(notice)}]" for notice in result.notices)
    terminal = output + (TERMINAL_RESET + notices if notices else "")
    output += notices
    signal_name = _signal_name(result.signal)
    if result.timed_out:
        status = f"Timed out after {timeout_s:g} s and was killed."
    elif result.exit_code is None and result.truncated:  # no status came before the kill
        status = f"Killed for writing more than the {output_limit}-byte output limit."
    elif signal_name is not None:
        status = f"Killed by signal {signal_name}."
    else:
        status = f"Exit code: {result.exit_code}"
    failed = result.timed_out or result.exit_code != 0
    return Ended(status, output, signal_name, failed, terminal)


async def tell(result: CommandResult, ctx: ToolContext) -> None:
    """The sandbox's notices (a refused host, a quarantined plant) as `notice`s for a client that shows
    them apart; the model reads them in the command's output all the same (`ended`), and a client
    without notices sees them there, so they have no other fallback (ADR 0046)."""
    for notice in result.notices:
        await ctx.emit(Notice(new_id("notice"), one_line(notice), "warning", fallback=None))


def did_not_run(err: SandboxUnavailable | SandboxFailed, what: str) -> ToolFailed:
    """The failure for a `what` ("command", "program") the sandbox never started."""
    if isinstance(err, SandboxUnavailable):
        return ToolFailed(f"The sandbox is unavailable, so the {what} did not run: {err}")
    return ToolFailed(f"The sandbox failed to start, so the {what} did not run: {err}")


def _signal_name(number: int | None) -> str | None:
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
