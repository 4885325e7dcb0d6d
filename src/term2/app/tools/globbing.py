"""The path globs of `glob` and grep's `include`, read the way `rg -g` reads them.

A glob without a `/` matches a file's name at any depth (`*.py`); one with a
`/` (a leading one too: `/*.py`) matches the whole path below the folder
searched (`packages/**/*.js`).
ripgrep's own `-g` would do both, but it also overrides the ignore rules (an
ignored `keep.log` comes back for `-g '*.log'`), so the walk is not asked for
that: the name part goes to the workspace search as its name glob, which it
applies after the ignore rules, and a glob with a `/` is also matched here,
as a regular expression, against the paths the walk returns. Supported in
that part: `*` and `?` within one segment, `[...]` classes, and `**` as a
whole segment for any number of folders.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from term2.app.tools.args import ArgumentError


def check_pattern(pattern: str) -> str:
    if not pattern:
        raise ArgumentError("pattern must not be empty")
    if ".." in pattern.split("/"):
        raise ArgumentError("pattern must not contain '..'; pass the folder to search as 'path'")
    return pattern


@functools.lru_cache(maxsize=64)
def glob_regex(pattern: str) -> re.Pattern[str]:
    segments = [s for s in check_pattern(pattern).split("/") if s not in ("", ".")]
    parts: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            parts.append(".*" if last else "(?:[^/]+/)*")
        else:
            parts.append(_segment(segment) + ("" if last else "/"))
    return re.compile("".join(parts))


def _segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2 if segment[i + 1 : i + 2] in ("!", "^") else i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\").replace("/", "") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Include:
    """A path glob that rg narrows by file name and that `matches` checks on the whole path."""

    pattern: str
    anchored: bool = False  # it holds a `/` (a leading one too): the whole path must match

    @staticmethod
    def parse(pattern: str) -> Include:
        body = check_pattern(pattern).rstrip("/")
        return Include(body.lstrip("/"), "/" in body)

    @property
    def name_glob(self) -> str | None:
        """The glob's last part, for the walk to match names with (None: one this module matches alone)."""
        name = self.pattern.rsplit("/", 1)[-1]
        return None if not name or "**" in name else name

    @property
    def everything(self) -> bool:
        """`**` (or `**/**`...): every path matches, so none needs to be checked."""
        return all(part == "**" for part in self.pattern.split("/"))

    def matches(self, rel: str) -> bool:
        """Whether `rel`, a path below the folder searched, is one the glob names, past the walk's name glob."""
        if self.anchored:
            return glob_regex(self.pattern).fullmatch(rel) is not None
        if self.name_glob is None:
            return glob_regex(self.pattern).fullmatch(rel.rsplit("/", 1)[-1]) is not None
        return True  # a name glob: the walk already decided
