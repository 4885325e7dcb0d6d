"""list_dir and glob: let the model see what is in the workspace.

Both skip `.git` and cap the number of entries, announcing the cap, since a
model that receives 50 000 paths learns nothing and pays for all of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.anchored import open_folder
from term2.app.tools.args import Arguments, optional_str, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.globbing import check_pattern, glob_regex
from term2.app.tools.paths import display, resolve
from term2.app.tools.walk import ALWAYS_SKIPPED, walk
from term2.domain.history import Location, ToolKind
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

ENTRY_LIMIT = 1000
SCAN_LIMIT = 200_000


@dataclass(frozen=True, slots=True)
class ListDir:
    limit: int = ENTRY_LIMIT
    name: str = "list_dir"
    kind: ToolKind = ToolKind.READ

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "List the entries of one folder (not recursive). Folders end with '/', symlinks "
                f"show their target. '.git' is omitted. At most {self.limit} entries."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {
                        "type": "string",
                        "description": "Folder to list; defaults to the workspace root.",
                    },
                },
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str) -> Invocation:
        path = resolve(root, optional_str(args, "path") or ".")
        return Invocation(
            title=f"List {path}",
            access=Access.READ,
            target=path,
            grant_folder=path,
            locations=(Location(path),),
            run=partial(self._run, path, root),
        )

    async def _run(self, path: str, root: str, ctx: ToolContext, call_id: str) -> Outcome:
        text = await anyio.to_thread.run_sync(
            partial(list_entries, path, root, self.limit), abandon_on_cancel=True
        )
        return Outcome.text_only(text)


def list_entries(path: str, root: str, limit: int) -> str:
    fd = open_folder(path, root, readable=True)
    try:
        with os.scandir(fd) as scan:
            entries = sorted(
                (e for e in scan if e.name not in ALWAYS_SKIPPED), key=lambda e: e.name
            )
        if not entries:
            return f"{path} is empty\n"
        lines: list[str] = []
        for entry in entries[:limit]:
            if entry.is_symlink():
                lines.append(f"{entry.name} -> {os.readlink(entry.name, dir_fd=fd)}")
            elif entry.is_dir(follow_symlinks=False):
                lines.append(entry.name + "/")
            else:
                lines.append(entry.name)
    finally:
        os.close(fd)
    if len(entries) > limit:
        lines.append(f"[truncated: showing {limit} of {len(entries)} entries]")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Glob:
    limit: int = ENTRY_LIMIT
    name: str = "glob"
    kind: ToolKind = ToolKind.SEARCH

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Find files and folders whose path (relative to 'path') matches a glob pattern. "
                "'*' and '?' stay within one path segment, '**' spans folders: use '**/*.py' to "
                f"search recursively. '.git' is skipped; symlinked folders are not entered. At most "
                f"{self.limit} results, sorted by path."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "Glob pattern, e.g. 'src/**/*.py'.",
                    },
                    "path": {
                        "type": "string",
                        "description": "Folder to search; defaults to the workspace root.",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str) -> Invocation:
        pattern = check_pattern(required_str(args, "pattern"))
        path = resolve(root, optional_str(args, "path") or ".")
        return Invocation(
            title=f"Find {pattern} in {path}",
            access=Access.READ,
            target=path,
            grant_folder=path,
            locations=(Location(path),),
            run=partial(self._run, path, pattern, root),
        )

    async def _run(
        self, path: str, pattern: str, root: str, ctx: ToolContext, call_id: str
    ) -> Outcome:
        text = await anyio.to_thread.run_sync(
            partial(glob_paths, path, pattern, root, self.limit), abandon_on_cancel=True
        )
        return Outcome.text_only(text)


def glob_paths(top: str, pattern: str, root: str, limit: int) -> str:
    regex = glob_regex(pattern)
    found: list[str] = []
    more = False
    for scanned, entry in enumerate(walk(top, root), start=1):
        if scanned > SCAN_LIMIT:
            more = True
            break
        if regex.fullmatch(os.path.relpath(entry.path, top)):
            if len(found) == limit:
                more = True
                break
            found.append(display(entry.path, root) + ("/" if entry.kind == "folder" else ""))
    if not found:
        return f"No paths match {pattern} under {top}\n"
    found.sort()
    lines = found
    if more:
        lines = [
            *found,
            f"[truncated: stopped after {len(found)} results; narrow the pattern or path]",
        ]
    return "\n".join(lines) + "\n"
