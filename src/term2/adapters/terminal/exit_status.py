"""The exit statuses of `term2 exec`, one per way a turn can end, so scripts can branch on them.

They are part of the command's interface (README, ADR 0029): never renumber one.
"""

from __future__ import annotations

from term2.domain.turn import StopReason

END_TURN = 0
ERROR = 1  # the turn failed (the provider, the model's configuration, term2 itself), or term2 could not start
USAGE = 2  # the command line, the folder or the session was refused: nothing ran (click's own status for usage)
REFUSAL = 3
MAX_TOKENS = 4
MAX_TURN_REQUESTS = 5
# The turn ended normally but the gate refused at least one tool call it asked for (rejected, no terminal to
# ask on, read-only): the work a script asked for may not be done (ADR 0045). Other endings keep their own.
TOOLS_REFUSED = 6
CANCELLED = 130  # Ctrl-C: the shells' 128 + SIGINT

BY_STOP_REASON: dict[StopReason, int] = {
    StopReason.END_TURN: END_TURN,
    StopReason.ERROR: ERROR,
    StopReason.REFUSAL: REFUSAL,
    StopReason.MAX_TOKENS: MAX_TOKENS,
    StopReason.MAX_TURN_REQUESTS: MAX_TURN_REQUESTS,
    StopReason.CANCELLED: CANCELLED,
}


def exit_status(reason: StopReason, refused: int = 0) -> int:
    if reason is StopReason.END_TURN and refused:
        return TOOLS_REFUSED
    return BY_STOP_REASON[reason]
