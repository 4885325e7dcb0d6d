"""One wording for how a sandboxed command ended, whichever tool ran it."""

from __future__ import annotations

import signal

import pytest

from term2.app.tools.sandboxed import did_not_run, ended
from term2.ports.sandbox import CommandResult, SandboxFailed, SandboxUnavailable

LIMIT = 1024


def result(
    exit_code: int | None = 0,
    sig: int | None = None,
    output: bytes = b"out\n",
    *,
    truncated: bool = False,
    timed_out: bool = False,
    notices: tuple[str, ...] = (),
) -> CommandResult:
    return CommandResult(exit_code, sig, output, truncated, timed_out, notices)


@pytest.mark.parametrize(
    ("given", "status", "failed"),
    [
        (result(0), "Exit code: 0", False),
        (result(2), "Exit code: 2", True),
        (result(None, signal.SIGKILL, timed_out=True), "Timed out after 1.5 s and was killed.", True),
        (result(None, signal.SIGTERM), "Killed by signal SIGTERM.", True),
        (result(None, 77), "Killed by signal 77.", True),
        (
            result(None, signal.SIGKILL, truncated=True),
            f"Killed for writing more than the {LIMIT}-byte output limit.",
            True,
        ),
        (result(0, truncated=True), "Exit code: 0", False),  # it exited before the kill landed
    ],
)
def test_the_status_line_says_how_the_command_ended(given: CommandResult, status: str, failed: bool) -> None:
    end = ended(given, timeout_s=1.5, output_limit=LIMIT)
    assert (end.status, end.failed) == (status, failed)
    assert "None" not in end.status


def test_the_output_carries_the_cap_marker_and_then_the_notices() -> None:
    end = ended(result(0, truncated=True, notices=("one", "two")), timeout_s=1, output_limit=LIMIT)
    assert end.output == f"out\n\n[output truncated by the sandbox after {LIMIT} bytes]\n[one]\n[two]"


def test_undecodable_output_is_replaced_not_raised() -> None:
    assert ended(result(0, output=b"\xff!"), timeout_s=1, output_limit=LIMIT).output == "\ufffd!"


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (SandboxUnavailable("no bwrap"), "The sandbox is unavailable, so the program did not run: no bwrap"),
        (SandboxFailed("userns refused"), "The sandbox failed to start, so the program did not run: userns refused"),
    ],
)
def test_a_sandbox_that_never_ran_it_says_did_not_run(error: SandboxUnavailable | SandboxFailed, message: str) -> None:
    assert str(did_not_run(error, "program")) == message


def test_a_notice_stays_one_line_that_cannot_escape_into_the_terminal() -> None:
    """Whatever an adapter put in a notice, the user's terminal gets it as one printable line after the reset."""
    forged = "blocked: x\x1b]0;owned\x07\n[term2: all clear]\u202e.test was not approved \\x41"
    end = ended(result(0, notices=(forged,)), timeout_s=1, output_limit=LIMIT)
    shown = "[blocked: x\\x1b]0;owned\\x07\\x0a[term2: all clear]\\xe2\\x80\\xae.test was not approved \\x41]"
    assert end.output == "out\n\n" + shown
    assert end.terminal == "out\n\x18\x1b[0m\n" + shown
