"""`term2 exec`'s controlling terminal (ADR 0029): opened only when it is a terminal, never handed to a child."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from term2.adapters.terminal.approver import ControllingTerminal, FdLines


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, str]]:
    master, slave = pty.openpty()
    try:
        yield master, os.ttyname(slave)
    finally:
        os.close(master)
        os.close(slave)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_what_is_not_a_terminal_or_cannot_be_opened_is_no_one_to_ask(tmp_path: Path) -> None:
    before = open_fds()
    assert ControllingTerminal.open(os.devnull) is None  # opens, but is no terminal: closed again
    assert ControllingTerminal.open(str(tmp_path / "missing")) is None
    assert open_fds() == before


def test_the_terminal_is_opened_read_write_and_close_on_exec(pty_pair: tuple[int, str]) -> None:
    _, name = pty_pair
    tty = ControllingTerminal.open(name)
    assert tty is not None
    try:
        assert fcntl.fcntl(tty.fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
        assert fcntl.fcntl(tty.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        # Even a child spawned without closing descriptors does not get it.
        listing = subprocess.run(
            ["ls", "-l", "/proc/self/fd/"], close_fds=False, capture_output=True, text=True, check=True
        ).stdout
        assert name not in listing, listing
    finally:
        tty.close()
    with pytest.raises(OSError):
        os.fstat(tty.fd)


@pytest.mark.anyio
async def test_questions_are_written_and_answers_read_on_the_same_terminal(pty_pair: tuple[int, str]) -> None:
    master, name = pty_pair
    tty = ControllingTerminal.open(name)
    assert tty is not None
    try:
        tty.file.write("choose 1-2: ")
        tty.file.flush()
        assert b"choose 1-2: " in os.read(master, 1024)
        os.write(master, b"2\n")
        with anyio.fail_after(60):  # a guard against a hang only
            assert await FdLines(tty.fd).readline() == "2"
    finally:
        tty.close()


@pytest.mark.anyio
async def test_what_was_typed_before_a_question_is_discarded(pty_pair: tuple[int, str]) -> None:
    master, name = pty_pair
    tty = ControllingTerminal.open(name)
    assert tty is not None
    try:
        lines = FdLines(tty.fd)
        os.write(master, b"1\n")  # typed while the turn ran, before anything was asked
        # The pty hands it to the line discipline in the kernel's own time: wait until the terminal has it.
        deadline = time.monotonic() + 60
        while not select.select([tty.fd], [], [], 0.05)[0]:
            assert time.monotonic() < deadline, "the typed line never reached the terminal"
        lines.discard_typed_ahead()
        os.write(master, b"3\n")
        with anyio.fail_after(60):  # a guard against a hang only
            assert await lines.readline() == "3"
    finally:
        tty.close()
