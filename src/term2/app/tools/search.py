"""grep: find lines matching a Python regular expression under a folder.

Matches are reported as `path:line:text` (paths relative to the workspace
root when inside it) so that the model can jump straight to read_file with
an offset. `.git`, binary files, very large files and paths ignored by the
root `.gitignore` (see walk.py for the limits of that support) are skipped;
the number of matches is capped and the cap announced.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.args import (
    ArgumentError,
    Arguments,
    optional_bool,
    optional_str,
    required_str,
)
from term2.app.tools.base import Invocation, Outcome, ToolFailed
from term2.app.tools.files import looks_binary, open_checked
from term2.app.tools.paths import display, folder_of, resolve
from term2.app.tools.walk import IgnoreRules, walk_files
from term2.domain.history import Location, ToolKind
from term2.domain.workspace import Access
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
            run=partial(self._run, path, query),
        )

    async def _run(
        self, path: str, query: SearchQuery, ctx: ToolContext, call_id: str
    ) -> Outcome:
        root = ctx.access.workspace.root
        text = await anyio.to_thread.run_sync(
            partial(grep, path, query, root, self.limit), abandon_on_cancel=True
        )
        return Outcome.text_only(text)


def grep(top: str, query: SearchQuery, root: str, limit: int) -> str:
    if not os.path.exists(top):
        raise FileNotFoundError(f"not found: {top}")
    files = [top] if os.path.isfile(top) else walk_files(top, IgnoreRules.load(root))
    lines: list[str] = []
    skipped = 0
    for path in files:
        if query.include and not fnmatch.fnmatchcase(
            os.path.basename(path), query.include
        ):
            continue
        matches = _search_file(path, query.regex)
        if matches is None:
            skipped += 1
            continue
        shown = display(path, root)
        for line_no, text in matches:
            if len(lines) == limit:
                lines.append(
                    f"[truncated: more than {limit} matches; narrow the pattern or path]"
                )
                return "\n".join(lines) + "\n"
            if len(text) > LINE_LIMIT:
                text = text[:LINE_LIMIT] + " [line cut]"
            lines.append(f"{shown}:{line_no}:{text}")
    if not lines:
        return f"No matches for {query.regex.pattern!r} under {top}\n"
    if skipped:
        lines.append(f"[{skipped} binary, unreadable or large files skipped]")
    return "\n".join(lines) + "\n"


def _search_file(path: str, regex: re.Pattern[str]) -> list[tuple[int, str]] | None:
    """Matching (line number, text) pairs, or None when the file is skipped."""
    try:
        if os.path.islink(path) or os.path.getsize(path) > FILE_SIZE_LIMIT:
            return None
        with open_checked(path) as handle:
            data = handle.read()
    except (OSError, ToolFailed):
        return None
    if looks_binary(data):
        return None
    text = data.decode("utf-8", errors="replace")
    return [
        (n, line)
        for n, line in enumerate(text.splitlines(), start=1)
        if regex.search(line)
    ]
