"""Client files port: a file as the user's editor holds it, where the editor offers to serve it.

An editor that serves reads answers with its open buffer, unsaved edits
included, so the model sees what the user sees; one that serves writes applies
the text as its own (undoable, reviewable) edit instead of term2 changing the
disk behind its back. Nothing here decides whether a call may touch a path:
the file tools judge the canonical path first (workspace rule, approvals,
grants, secrets, git metadata) and only then ask the client (ADR 0024).
"""

from __future__ import annotations

from typing import Protocol


class ClientFileError(Exception):
    """The client did not serve the request.

    `answered` is True when the client said so (an error answer: nothing was
    done, and the disk may serve the call instead); False when it never said
    (it went away), so a write's fate is unknown and nothing may be retried.
    """

    def __init__(self, message: str, *, answered: bool = True) -> None:
        super().__init__(message)
        self.answered = answered


class ClientFiles(Protocol):
    @property
    def reads(self) -> bool:
        """Whether the client serves reads (v1 `fs.readTextFile`)."""
        ...

    @property
    def writes(self) -> bool:
        """Whether the client serves writes (v1 `fs.writeTextFile`)."""
        ...

    async def read_text(self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        """The text of the absolute `path` as the client holds it, from `line` (1-based), at most `limit` lines.

        Raises ClientFileError when the client refuses, fails or goes away.
        """
        ...

    async def write_text(self, session_id: str, path: str, content: str) -> None:
        """Make `content` the whole text of the absolute `path`, as the client's own edit.

        Raises ClientFileError when the client refuses, fails or goes away.
        """
        ...
