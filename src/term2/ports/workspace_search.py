"""Workspace search port: walk a folder as git sees it, and search the files it holds.

`grep`, `glob` and `list_dir`'s `[ignored]` marks need one thing from the
file system: the files below a folder that git tracks or could track (every
`.gitignore` from the repository's top down, `.git/info/exclude`, the user's
global excludes, and `.ignore`/`.rgignore` as search tools read them), and
the lines of those files matching a pattern. The tools decide everything
else (the workspace rule, approvals, grants, which secrets a search may
open, how results are shown); an adapter decides how the walk is done and
confined (ADR 0032).

Results stream to the caller's `take`, which returns False once it has what
it needs; every walk is bounded in time and ends when the caller's cancel
scope is cancelled, leaving nothing running.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

TIME_LIMIT = 30.0
MATCH_BEFORE = 100  # bytes of a long line kept before its first match
MATCH_WINDOW = 300  # bytes of a long line kept in all


class WorkspaceSearchFailed(Exception):
    """The walk could not run at all (its engine or its confinement is missing or failed): nothing was seen."""


class Secrets(enum.Enum):
    """What a walk does with secret files (`.env`, `.env.*`: domain/footholds.is_secret_name)."""

    SKIP = "skip"  # never returned, never searched
    INCLUDE = "include"  # walked like any other file
    ONLY = "only"  # only they are returned: to count what a search left out, never to read them


@dataclass(frozen=True, slots=True)
class Walk:
    """Which files a walk returns.

    `top` is a canonical folder (or one file, which is returned whatever the
    rules and filters say) inside `root`, the canonical workspace root, or a
    path outside it that the user approved. The ignore rules are git's for
    the repository holding `top` (or `root`, when `top` is inside it), from
    the repository's top level down, even when that top level is above
    `root`; outside any repository `.gitignore` files do not apply, and a
    nested repository is seen with its own rules only. `.ignore` and
    `.rgignore` files apply too, before `.gitignore` files, as search tools
    read them. `top` itself is never judged by the rules: a folder the model
    names inside an ignored one is walked.

    Always: `.git` (a folder or a file) is skipped at any depth, symlinks are
    not followed or returned, only regular files are returned, and the walk
    reads nothing outside `root` (or outside `top`, when that lies outside).

    `descriptor`: when `top` is one file, a read-only descriptor of it that the
    caller opened without following links and judged. `lines` searches what that
    descriptor holds and never opens `top` by its path (a path is resolved again
    when it is opened, and anything running beside term2 can swap it for a link
    to a secret in between, issue 30); it refuses a file `top` without one.
    The caller keeps and closes it. `files` ignores it (it lists, never reads).
    """

    root: str
    top: str
    include_ignored: bool = False  # ignore no file (git's rules off); `.git` stays skipped
    name_glob: str | None = None  # only files whose name matches (`*`, `?`, `[...]`, `{a,b}`), after the rules
    secrets: Secrets = Secrets.INCLUDE
    ordered: bool = False  # stream in path order (compared name by name, in byte order); slower
    time_limit: float = TIME_LIMIT
    descriptor: int | None = None  # `top`, opened by the caller: searched as it is, never by path


@dataclass(frozen=True, slots=True)
class LineQuery:
    """What `lines` looks for: a regular expression, line by line.

    The common syntax (literals, `.`, classes, `*`, `+`, `?`, `{n,m}`,
    `|`, groups, `^`, `$`, `\\b`, `\\d`, `\\w`, `\\s`) means the same in every
    adapter; past it, each adapter's engine has its own.
    """

    pattern: str
    ignore_case: bool = False


@dataclass(frozen=True, slots=True)
class LineMatch:
    """One line holding a match.

    `path` is relative to the walk's `top` (the file's own name when `top`
    is a file), as bytes: any name Linux allows. Lines end at `\\n` only, so
    `line` is the number read_file gives that line; `text` is the line
    without its `\\n` or `\\r\\n`, or, when longer than MATCH_WINDOW bytes,
    the window of it around the first match, `cut_before`/`cut_after`
    saying where it was cut (a character split by the cut is dropped).
    Files holding a NUL byte (binary) are not searched.
    """

    path: bytes
    line: int
    text: str
    cut_before: bool = False
    cut_after: bool = False


@dataclass(frozen=True, slots=True)
class WalkEnd:
    """How a walk ended.

    `enough`: `take` asked to stop. `cut_short`: a bound (time, output)
    ended it first, so some files were not seen; it says which, for the
    model ("stopped after 30 s"). `complaint`: the engine refused the
    request (an invalid pattern, say) or reported an error; with no results
    it is why there are none.
    """

    enough: bool = False
    cut_short: str | None = None
    complaint: str | None = None

    @property
    def complete(self) -> bool:
        """Every file the walk should see was seen (or the caller had enough)."""
        return self.cut_short is None


class WorkspaceSearch(Protocol):
    async def files(self, walk: Walk, take: Callable[[bytes], bool]) -> WalkEnd:
        """Give `take` the path of each file the walk returns, relative to `walk.top`, until it returns False.

        Raises WorkspaceSearchFailed when the walk cannot run at all.
        """
        ...

    async def lines(self, walk: Walk, query: LineQuery, take: Callable[[LineMatch], bool]) -> WalkEnd:
        """Give `take` each line matching `query` in the files the walk returns, until it returns False.

        Within a file, lines come in order; files come in path order only when `walk.ordered`.
        Raises WorkspaceSearchFailed when the search cannot run at all, and when `walk.top` is
        not a folder and `walk.descriptor` is None (a file is searched only by its descriptor).
        """
        ...

    async def aclose(self) -> None:
        """Let go of what the adapter keeps between walks (a kept view's processes, ADR 0037); walks
        after it still run, each on its own. Called once at shutdown by the composition root."""
        ...
