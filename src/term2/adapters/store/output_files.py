"""Tool results kept whole as files under term2's data directory (the OutputArchive port).

One folder per session, one file per call, both private (0700/0600) like the
session database: a result holds whatever the command printed. The data
directory is hidden from sandboxed commands (see the container's own paths),
so a command can neither read another call's output nor plant one. Names are
checked so a call id can never address a path outside the session's folder.
"""

from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path

import anyio.to_thread

_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def _checked(value: str, what: str) -> str:
    if not _SAFE_ID.match(value) or value in (".", ".."):
        raise ValueError(f"unusable {what} for an output file: {value!r}")
    return value


class OutputFiles:
    def __init__(self, folder: Path) -> None:
        self._folder = folder

    def _path(self, session_id: str, call_id: str) -> Path:
        return self._folder / _checked(session_id, "session id") / f"{_checked(call_id, 'call id')}.txt"

    async def keep(self, session_id: str, call_id: str, text: str) -> None:
        await anyio.to_thread.run_sync(partial(self._write, self._path(session_id, call_id), text))

    async def fetch(self, session_id: str, call_id: str) -> str | None:
        try:
            path = self._path(session_id, call_id)
        except ValueError:
            return None
        return await anyio.to_thread.run_sync(partial(self._read, path))

    async def drop(self, session_id: str) -> None:
        try:
            folder = self._folder / _checked(session_id, "session id")
        except ValueError:
            return
        await anyio.to_thread.run_sync(partial(self._remove, folder))

    @staticmethod
    def _remove(folder: Path) -> None:
        """The session's folder and the files in it; never follows a link out of it (there are no
        subfolders: `_path` makes one file per call)."""
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return
        try:
            for name in os.listdir(fd):
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(folder)

    @staticmethod
    def _write(path: Path, text: str) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)

    @staticmethod
    def _read(path: Path) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
            return handle.read()


class MemoryOutputs:
    """The alternate adapter: the same contract, kept in a dict (tests, ephemeral runs)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], str] = {}

    async def keep(self, session_id: str, call_id: str, text: str) -> None:
        self._kept[(_checked(session_id, "session id"), _checked(call_id, "call id"))] = text

    async def fetch(self, session_id: str, call_id: str) -> str | None:
        return self._kept.get((session_id, call_id))

    async def drop(self, session_id: str) -> None:
        self._kept = {key: text for key, text in self._kept.items() if key[0] != session_id}
