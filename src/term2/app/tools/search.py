"""grep: find lines matching a Python regular expression under a folder.

Matches are reported as `path:line:text` (paths relative to the workspace
root when inside it) so that the model can jump straight to read_file with
an offset. `.git`, binary files, special files (FIFOs, sockets, devices),
very large files and paths ignored by the root `.gitignore` (see walk.py for
the limits of that support) are skipped; so are secret files (`.env`), which
the folder's approval does not cover. The number of matches is capped and
every cap or skip is announced.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.anchored import lstat_in, open_in, open_parent, read_upto
from term2.app.tools.args import (
    ArgumentError,
    Arguments,
    optional_bool,
    optional_str,
    required_str,
)
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import looks_binary
from term2.app.tools.paths import display, folder_of, resolve
from term2.app.tools.walk import IgnoreRules, walk
from term2.domain.history import Location, ToolKind
from term2.domain.truncation import keep_head
from term2.domain.workspace import Access, is_secret_file, is_within
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

MATCH_LIMIT = 200
LINE_LIMIT = 300
FILE_SIZE_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SearchQuery:
    regex: re.Pattern[str]
    include: str | None  # fnmatch on the file name


@dataclass(frozen=True, slots=True)
class Grep:
    limit: int = MATCH_LIMIT
    name: str = "grep"
    kind: ToolKind = ToolKind.SEARCH

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Search file contents with a Python regular expression, line by line. Prints "
                "'path:line:text'. Searches the workspace root unless 'path' names a folder or "
                "file. Skips .git, binary files and paths in the root .gitignore. "
                f"At most {self.limit} matches."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "Python regular expression.",
                    },
                    "path": {
                        "type": "string",
                        "description": "Folder or file to search.",
                    },
                    "include": {
                        "type": "string",
                        "description": "Only files whose name matches this glob, e.g. '*.py'.",
                    },
                    "ignore_case": {
                        "type": "boolean",
                        "description": "Match case-insensitively.",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str) -> Invocation:
        pattern = required_str(args, "pattern")
        flags = re.IGNORECASE if optional_bool(args, "ignore_case") else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as err:
            raise ArgumentError(f"invalid regular expression: {err}") from None
        query = SearchQuery(regex, optional_str(args, "include"))
        path = resolve(root, optional_str(args, "path") or ".")
        return Invocation(
            title=f"Search {pattern!r} in {path}",
            access=Access.READ,
            target=path,
            grant_folder=folder_of(path),
            locations=(Location(path),),
            run=partial(self._run, path, query, root),
        )

    async def _run(
        self, path: str, query: SearchQuery, root: str, ctx: ToolContext, call_id: str
    ) -> Outcome:
        opened = ctx.access.workspace.grants.read_folders
        text = await anyio.to_thread.run_sync(
            partial(grep, path, query, root, self.limit, opened), abandon_on_cancel=True
        )
        return Outcome.text_only(text)


@dataclass(slots=True)
class Skipped:
    """What a search did not read, announced in its result."""

    unreadable: int = 0  # binary, special, too large, or swapped while open
    secrets: int = 0

    def notes(self) -> list[str]:
        notes: list[str] = []
        if self.unreadable:
            notes.append(f"[{self.unreadable} binary, unreadable or large files skipped]")
        if self.secrets:
            notes.append(
                f"[{self.secrets} secret files (.env) skipped; read_file asks before reading them]"
            )
        return notes


def grep(top: str, query: SearchQuery, root: str, limit: int, opened: Collection[str] = ()) -> str:
    """Search `top`, a file that was judged on its own or a folder walked without secrets.

    A secret file met in the walk is read only inside a folder the user
    granted reads for (`opened`): the folder's approval did not cover it.
    """
    lines: list[str] = []
    skipped = Skipped()
    for shown, matches in _matches(top, query, root, opened, skipped):
        for line_no, text in matches:
            if len(lines) == limit:
                lines.append(
                    f"[truncated: more than {limit} matches; narrow the pattern or path]"
                )
                return "\n".join([*lines, *skipped.notes()]) + "\n"
            lines.append(f"{shown}:{line_no}:{keep_head(text, LINE_LIMIT, ' [line cut]')}")
    if not lines:
        lines.append(f"No matches for {query.regex.pattern!r} under {top}")
    return "\n".join([*lines, *skipped.notes()]) + "\n"


def _matches(
    top: str, query: SearchQuery, root: str, opened: Collection[str], skipped: Skipped
) -> Iterator[tuple[str, list[tuple[int, str]]]]:
    folder_fd, name = open_parent(top, root)
    try:
        if not stat.S_ISDIR(lstat_in(folder_fd, name, top).st_mode):
            matches = _search(open_in(folder_fd, name, top), query.regex)
            if matches is None:
                skipped.unreadable += 1
            else:
                yield display(top, root), matches
            return
    finally:
        os.close(folder_fd)
    for found in walk(top, root, IgnoreRules.load(root)):
        if found.kind == "folder" or found.kind == "link":
            continue
        if query.include and not fnmatch.fnmatchcase(found.name, query.include):
            continue
        if is_secret_file(found.path) and not any(is_within(found.path, f) for f in opened):
            skipped.secrets += 1
            continue
        try:
            fd = open_in(found.folder_fd, found.name, found.path)
        except (OSError, ToolFailed):
            skipped.unreadable += 1
            continue
        matches = _search(fd, query.regex)
        if matches is None:
            skipped.unreadable += 1
        else:
            yield display(found.path, root), matches


def _search(fd: int, regex: re.Pattern[str]) -> list[tuple[int, str]] | None:
    """Matching (line number, text) pairs in the open file, or None when it is skipped; closes `fd`."""
    try:
        if os.fstat(fd).st_size > FILE_SIZE_LIMIT:
            return None
        data = read_upto(fd, FILE_SIZE_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > FILE_SIZE_LIMIT or looks_binary(data):
        return None
    text = data.decode("utf-8", errors="replace")
    return [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if regex.search(line)
    ]
