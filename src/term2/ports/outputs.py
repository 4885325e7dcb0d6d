"""Output archive port: the whole text of tool results too long to show the model.

The model is shown a long result's head and tail; the whole of it is kept
here, out of the workspace (a command must not be able to read or rewrite
it) and out of the context window, for a later `read_output` call.
"""

from __future__ import annotations

from typing import Protocol


class OutputArchive(Protocol):
    async def keep(self, session_id: str, call_id: str, text: str) -> None:
        """Store the whole result of ``call_id``; raises OSError when it cannot be kept."""
        ...

    async def fetch(self, session_id: str, call_id: str) -> str | None:
        """The kept result, or None when this session kept none under that id."""
        ...

    async def drop(self, session_id: str) -> None:
        """Remove everything kept for the session (it was deleted); nothing kept is not an error."""
        ...
