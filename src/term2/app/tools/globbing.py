"""Translate a glob pattern into a regular expression over relative paths.

Python 3.11's pathlib glob follows symlinked directories with `*/` and
accepts `..` in patterns, either of which could lead a listing out of the
approved folder; matching our own walk against a regex avoids both.
Supported: `*` and `?` within one path segment, `[...]` classes, and `**`
as a whole segment for any number of directories.
"""

from __future__ import annotations

import re

from term2.app.tools.args import ArgumentError


def check_pattern(pattern: str) -> str:
    if not pattern:
        raise ArgumentError("pattern must not be empty")
    if pattern.startswith("/"):
        raise ArgumentError(
            "pattern must be relative; pass the folder to search as 'path'"
        )
    if ".." in pattern.split("/"):
        raise ArgumentError(
            "pattern must not contain '..'; pass the folder to search as 'path'"
        )
    return pattern


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
            end = segment.find(
                "]", i + 2 if segment[i + 1 : i + 2] in ("!", "^") else i + 1
            )
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
