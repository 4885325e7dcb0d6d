"""What the sandbox did to the workspace reaches the model and, in the terminal, the user."""

from __future__ import annotations

from term2.app.tools.shell import shell_outcome
from term2.domain.history import TerminalOutput
from term2.ports.sandbox import CommandResult

NOTICE = "term2 quarantined sub/.git: this command created a .git entry"


def test_notices_follow_the_output_for_the_model_and_the_terminal() -> None:
    result = CommandResult(0, None, b"made\n", truncated=False, timed_out=False, notices=(NOTICE,))
    outcome = shell_outcome("git init sub", "/w", "term-1", result, 120)
    assert outcome.text.startswith("Exit code: 0\nmade\n")
    assert outcome.text.endswith(f"[{NOTICE}]")
    [terminal] = outcome.content
    assert isinstance(terminal, TerminalOutput) and NOTICE in terminal.output
    assert not outcome.failed


def test_a_silent_command_with_a_notice_still_shows_it() -> None:
    result = CommandResult(0, None, b"", truncated=False, timed_out=False, notices=(NOTICE,))
    assert NOTICE in shell_outcome("true", "/w", "term-1", result, 120).text
