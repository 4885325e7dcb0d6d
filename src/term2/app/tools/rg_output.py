"""Read ripgrep's output as it streams, in bounded memory, whatever the names and lines hold.

With `--null`, every path rg prints ends in a NUL byte, which no Linux name
holds, so a name with a colon or a line break cannot be mistaken for the
fields after it. A match line (`path NUL line:column:text LF`) is kept only in
a window around its first match (`column`): a minified file's one 50 MB line
costs the reader a few hundred bytes, and the model still sees what matched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

BEFORE = 100  # bytes of the line kept before the match
WINDOW = 300  # bytes of the line kept in all
CUT = "[line cut]"


_SEPARATOR_FIRST = bytes.maketrans(b"/", b"\0")


def path_order(path: bytes) -> bytes:
    """A key giving rg's `--sort path` order (name by name) in one C call.

    Comparing names one by one is comparing the bytes with `/` as the
    smallest byte, and `\\0` is a byte no name holds: ~10x faster than
    splitting every path into a list of names.
    """
    return path.translate(_SEPARATOR_FIRST)


@dataclass(frozen=True, slots=True)
class Match:
    path: bytes  # as rg printed it, relative to the folder it searched
    line: int  # rg counts only `\n`-ended lines, as read_file does
    text: str


class MatchReader:
    """Collects up to `limit` matches from rg's `--null --line-number --column` output.

    `keep` says whether a path's matches count (a secret file outside any
    grant does not); `feed` returns False once one match more than the limit
    was seen, so the caller can stop rg and say the result was capped.
    """

    def __init__(self, limit: int, keep: Callable[[bytes], bool] = lambda _: True) -> None:
        self.limit = limit
        self.keep = keep
        self.matches: list[Match] = []
        self.more = False
        self.error = ""  # why the search could not run, when it could not
        self._path = bytearray()
        self._numbers = bytearray()
        self._text = bytearray()
        self._state = 0  # 0: path, 1: line and column, 2: text
        self._lo = self._hi = self._seen = 0
        self._line = 0

    def feed(self, chunk: bytes) -> bool:
        pos = 0
        end = len(chunk)
        while pos < end:
            if self._state == 0:
                nul = chunk.find(b"\0", pos)
                self._path += chunk[pos : end if nul == -1 else nul]
                if nul == -1:
                    return True
                self._state, pos = 1, nul + 1
            elif self._state == 1:
                pos = self._numbers_from(chunk, pos)
            else:
                newline = chunk.find(b"\n", pos)
                stop = end if newline == -1 else newline
                self._take(chunk, pos, stop)
                if newline == -1:
                    return True
                pos = newline + 1
                if not self._finish():
                    return False
        return True

    def keep_first(self, limit: int) -> None:
        """Keep the first `limit` matches in rg's `--sort path` order (name by name, then line)."""
        self.matches.sort(key=lambda m: (path_order(m.path), m.line))
        if len(self.matches) > limit:
            self.more = True
            del self.matches[limit:]

    def _numbers_from(self, chunk: bytes, pos: int) -> int:
        while pos < len(chunk):
            byte = chunk[pos]
            pos += 1
            if byte == 0x3A and self._numbers.count(b":") == 1:  # the colon after the column
                line, column = self._numbers.split(b":")
                self._line = int(line)
                self._lo = max(0, int(column) - 1 - BEFORE)
                self._hi = self._lo + WINDOW
                self._seen = 0
                self._numbers.clear()
                self._state = 2
                return pos
            self._numbers.append(byte)
        return pos

    def _take(self, chunk: bytes, start: int, stop: int) -> None:
        first = self._seen
        self._seen += stop - start
        lo, hi = max(self._lo, first), min(self._hi, self._seen)
        if lo < hi:
            self._text += chunk[start + lo - first : start + hi - first]

    def _finish(self) -> bool:
        path = bytes(self._path)
        self._path.clear()
        self._state = 0
        data = bytes(self._text)
        self._text.clear()
        if not self.keep(path):
            return True
        if len(self.matches) == self.limit:
            self.more = True
            return False
        cut_after = self._seen > self._hi
        if not cut_after and data.endswith(b"\r"):
            data = data[:-1]
        text = data.decode("utf-8", "replace")
        if self._lo > 0:
            text = f"{CUT} " + text.lstrip("\ufffd")
        if cut_after:
            text = text.rstrip("\ufffd") + f" {CUT}"
        self.matches.append(Match(path, self._line, text))
        return True


class PathReader:
    """Collects NUL-ended paths from `rg --files --null`, up to `limit` of those `keep` accepts (all: None)."""

    def __init__(self, limit: int, keep: Callable[[bytes], bool] | None = None) -> None:
        self.limit = limit
        self.keep = keep
        self.paths: list[bytes] = []
        self.more = False
        self._partial = b""

    def feed(self, chunk: bytes) -> bool:
        *complete, self._partial = (self._partial + chunk).split(b"\0")
        if self.keep is not None:
            complete = [path for path in complete if self.keep(path)]
        room = self.limit - len(self.paths)
        self.paths += complete[:room]
        if len(complete) > room:
            self.more = True
            return False
        return True

    def keep_first(self, limit: int) -> None:
        """Keep the first `limit` paths in rg's `--sort path` order (name by name)."""
        self.paths.sort(key=path_order)
        if len(self.paths) > limit:
            self.more = True
            del self.paths[limit:]
