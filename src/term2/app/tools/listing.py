"""list_dir and glob: let the model see what is in the workspace, and what git ignores.

glob lists the files the workspace search's walk returns (ADR 0026, 0032), so
it sees the repository as git does; list_dir lists one folder itself and marks what git
ignores, asking the same walk which entries hold anything it would search.
Both skip `.git`, show names that are not UTF-8 escaped (names.py), and cap
the number of entries, announcing the cap, since a model that receives
50 000 paths learns nothing and pays for all of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools import search_walks
from term2.app.tools.anchored import FOLDER_READ, open_folder
from term2.app.tools.args import Arguments, optional_bool, optional_str, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.globbing import Include
from term2.app.tools.names import located, shown
from term2.app.tools.paths import display, resolve_shown
from term2.app.tools.search_walks import check_top, engine, first_in_order, shown_under
from term2.domain.history import ToolKind
from term2.domain.roots import anchor
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext
from term2.ports.workspace_search import Walk, WorkspaceSearch, WorkspaceSearchFailed

ALWAYS_SKIPPED = frozenset({".git"})
MARK_TIME_LIMIT = 10.0
ENTRY_LIMIT = 1000
NAMES_NOTE = (
    "A name that is not UTF-8, or holds a backslash or control character, is shown with '\\\\' for a "
    "backslash and '\\xNN' for each such byte; pass it back exactly as shown."
)


@dataclass(frozen=True, slots=True)
class ListDir:
    search: WorkspaceSearch | None = None  # None: a toolbox for its specs only; a call fails closed
    limit: int = ENTRY_LIMIT
    name: str = "list_dir"
    kind: ToolKind = ToolKind.READ

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "List the entries of one folder (not recursive), sorted by name. Folders end with '/', "
                "symlinks show their target. Entries git ignores (.gitignore files, .git/info/exclude, "
                "global excludes) are marked '[ignored]' (a folder: nothing in it is searched); grep and "
                f"glob skip them unless asked. '.git' is omitted. {NAMES_NOTE} At most {self.limit} entries."
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

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        path = resolve_shown(root, optional_str(args, "path") or ".")
        root = anchor(path, root, extra_roots)  # judged, opened and walked from the root that holds it
        return Invocation(
            title=f"List {shown(path)}",
            access=Access.READ,
            target=path,
            grant_folder=path,
            locations=located(path),
            run=partial(self._run, path, root),
        )

    async def _run(self, path: str, root: str, ctx: ToolContext, call_id: str) -> Outcome:
        return Outcome.text_only(await list_entries(engine(self.search, self.name), path, root, self.limit))


@dataclass(frozen=True, slots=True)
class Entry:
    name: str  # surrogateescape str: shown() before it leaves this module
    kind: str  # "folder", "file", "link" or "special"
    target: str = ""  # a link's target
    empty: bool = False  # a folder with nothing in it (git shows no such folder, but ignores none either)


def _scan(path: str, root: str) -> list[Entry]:
    fd = open_folder(path, root, readable=True)
    try:
        with os.scandir(fd) as scan:
            found = sorted((e for e in scan if e.name not in ALWAYS_SKIPPED), key=lambda e: os.fsencode(e.name))
        entries: list[Entry] = []
        for entry in found:
            if entry.is_symlink():
                entries.append(Entry(entry.name, "link", os.readlink(entry.name, dir_fd=fd)))
            elif entry.is_dir(follow_symlinks=False):
                entries.append(Entry(entry.name, "folder", empty=_is_empty(fd, entry.name)))
            elif entry.is_file(follow_symlinks=False):
                entries.append(Entry(entry.name, "file"))
            else:
                entries.append(Entry(entry.name, "special"))
        return entries
    finally:
        os.close(fd)


def _is_empty(fd: int, name: str) -> bool:
    try:
        child = os.open(name, FOLDER_READ, dir_fd=fd)
    except OSError:
        return False
    try:
        with os.scandir(child) as scan:
            return next(iter(scan), None) is None
    finally:
        os.close(child)


async def list_entries(search: WorkspaceSearch, path: str, root: str, limit: int) -> str:
    entries = await anyio.to_thread.run_sync(partial(_scan, path, root), abandon_on_cancel=True)
    if not entries:
        return f"{shown(path)} is empty\n"
    wanted = {os.fsencode(e.name) for e in entries if e.kind == "file" or (e.kind == "folder" and not e.empty)}
    seen, complete = await _searched_names(search, path, root, wanted)
    lines: list[str] = []
    for entry in entries[:limit]:
        name = shown(entry.name)
        ignored = complete and os.fsencode(entry.name) in wanted - seen
        mark = " [ignored]" if ignored else ""
        if entry.kind == "link":
            lines.append(f"{name} -> {shown(entry.target)}")
        elif entry.kind == "folder":
            lines.append(f"{name}/{mark}")
        else:
            lines.append(f"{name}{mark}")
    if len(entries) > limit:
        lines.append(f"[truncated: showing {limit} of {len(entries)} entries]")
    if not complete:
        lines.append("[ignored entries are not marked: the walk that finds them did not finish in time]")
    return "\n".join(lines) + "\n"


async def _searched_names(search: WorkspaceSearch, path: str, root: str, wanted: set[bytes]) -> tuple[set[bytes], bool]:
    """Which of the folder's entries the walk shows a file in; stops once it has seen them all."""
    seen: set[bytes] = set()

    def take(found: bytes) -> bool:
        seen.add(found.split(b"/", 1)[0])
        return not wanted <= seen

    if not wanted:
        return seen, True
    walk = Walk(root, path, time_limit=min(MARK_TIME_LIMIT, search_walks.TIME_LIMIT))
    try:
        end = await search.files(walk, take)
    except WorkspaceSearchFailed as err:
        raise ToolFailed(f"the entries of {shown(display(path, root))} git ignores could not be found: {err}") from err
    return seen, end.complete


@dataclass(frozen=True, slots=True)
class Glob:
    search: WorkspaceSearch | None = None  # None: a toolbox for its specs only; a call fails closed
    limit: int = ENTRY_LIMIT
    name: str = "glob"
    kind: ToolKind = ToolKind.SEARCH

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Find files by a glob, as `rg -g` reads it: '*.py' matches a name at any depth, "
                "'src/**/*.py' a path below 'path' ('*' and '?' stay within one folder, '**' spans "
                "folders). Like git, skips .git and what .gitignore files, .git/info/exclude and the "
                "global excludes ignore, unless 'include_ignored' is true or 'path' is inside an ignored "
                "folder; symlinks are not followed. Files only (list_dir shows folders). "
                f"{NAMES_NOTE} At most {self.limit} results, in path order (compared folder name by "
                "folder name, in byte order)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {
                        "type": "string",
                        "description": "Glob pattern, e.g. '**/*.py' or 'packages/**/package.json'.",
                    },
                    "path": {
                        "type": "string",
                        "description": "Folder to search; defaults to the workspace root.",
                    },
                    "include_ignored": {
                        "type": "boolean",
                        "description": "Also list what git ignores (node_modules, build output, ...).",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        include = Include.parse(required_str(args, "pattern"))
        path = resolve_shown(root, optional_str(args, "path") or ".")
        base, root = root, anchor(path, root, extra_roots)  # walked from the root holding it, named from cwd
        ignored = optional_bool(args, "include_ignored")
        return Invocation(
            title=f"Find {include.pattern} in {shown(path)}",
            access=Access.READ,
            target=path,
            grant_folder=path,
            locations=located(path),
            run=partial(self._run, path, include, root, base, ignored),
        )

    async def _run(
        self, path: str, include: Include, root: str, base: str, ignored: bool, ctx: ToolContext, call_id: str
    ) -> Outcome:
        search = engine(self.search, self.name)
        found = await glob_paths(search, path, include, root, self.limit, include_ignored=ignored, named_from=base)
        return Outcome.text_only(found)


async def glob_paths(
    search: WorkspaceSearch,
    top: str,
    include: Include,
    root: str,
    limit: int,
    *,
    include_ignored: bool = False,
    named_from: str | None = None,
) -> str:
    """The files under `top` matching `include`, walked from `root` and named relative to `named_from` (cwd)."""
    base = root if named_from is None else named_from
    if not os.path.isdir(top):
        raise ToolFailed(f"{shown(top)} is not a folder; glob searches folders")
    walk = Walk(
        root, top, include_ignored=include_ignored, name_glob=include.name_glob, time_limit=search_walks.TIME_LIMIT
    )

    def matching(path: bytes) -> bool:
        return include.matches(os.fsdecode(path))

    plain = include.name_glob is not None and not include.anchored  # a plain name glob is the walk's own
    keep = None if plain or include.everything else matching
    check_top(top, root)  # a swapped top fails here, plainly, before anything runs
    try:
        found = await first_in_order(search.files, walk, limit, keep)
    except WorkspaceSearchFailed as err:
        raise ToolFailed(f"glob could not run: {err}") from err
    if found.end.complaint is not None and not found.items:
        raise ToolFailed(f"glob failed: {found.end.complaint}")
    shown_path = shown_under(top, base)
    lines = [shown_path(p) for p in found.items]
    if not lines:
        return f"No files match {include.pattern} under {shown(display(top, base))}\n"
    if found.more:
        lines.append(
            f"[truncated: the first {limit} files in path order; files after {lines[-1]} were left out: "
            "narrow the pattern or path]"
        )
    elif found.end.cut_short is not None:
        lines.append(f"[walk {found.end.cut_short}: some files were not listed]")
    return "\n".join(lines) + "\n"
