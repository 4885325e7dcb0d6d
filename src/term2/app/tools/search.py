"""grep: find lines matching a regular expression, in the files git would show.

ripgrep does the walk and the matching (ripgrep.py, ADR 0026), so the model
sees what git tracks or could track: every ignore file from the repository's
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
from collections.abc import Collection
from dataclasses import dataclass
from functools import partial

import anyio

from term2.app.tools import ripgrep
from term2.app.tools.args import Arguments, optional_bool, optional_str, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.globbing import Include
from term2.app.tools.names import shown, unshown
from term2.app.tools.paths import display, folder_of, resolve
from term2.app.tools.rg_output import MatchReader, PathReader
from term2.domain.footholds import is_secret_name
from term2.domain.history import Location, ToolKind
from term2.domain.workspace import Access, is_within
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

MATCH_LIMIT = 200
SECRET_COUNT_LIMIT = 10_000
ORDER = "path order (compared folder name by folder name, in byte order)"


@dataclass(frozen=True, slots=True)
class SearchQuery:
    pattern: str
    ignore_case: bool = False
    include: Include | None = None
    include_ignored: bool = False


@dataclass(frozen=True, slots=True)
class Grep:
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

    def prepare(self, args: Arguments, root: str) -> Invocation:
        pattern = required_str(args, "pattern")
        include = optional_str(args, "include")
        query = SearchQuery(
            pattern,
            optional_bool(args, "ignore_case"),
            Include.parse(include) if include else None,
            optional_bool(args, "include_ignored"),
        )
        path = resolve(root, unshown(optional_str(args, "path") or "."))
        return Invocation(
            title=f"Search {pattern!r} in {shown(path)}",
            access=Access.READ,
            target=path,
            grant_folder=folder_of(path),
            locations=(Location(shown(path)),),
            run=partial(self._run, path, query, root),
        )

    async def _run(self, path: str, query: SearchQuery, root: str, ctx: ToolContext, call_id: str) -> Outcome:
        text = await grep(path, query, root, self.limit, ctx.access.workspace.grants.read_folders)
        return Outcome.text_only(text)


async def grep(top: str, query: SearchQuery, root: str, limit: int, opened: Collection[str] = ()) -> str:
    """Search `top`, a file judged on its own or a folder whose secrets only a grant opens."""
    if not os.path.lexists(top):
        raise FileNotFoundError(f"not found: {top}")
    folder = os.path.isdir(top)
    grants = [g for g in opened if is_within(g, top) or is_within(top, g)] if folder else []
    args = [
        *ripgrep.BASE_ARGS, "--line-number", "--column", "--no-heading", "--with-filename",
        "--engine", "auto", *ripgrep.SECRET_TYPE, "-e", query.pattern,
    ]  # fmt: skip
    if query.ignore_case:
        args.append("--ignore-case")
    if query.include_ignored:
        args.append("--no-ignore")
    if query.include is not None:
        args += query.include.rg_args()
    if folder and not grants:
        args += ["--type-not", "secret"]
    place = ripgrep.Place.of(top, root)
    keep = partial(_searched, place, query.include, grants if folder else None)
    reader = MatchReader(limit * ripgrep.SORT_HERE, keep)  # rg in parallel; sorted here if that is all
    ripgrep.check_top(top, root)  # a swapped top fails here, plainly, before anything runs
    secrets: list[int] = []
    if folder:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_count_secrets, place, root, query, grants, secrets)
            finished = await _search_or_none(args, place, root, reader)
    else:
        finished = await _search_or_none(args, place, root, reader)
    if finished is not None and reader.more:  # too many to sort here: rg orders them and stops at the limit
        reader = MatchReader(limit, keep)
        finished = await _search_or_none([*args, "--sort", "path"], place, root, reader)
    else:
        reader.keep_first(limit)
    if finished is None:
        raise ToolFailed(f"the search of {shown(display(top, root))} could not run: {reader.error}")
    failure = finished.failure()
    if failure is not None and not reader.matches:
        raise ToolFailed(f"invalid regular expression or search: {failure}")
    shown_path = place.shown_under(root)
    lines = [f"{shown_path(m.path)}:{m.line}:{m.text}" for m in reader.matches]
    if not lines:
        lines.append(f"No matches for {query.pattern!r} under {shown(display(top, root))}")
    if reader.more:
        last = reader.matches[-1]
        lines.append(
            f"[truncated: the first {limit} matches in {ORDER}; matches after "
            f"{shown_path(last.path)}:{last.line} were left out: narrow the pattern, path or include]"
        )
    elif finished.stopped is not None and finished.stopped != "enough":
        lines.append(f"[search {finished.stopped}: some files were not searched]")
    if secrets and secrets[0]:
        lines.append(f"[{secrets[0]} secret files (.env) skipped; read_file asks before reading them]")
    return "\n".join(lines) + "\n"


async def _search_or_none(
    args: list[str], place: ripgrep.Place, root: str, reader: MatchReader
) -> ripgrep.Finished | None:
    """The search, its error kept on the reader rather than raised through the task group."""
    try:
        return await ripgrep.run(args, place, root, reader.feed)
    except (OSError, ToolFailed) as err:
        reader.error = str(err)
        return None


def _searched(place: ripgrep.Place, include: Include | None, grants: list[str] | None, path: bytes) -> bool:
    """Whether a path rg matched counts: within the include glob, and no secret outside a grant."""
    top = place.top
    rel = os.fsdecode(place.below_top(path))
    if include is not None and not include.matches(rel):
        return False
    if grants and is_secret_name(os.path.basename(rel)):
        return any(is_within(os.path.join(top, rel), g) for g in grants)
    return True


async def _count_secrets(
    place: ripgrep.Place, root: str, query: SearchQuery, grants: list[str], into: list[int]
) -> None:
    """How many secret files the walk meets outside a grant, whatever they hold."""
    args = ["--files", *ripgrep.BASE_ARGS, *ripgrep.SECRET_TYPE, "--type", "secret"]
    if query.include_ignored:
        args.append("--no-ignore")

    def outside_grants(path: bytes) -> bool:
        rel = os.fsdecode(place.below_top(path))
        if query.include is not None and not query.include.matches_alone(rel):
            return False
        return not any(is_within(os.path.join(place.top, rel), g) for g in grants)

    reader = PathReader(SECRET_COUNT_LIMIT, outside_grants)
    try:
        await ripgrep.run(args, place, root, reader.feed)
    except (OSError, ToolFailed):
        return  # the search itself fails the same way and says why
    into.append(len(reader.paths))
