"""Run the real `term2 exec` process: through pipes (a script's view), or on a pseudo-terminal (a person's).

On the pseudo-terminal the child is a session leader with the pty as its
controlling terminal, so writing Ctrl-C (\\x03) to it makes the line
discipline send SIGINT, exactly as a key press does. `PipedAtTerminal` is a
pipeline typed at a shell (`echo "fix it" | term2 exec -`): stdin and stdout
are pipes and the pty is only the controlling terminal. The piped runners
start the child in a session of its own, so it has no controlling terminal
at all (as under cron or CI) even when pytest runs from one.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\r")


def exec_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TERM2_") and k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")
    }
    env.update(
        {
            "TERM2_HOME": str(home),
            "XDG_CONFIG_HOME": str(home.parent / "xdg-config"),
            "PYTHONUNBUFFERED": "1",
            "TERM": "xterm-256color",
        }
    )
    env.update(extra)
    return env


@dataclass
class Ran:
    status: int
    stdout: str
    stderr: str


def run_piped(args: list[str], env: dict[str, str], cwd: Path, stdin: str = "", timeout: float = 60.0) -> Ran:
    """`term2 exec ARGS` with stdin, stdout and stderr all pipes: no terminal anywhere."""
    done = subprocess.run(
        [sys.executable, "-m", "term2", "exec", *args],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
        check=False,
        start_new_session=True,  # no controlling terminal: no /dev/tty to ask on
    )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def start_piped(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "term2", "exec", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,  # no controlling terminal: no /dev/tty to ask on
    )


class _Screen:
    """What a pseudo-terminal shows term2 drawing, and waiting for a text to appear on it.

    A driver keeps the drawn bytes in `output` and says how to read more
    (`_more`), whether term2 has exited (`_exited`) and what else to show
    when it exited first (`_after_exit`).
    """

    output: bytes

    def text(self) -> str:
        """What was drawn, without colours and cursor movements."""
        return ANSI.sub(b"", self._drawn()).decode("utf-8", "replace")

    def expect(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{needle!r} never appeared; the terminal shows:\n{self.text()[-3000:]}")
            status = self._exited()
            if status is not None:
                self._more(0.2)
                if needle in self.text():
                    return
                raise AssertionError(
                    f"term2 exited ({status}) before {needle!r}; terminal:\n{self.text()[-3000:]}{self._after_exit()}"
                )
            self._more(0.05)

    def _drawn(self) -> bytes:
        return self.output

    def _more(self, wait: float) -> None:
        raise NotImplementedError

    def _exited(self) -> int | None:
        raise NotImplementedError

    def _after_exit(self) -> str:
        return ""


class PtyExec(_Screen):
    """`term2 exec ARGS` on a pseudo-terminal of `rows` x `cols`; everything it draws is kept in `.output`.

    `command`: the subcommand ARGS follow (`()`: ARGS name it, e.g. `["login"]` or `["acp"]`).
    """

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        rows: int = 40,
        cols: int = 120,
        *,
        command: tuple[str, ...] = ("exec",),
    ) -> None:
        pid, fd = pty.fork()
        if pid == 0:  # the child: the pty is its controlling terminal and stdin, stdout and stderr
            try:
                os.chdir(cwd)
                os.execve(sys.executable, [sys.executable, "-m", "term2", *command, *args], env)
            finally:
                os._exit(127)
        self.pid, self.fd = pid, fd
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.output = b""
        self._lock = threading.Lock()
        self._status: int | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed its side
                return
            if not data:
                return
            with self._lock:
                self.output += data

    def _drawn(self) -> bytes:
        with self._lock:
            return self.output

    def _more(self, wait: float) -> None:
        """A reader thread keeps `output`; after exit, wait for it to read the last of it."""
        if self._status is not None:
            self._reader.join(5)
        else:
            time.sleep(min(wait, 0.02))

    def _exited(self) -> int | None:
        return self.poll()

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def poll(self) -> int | None:
        if self._status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._status = os.waitstatus_to_exitcode(status)
        return self._status

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"term2 exec did not exit; the terminal shows:\n{self.text()[-3000:]}")
            time.sleep(0.02)
        self._reader.join(5)
        assert self._status is not None
        return self._status

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self._status = -9
        self.close()

    def close(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass


# Run in the child before term2: take the pty named by argv[1] as the controlling terminal of the new
# session through a descriptor closed at exec, then become term2. After it the terminal is reachable only
# by opening /dev/tty; stdin, stdout and stderr are whatever the parent gave.
TAKE_TERMINAL = """
import fcntl, os, sys, termios
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
os.execv(sys.executable, [sys.executable, "-m", "term2", "exec", *sys.argv[2:]])
"""


class PipedAtTerminal(_Screen):
    """`term2 exec ARGS` fed `stdin` through a pipe while a pseudo-terminal is its controlling terminal.

    stdout is a pipe (`.stdout`), or the terminal itself with `view_on_terminal`
    (the rich view draws there); stderr is a pipe (`.stderr`); `typed_ahead` is
    typed on the terminal before the child starts. What is drawn on
    the terminal is kept in `.output`; `.send` types on it. The master is read
    only while `expect` or `wait` run: the exchanges are small.
    """

    def __init__(
        self,
        args: list[str],
        env: dict[str, str],
        cwd: Path,
        stdin: str,
        *,
        view_on_terminal: bool = False,
        typed_ahead: bytes = b"",
        rows: int = 40,
        cols: int = 120,
    ) -> None:
        self.fd, self._slave = pty.openpty()  # the parent keeps a slave open, so reading the master never hits EIO
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        if typed_ahead:  # keys pressed before term2 even starts: they wait in the terminal's input queue
            os.write(self.fd, typed_ahead)
        os.set_blocking(self.fd, False)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TAKE_TERMINAL, os.ttyname(self._slave), *args],
            stdin=subprocess.PIPE,
            stdout=self._slave if view_on_terminal else subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdin.encode())
        self.proc.stdin.close()
        self.output = b""
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._pumps = [
            threading.Thread(target=_pump, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))
            if stream is not None
        ]
        for pump in self._pumps:
            pump.start()

    @property
    def stdout(self) -> str:
        return b"".join(self._out).decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return b"".join(self._err).decode("utf-8", "replace")

    def _drain(self, wait: float) -> None:
        while select.select([self.fd], [], [], wait)[0]:
            try:
                data = os.read(self.fd, 65536)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self.output += data
            wait = 0.0

    def _more(self, wait: float) -> None:
        self._drain(wait)

    def _exited(self) -> int | None:
        return self.proc.poll()

    def _after_exit(self) -> str:
        return f"\nstderr:\n{self.stderr[-3000:]}"

    def send(self, data: bytes) -> None:
        os.write(self.fd, data)

    def wait(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"term2 exec did not exit; the terminal shows:\n{self.text()[-3000:]}")
            self._drain(0.05)
        self._drain(0.2)
        for pump in self._pumps:
            pump.join(10)
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.fd, self._slave):
            try:
                os.close(fd)
            except OSError:
                pass
        self.fd = self._slave = -1


def _pump(stream: IO[bytes], into: list[bytes]) -> None:
    while chunk := os.read(stream.fileno(), 65536):
        into.append(chunk)
