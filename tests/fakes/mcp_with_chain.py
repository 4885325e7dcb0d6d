"""Start an MCP server with a helper that forks and exits as fast as it can, for ever: a fork chain.

Run as ``python -m tests.fakes.mcp_with_chain FIFO COMMAND ARGS...``. The helper opens FIFO for
writing, writes its process group as a line (so a test can end a chain that escaped), closes its
stdio and then loops: fork, and the parent exits. At any moment one or two processes of it live,
each a few hundred microseconds, so a kill loop that looks for processes and then signals them
finds each one gone and its successor unseen. Every generation holds the FIFO open: the test's
reader sees its end only when no process of the chain is left, whatever the timing.
"""

from __future__ import annotations

import os
import sys


def _chain(fifo: str) -> None:
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, f"{os.getpgid(0)}\n".encode())
    null = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(null, std)
    while True:
        if os.fork():
            os._exit(0)


def main(argv: list[str]) -> None:
    if os.fork() == 0:
        _chain(argv[0])
    os.execvp(argv[1], argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
