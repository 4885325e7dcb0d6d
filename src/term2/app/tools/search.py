"""grep: find lines matching a regular expression, in the files git would show.

The workspace search port does the walk and the matching (ADR 0026, 0032),
so the model sees what git tracks or could track: every ignore file from the repository's
top down applies, `.git` is never searched, binary files and special files
(FIFOs, sockets, devices) are skipped, and large text files are searched as
they stream. Matches come as `path:line:text` in path order, the line
numbered as read_file numbers it (only `\\n` ends a line) and cut around the
match when long. Secret files (`.env`, `.env.*`) met in the walk are not
searched unless a read grant covers their folder, and the result says how
many were skipped (a count of files met, never of files that matched: that
would tell the model what a secret holds).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, replace
from functools import partial

import anyio

from term2.app.tools import search_walks
from term2.app.tools.anchored import open_regular
from term2.app.tools.args import Arguments, optional_bool, optional_str, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.globbing import Include
from term2.app.tools.names import located, shown
from term2.app.tools.paths import display, folder_of, resolve_shown
from term2.app.tools.search_walks import ORDER, First, check_top, engine, first_in_order, shown_under
from term2.domain.footholds import is_secret_name
from term2.domain.history import ToolKind
from term2.domain.roots import anchor
from term2.domain.workspace import Access, is_within
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext
from term2.ports.workspace_search import (
    LineMatch,
    LineQuery,
    Secrets,
    Walk,
    WalkEnd,
    WorkspaceSearch,
    WorkspaceSearchFailed,
)

MATCH_LIMIT = 200
SECRET_COUNT_LIMIT = 10_000
CUT = "[line cut]"


@dataclass(frozen=True, slots=True)
class SearchQuery:
    pattern: str
    ignore_case: bool = False
    include: Include | None = None
    include_ignored: bool = False


@dataclass(frozen=True, slots=True)
class Grep:
    search: WorkspaceSearch | None = None  # None: a toolbox for its specs only; a call fails closed
    limit: int = MATCH_LIMIT
    name: str = "grep"
    kind: ToolKind = ToolKind.SEARCH

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Search file contents with a regular expression (ripgrep's syntax; look-around and "
                "back-references work too), line by line. Prints 'path:line:text' in path order; the "
                "line number is the one read_file uses, and a long line is cut around the match. "
                "Searches the workspace root unless 'path' names a folder or file. Like git, skips "
                ".git and whatever the repository's .gitignore files, .git/info/exclude and the global "
                "excludes ignore, unless 'include_ignored' is true or 'path' is inside an ignored folder; "
                "skips binary files and .env files. A name that is not UTF-8, or holds a backslash or "
                "control character, is shown with '\\\\' for a backslash and '\\xNN' for each such byte; "
                f"pass it back exactly as shown. At most {self.limit} matches."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {"type": "string", "description": "Folder or file to search."},
                    "include": {
                        "type": "string",
                        "description": (
                            "Only files matching this glob, as `rg -g` reads it: '*.py' (a name, at any "
                            "depth) or 'packages/**/*.js' (a path below 'path')."
                        ),
                    },
                    "ignore_case": {"type": "boolean", "description": "Match case-insensitively."},
                    "include_ignored": {
                        "type": "boolean",
                        "description": "Also search what git ignores (node_modules, build output, ...).",
                    },
                },
                "required": ["pattern"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        pattern = required_str(args, "pattern")
        include = optional_str(args, "include")
        query = SearchQuery(
            pattern,
            optional_bool(args, "ignore_case"),
            Include.parse(include) if include else None,
            optional_bool(args, "include_ignored"),
        )
        path = resolve_shown(root, optional_str(args, "path") or ".")
        base, root = root, anchor(path, root, extra_roots)  # searched from the root holding it, named from cwd
        return Invocation(
            title=f"Search {pattern!r} in {shown(path)}",
            access=Access.READ,
            target=path,
            grant_folder=folder_of(path),
            locations=located(path),
            run=partial(self._run, path, query, root, base),
        )

    async def _run(
        self, path: str, query: SearchQuery, root: str, base: str, ctx: ToolContext, call_id: str
    ) -> Outcome:
        search = engine(self.search, self.name)
        opened = ctx.access.workspace.grants.read_folders
        text = await grep(search, path, query, root, self.limit, opened, named_from=base)
        return Outcome.text_only(text)


async def grep(
    search: WorkspaceSearch,
    top: str,
    query: SearchQuery,
    root: str,
    limit: int,
    opened: Collection[str] = (),
    *,
    named_from: str | None = None,
) -> str:
    """Search `top`, a file judged on its own or a folder whose secrets only a grant opens.

    `root` is the root holding `top` (its view is searched); results are named relative to `named_from`
    (the session's cwd, when that is another root), so that every name the model reads it can pass back.
    """
    base = root if named_from is None else named_from
    if not os.path.lexists(top):
        raise FileNotFoundError(f"not found: {top}")
    folder = os.path.isdir(top)
    grants = [g for g in opened if is_within(g, top) or is_within(top, g)] if folder else []
    walk = Walk(
        root,
        top,
        include_ignored=query.include_ignored,
        name_glob=query.include.name_glob if query.include is not None else None,
        secrets=Secrets.SKIP if folder and not grants else Secrets.INCLUDE,
        time_limit=search_walks.TIME_LIMIT,
    )
    lines = LineQuery(query.pattern, query.ignore_case)

    def run(walk: Walk, take: Callable[[LineMatch], bool]) -> Awaitable[WalkEnd]:
        return search.lines(walk, lines, take)

    keep = partial(_searched, top, query.include, grants if folder else None)
    secrets: list[int] = []
    if folder:
        check_top(top, root)  # a swapped top fails here, plainly, before anything runs
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_count_secrets, search, walk, query, grants, secrets)
            found = await _first_or_failure(run, walk, limit, keep)
    else:
        # The judged file, opened here by descriptors (no link followed): the engine reads that
        # descriptor, never the path, which anything running beside term2 could swap for a link
        # to a secret between this check and the engine's open (issue 30).
        file = open_regular(top, root, verb="searched")
        try:
            found = await _first_or_failure(run, replace(walk, descriptor=file), limit, keep)
        finally:
            os.close(file)
    if isinstance(found, WorkspaceSearchFailed):
        raise ToolFailed(f"the search of {shown(display(top, base))} could not run: {found}") from found
    if found.end.complaint is not None and not found.items:
        raise ToolFailed(f"invalid regular expression or search: {found.end.complaint}")
    shown_path = shown_under(top, base)
    out = [f"{shown_path(m.path)}:{m.line}:{_text(m)}" for m in found.items]
    if not out:
        out.append(f"No matches for {query.pattern!r} under {shown(display(top, base))}")
    if found.more:
        last = found.items[-1]
        out.append(
            f"[truncated: the first {limit} matches in {ORDER}; matches after "
            f"{shown_path(last.path)}:{last.line} were left out: narrow the pattern, path or include]"
        )
    elif found.end.cut_short is not None:
        out.append(f"[search {found.end.cut_short}: some files were not searched]")
    if secrets and secrets[0]:
        out.append(f"[{secrets[0]} secret files (.env) skipped; read_file asks before reading them]")
    return "\n".join(out) + "\n"


async def _first_or_failure(
    run: Callable[[Walk, Callable[[LineMatch], bool]], Awaitable[WalkEnd]],
    walk: Walk,
    limit: int,
    keep: Callable[[LineMatch], bool],
) -> First[LineMatch] | WorkspaceSearchFailed:
    """The search, its failure returned rather than raised through the task group (as an exception group)."""
    try:
        return await first_in_order(run, walk, limit, keep)
    except WorkspaceSearchFailed as err:
        return err


def _text(match: LineMatch) -> str:
    """The line as the model sees it: where a long one was cut is said."""
    text = match.text
    if match.cut_before:
        text = f"{CUT} {text}"
    if match.cut_after:
        text = f"{text} {CUT}"
    return text


def _searched(top: str, include: Include | None, grants: list[str] | None, match: LineMatch) -> bool:
    """Whether a matched line counts: within the include glob, and no secret outside a grant."""
    rel = os.fsdecode(match.path)
    if include is not None and not include.matches(rel):
        return False
    if grants and is_secret_name(os.path.basename(rel)):
        return any(is_within(os.path.join(top, rel), g) for g in grants)
    return True


async def _count_secrets(
    search: WorkspaceSearch, walk: Walk, query: SearchQuery, grants: list[str], into: list[int]
) -> None:
    """How many secret files the walk meets outside a grant, whatever they hold."""
    counted = 0

    def outside_grants(path: bytes) -> bool:
        nonlocal counted
        rel = os.fsdecode(path)
        if query.include is not None and not query.include.matches(rel):
            return True
        if not any(is_within(os.path.join(walk.top, rel), g) for g in grants):
            counted += 1
        return counted < SECRET_COUNT_LIMIT

    try:
        await search.files(replace(walk, secrets=Secrets.ONLY, ordered=False), outside_grants)
    except WorkspaceSearchFailed:
        return  # the search itself fails the same way and says why
    into.append(counted)
