"""Start an MCP server the way many real ones run: with helper processes of its own, one of them detached.

Run as ``python -m tests.fakes.mcp_with_helpers COMMAND ARGS...``: it starts two helpers that sleep
for ever, then becomes (execs) the server. One helper is a plain child, in the server's process group;
the other double-forks and calls `setsid`, as a daemon does, so it is in no group or session of the
server's and its parent is gone. Both close their stdio (a daemon's habit), so no pipe of the server's
tells anyone they live. Every process inherits the environment, so a marker put there by the test
finds them all in /proc (`tests.support.procs.processes_with(marker, environ=True)`).
"""

from __future__ import annotations

import os
import sys
import time


def _sleep_for_ever() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    while True:
        time.sleep(3600)


def main(argv: list[str]) -> None:
    if os.fork() == 0:  # in the server's process group
        _sleep_for_ever()
    if os.fork() == 0:  # detached: a new session, then its parent exits
        os.setsid()
        if os.fork() == 0:
            _sleep_for_ever()
        os._exit(0)
    os.wait()  # the detached one's first parent: it exits at once
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
