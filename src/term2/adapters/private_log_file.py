"""The log file's handler, in a module of its own: `logging.handlers` imports pickle, socket and queue
(~3 ms), which `term2 acp` pays only when the file is first written (ADR 0054)."""

from __future__ import annotations

import io
import logging.handlers
import os


class PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A size-rotated file only its owner can read: opened 0600, never through a symlink.

    Logs name folders, commands and hosts; another local user has no business
    reading them, whatever the umask says.
    """

    def _open(self) -> io.TextIOWrapper:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(self.baseFilename, flags, 0o600)
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            os.close(fd)
            raise
        return os.fdopen(fd, "a", encoding="utf-8", errors="replace")
