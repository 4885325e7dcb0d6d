"""Read ripgrep's output as it streams, in bounded memory, into the port's records.

With `--null`, every path rg prints ends in a NUL byte, which no Linux name
holds, so a name with a colon or a line break cannot be mistaken for the
fields after it. A match line (`path NUL line:column:text LF`) is kept only in
its first MATCH_WINDOW bytes and a window around its first match (`column`):
a minified file's one 50 MB line costs the reader a few hundred bytes, and
the caller still sees what matched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from term2.ports.workspace_search import MATCH_BEFORE, MATCH_WINDOW, LineMatch


class MatchStream:
    """Turns rg's `--null --line-number --column` output into LineMatch records for `take`.

    `relative` turns a path rg printed into one relative to the walk's top.
    `feed` returns False once `take` did; nothing is given to `take` after that.
    """

    def __init__(self, take: Callable[[LineMatch], bool], relative: Callable[[bytes], bytes]) -> None:
        self.take = take
        self.relative = relative
        self.enough = False
        self._path = bytearray()
        self._numbers = bytearray()
        self._head = bytearray()  # the line's first MATCH_WINDOW bytes: all of it, when it is short
        self._window = bytearray()  # the window around the first match, for a long line
        self._state = 0  # 0: path, 1: line and column, 2: text
        self._lo = self._seen = self._line = 0
        self._cr = False  # the line's last byte so far is a `\r` (of a `\r\n` ending)

    def feed(self, chunk: bytes) -> bool:
        pos = 0
        end = len(chunk)
        while pos < end and not self.enough:
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
                self.enough = not self.take(self._finish())
        return not self.enough

    def _numbers_from(self, chunk: bytes, pos: int) -> int:
        while pos < len(chunk):
            byte = chunk[pos]
            pos += 1
            if byte == 0x3A and self._numbers.count(b":") == 1:  # the colon after the column
                line, column = self._numbers.split(b":")
                self._line = int(line)
                self._lo = max(0, int(column) - 1 - MATCH_BEFORE)
                self._seen = 0
                self._numbers.clear()
                self._state = 2
                return pos
            self._numbers.append(byte)
        return pos

    def _take(self, chunk: bytes, start: int, stop: int) -> None:
        first = self._seen
        self._seen += stop - start
        if stop > start:
            self._cr = chunk[stop - 1] == 0x0D
        for keep, lo in ((self._head, 0), (self._window, self._lo)):
            lo, hi = max(lo, first), min(lo + MATCH_WINDOW, self._seen)
            if lo < hi:
                keep += chunk[start + lo - first : start + hi - first]

    def _finish(self) -> LineMatch:
        path = self.relative(bytes(self._path))
        self._path.clear()
        self._state = 0
        length = self._seen - self._cr  # a `\r\n` ending is not part of the text
        long = length > MATCH_WINDOW
        data = bytes(self._window if long else self._head)[: length - (self._lo if long else 0)]
        self._head.clear()
        self._window.clear()
        self._cr = False
        cut_before = long and self._lo > 0
        cut_after = long and length > self._lo + MATCH_WINDOW
        text = data.decode("utf-8", "replace")
        if cut_before:
            text = text.lstrip("\ufffd")
        if cut_after:
            text = text.rstrip("\ufffd")
        return LineMatch(path, self._line, text, cut_before=cut_before, cut_after=cut_after)


class PathStream:
    """Turns `rg --files --null` output into paths relative to the walk's top, for `take` (kept: `keep`)."""

    def __init__(
        self,
        take: Callable[[bytes], bool],
        relative: Callable[[bytes], bytes],
        keep: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.take = take
        self.relative = relative
        self.keep = keep
        self.enough = False
        self._partial = b""

    def feed(self, chunk: bytes) -> bool:
        *complete, self._partial = (self._partial + chunk).split(b"\0")
        paths: Iterator[bytes] = map(self.relative, complete)  # one loop per chunk: a walk prints thousands
        if self.keep is not None:
            paths = filter(self.keep, paths)
        take = self.take
        for path in paths:
            if not take(path):
                self.enough = True
                return False
        return True
