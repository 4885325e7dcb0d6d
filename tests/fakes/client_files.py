"""An editor's buffers in memory: the alternate adapter of the client files port.

It serves what an editor like Zed serves: a buffer's current text (which may
differ from the disk: unsaved edits), a line range of it, and writes that
replace a buffer's whole text. Paths it does not hold, or is told to refuse,
answer with the port's error, as an editor answers for a path outside its
project. Every request is remembered, so tests can say what reached the client.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from term2.ports.client_files import ClientFileError


def line_range(text: str, line: int | None, limit: int | None) -> str:
    """Lines `line`.. (1-based) of `text`, at most `limit` of them, each with its line break."""
    lines = text.splitlines(keepends=True)
    first = max((line or 1) - 1, 0)
    last = len(lines) if limit is None else first + limit
    return "".join(lines[first:last])


@dataclass
class MemoryClientFiles:
    buffers: dict[str, str] = field(default_factory=dict)  # absolute path -> the buffer's text
    reads: bool = True
    writes: bool = True
    refuse: set[str] = field(default_factory=set)  # paths answered with an error, as outside the project
    gone: bool = False  # the client went away: nothing is answered
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # (method, session id, path)

    async def read_text(self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        self.requests.append(("fs/read_text_file", session_id, path))
        self._check(path, self.reads)
        if path not in self.buffers:
            raise ClientFileError(f"resource not found: {path}")
        return line_range(self.buffers[path], line, limit)

    async def write_text(self, session_id: str, path: str, content: str) -> None:
        self.requests.append(("fs/write_text_file", session_id, path))
        self._check(path, self.writes)
        self.buffers[path] = content

    def _check(self, path: str, offered: bool) -> None:
        if self.gone:
            raise ClientFileError("the client went away", answered=False)
        if not offered:
            raise ClientFileError("the client does not serve this method")
        if path in self.refuse:
            raise ClientFileError(f"invalid path: {path}")

    def asked(self, method: str) -> list[str]:
        """The paths requested with `method`, in order."""
        return [path for m, _session, path in self.requests if m == method]
