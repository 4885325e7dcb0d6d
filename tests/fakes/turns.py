"""A running prompt for tool calls made outside a real one: the real Turn, admitted."""

from __future__ import annotations

from term2.app.turn import Turn


def live_turn(session_id: str = "sess-test") -> Turn:
    """Tool calls may only ask the user while their prompt runs (the tool gate's rule)."""
    turn = Turn()
    turn.admit(session_id)
    return turn
