"""One workspace search suite, two adapters, the same trees.

(a) `ripgrep`: RipgrepWorkspaceSearch, the real one: rg in a bubblewrap view, over a
    git repository written to a temporary folder (with `git init`); `kept`, as term2 builds
    it, starts rg from a server kept in the view (ADR 0037), `per-call` makes a view a walk.
(b) `memory`: MemoryWorkspaceSearch (tests/fakes), git's rules composed over an in-memory
    tree with pathspec, the double the tool tests may use.

Each test builds one tree (paths relative to a base folder: the repository, the user's
global excludes beside it), gives it to both, and states the answer git gives: which files
a walk returns (nested `.gitignore` files, negation, anchoring, directory-only patterns,
`**`, `.git/info/exclude`, the global excludes, a session folder below the repository's
top, a nested repository), what `include_ignored` and an explicit path reach, how secrets
are skipped, kept or counted, the order, the lines a pattern finds (numbered as read_file
numbers them, cut around the match when long), and that a caller can stop, cap or cancel
a walk. The real adapter's own guarantees (the view, the bounds) are in
tests/unit/test_search_tools_rg.py and tests/unit/test_file_tool_attacks.py.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from term2.adapters.workspace import RipgrepWorkspaceSearch
from term2.ports.workspace_search import (
    MATCH_WINDOW,
    LineMatch,
    LineQuery,
    Secrets,
    Walk,
    WalkEnd,
    WorkspaceSearch,
    WorkspaceSearchFailed,
)
from tests.fakes.workspace_search import Link, MemoryTree, MemoryWorkspaceSearch, Special

pytestmark = pytest.mark.anyio

HAVE_BWRAP = os.path.exists("/usr/bin/bwrap")
GLOBAL = "xdg/git/ignore"  # the user's global excludes file, relative to the base folder
Entry = bytes | Link | Special | None  # None: an empty folder; "REPO/.git/" marks a repository
T = TypeVar("T")


@dataclass
class Rig:
    base: str  # canonical; the tree's paths are relative to it
    search: WorkspaceSearch
    broken: WorkspaceSearch  # the same adapter, unable to run

    def walk(self, top: str = "work", root: str = "work", **kw: Any) -> Walk:
        return Walk(os.path.join(self.base, root), os.path.join(self.base, top).rstrip("/"), **kw)

    async def files(self, top: str = "work", root: str = "work", **kw: Any) -> list[str]:
        found: list[bytes] = []
        end = await self.search.files(self.walk(top, root, **kw), _into(found))
        assert end == WalkEnd()
        return [os.fsdecode(p) for p in found]

    async def file_set(self, top: str = "work", root: str = "work", **kw: Any) -> set[str]:
        return set(await self.files(top, root, **kw))

    async def lines(self, pattern: str, top: str = "work", ignore_case: bool = False, **kw: Any) -> list[LineMatch]:
        found: list[LineMatch] = []
        end = await self.search.lines(self.walk(top, **kw), LineQuery(pattern, ignore_case), _into(found))
        assert end == WalkEnd()
        return sorted(found, key=lambda m: (m.path.split(b"/"), m.line))


Build = Callable[[Mapping[str, Entry]], Rig]


@pytest.fixture(params=["ripgrep-kept", "ripgrep-per-call", "memory"])
async def build(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Build]:
    base = os.path.realpath(tmp_path)
    # The real adapter asks the user's git for the global excludes file: point it at the tree's.
    monkeypatch.setenv("HOME", os.path.join(base, "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", os.path.join(base, "xdg"))
    if request.param != "memory" and not HAVE_BWRAP:
        pytest.skip("bubblewrap is not installed")
    made: list[RipgrepWorkspaceSearch] = []

    def make(tree: Mapping[str, Entry]) -> Rig:
        if request.param == "memory":
            entries = {os.path.join(base, rel): node for rel, node in tree.items()}
            search = MemoryWorkspaceSearch(MemoryTree.of(entries), os.path.join(base, GLOBAL))
            broken = MemoryWorkspaceSearch(MemoryTree.of(entries), available=False)
            return Rig(base, search, broken)
        _write(base, tree)
        broken_bwrap = os.path.join(base, "no-bwrap")
        kept = request.param == "ripgrep-kept"
        made.append(RipgrepWorkspaceSearch(kept=kept))
        return Rig(base, made[-1], RipgrepWorkspaceSearch(bwrap=broken_bwrap, kept=kept))

    yield make
    for search in made:
        await search.aclose()


def _write(base: str, tree: Mapping[str, Entry]) -> None:
    for rel, node in sorted(tree.items(), key=lambda item: not item[0].endswith(".git/")):
        path = os.path.join(base, rel)
        if rel.endswith(".git/"):
            subprocess.run(["git", "init", "-q", os.path.dirname(path.rstrip("/"))], check=True)
            continue
        os.makedirs(path if node is None else os.path.dirname(path), exist_ok=True)
        if isinstance(node, bytes):
            with open(path, "wb") as file:  # `with open` and not Path: the name may not be UTF-8
                file.write(node)
        elif isinstance(node, Link):
            os.symlink(node.target, path)
        elif isinstance(node, Special):
            os.mkfifo(path)


def _repo(rel: str = "work") -> dict[str, Entry]:
    """Entries making `rel` a repository: `git init` on disk, a `.git` folder in memory."""
    return {f"{rel}/.git/": None, f"{rel}/.git/info/exclude": b""}


def _into(found: list[T]) -> Callable[[T], bool]:
    def take(item: T) -> bool:
        found.append(item)
        return True

    return take


# --- git's ignore rules ------------------------------------------------------------------


async def test_nested_ignore_files_negation_anchoring_directory_only_and_globstar(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.git/info/exclude": b"*.local\n",
            GLOBAL: b"*.swp\n",
            "work/.gitignore": b"*.log\n!keep.log\n/build/\ncache/\ndocs/**/tmp\n\\#hash\n",
            "work/a.py": b"",
            "work/debug.log": b"",
            "work/keep.log": b"",
            "work/settings.local": b"",
            "work/x.swp": b"",
            "work/#hash": b"",
            "work/build/out.o": b"",
            "work/src/build/kept.c": b"",  # `/build/` is anchored at the top
            "work/src/cache": b"",  # `cache/` names folders only
            "work/lib/cache/c.bin": b"",
            "work/docs/a/b/tmp": b"",
            "work/docs/tmpfile": b"",
            "work/pkg/.gitignore": b"!debug.log\n*.txt\n",
            "work/pkg/debug.log": b"",  # brought back by the deeper file
            "work/pkg/notes.txt": b"",
            "work/pkg/deeper/more.txt": b"",
            "work/other/notes.txt": b"",  # pkg's rules stop at pkg
        }
    )
    assert await rig.file_set() == {
        ".gitignore", "a.py", "keep.log", "src/build/kept.c", "src/cache", "docs/tmpfile",
        "pkg/.gitignore", "pkg/debug.log", "other/notes.txt",
    }  # fmt: skip


async def test_nothing_inside_an_ignored_folder_comes_back(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.gitignore": b"vendor/\n!vendor/keep.txt\n",
            "work/vendor/keep.txt": b"",
            "work/vendor/.gitignore": b"!*\n",
            "work/src/a.txt": b"",
        }
    )
    assert await rig.file_set() == {".gitignore", "src/a.txt"}


async def test_a_session_folder_below_the_repository_top_keeps_the_rules_above_it(build: Build) -> None:
    rig = build(
        {
            **_repo("repo"),
            "repo/.git/info/exclude": b"*.tmp\n",
            GLOBAL: b"/app/sess/top-only\n",
            "repo/.gitignore": b"*.log\n/app/sess/anchored.txt\n",
            "repo/app/.gitignore": b"generated/\n",
            "repo/app/sess/a.py": b"",
            "repo/app/sess/x.log": b"",
            "repo/app/sess/y.tmp": b"",
            "repo/app/sess/anchored.txt": b"",
            "repo/app/sess/top-only": b"",
            "repo/app/sess/generated/g.py": b"",
            "repo/app/sess/deep/anchored.txt": b"",
        }
    )
    found = await rig.file_set(top="repo/app/sess", root="repo/app/sess")
    assert found == {"a.py", "deep/anchored.txt"}


async def test_gitignore_files_do_not_apply_outside_a_repository_but_ignore_files_do(build: Build) -> None:
    rig = build(
        {
            GLOBAL: b"*.swp\n",
            "work/.gitignore": b"*.log\n",
            "work/.ignore": b"*.bak\n",
            "work/sub/.rgignore": b"*.tmp\n",
            "work/a.log": b"",
            "work/a.bak": b"",
            "work/a.swp": b"",
            "work/sub/b.tmp": b"",
            "work/sub/b.txt": b"",
        }
    )
    assert await rig.file_set() == {".gitignore", ".ignore", "a.log", "a.swp", "sub/.rgignore", "sub/b.txt"}


async def test_ignore_files_are_asked_before_gitignore_files(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.gitignore": b"*.gen\n",
            "work/.ignore": b"!wanted.gen\n",
            "work/wanted.gen": b"",
            "work/other.gen": b"",
        }
    )
    assert await rig.file_set() == {".gitignore", ".ignore", "wanted.gen"}


async def test_a_nested_repository_is_seen_with_its_own_rules_only(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            **_repo("work/inner"),
            "work/.gitignore": b"*.log\n",
            "work/inner/.git/info/exclude": b"*.tmp\n",
            "work/inner/.gitignore": b"*.o\n",
            "work/inner/a.log": b"",  # the outer rules stop at inner's top
            "work/inner/a.o": b"",
            "work/inner/a.tmp": b"",
            "work/b.log": b"",
            "work/b.tmp": b"",
        }
    )
    assert await rig.file_set() == {".gitignore", "b.tmp", "inner/.gitignore", "inner/a.log"}


# --- reaching what is ignored ---------------------------------------------------------------


async def test_ignored_paths_stay_reachable(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.gitignore": b"node_modules/\n*.log\n",
            "work/a.js": b"",
            "work/x.log": b"",
            "work/node_modules/pkg/index.js": b"",
            "work/node_modules/pkg/debug.log": b"",
        }
    )
    every = {".gitignore", "a.js", "x.log", "node_modules/pkg/index.js", "node_modules/pkg/debug.log"}
    assert await rig.file_set(include_ignored=True) == every
    # A folder named inside an ignored one is walked; the rules still apply below it.
    assert await rig.file_set(top="work/node_modules/pkg") == {"index.js"}
    # A file named explicitly is returned whatever the rules and filters say, under its own name.
    assert await rig.files(top="work/x.log") == ["x.log"]
    assert await rig.files(top="work/x.log", secrets=Secrets.ONLY, name_glob="*.py") == ["x.log"]


async def test_a_file_is_searched_through_the_callers_descriptor_never_by_its_path(build: Build) -> None:
    """Issue 30: a path is looked up again when it is opened, and a link swapped in meanwhile would
    be followed to a secret; the descriptor the caller opened (and judged) is what gets searched."""
    rig = build({**_repo(), "work/x.txt": b"TOKEN=public\n", "work/.env": b"TOKEN=secret\n"})
    top = os.path.join(rig.base, "work/x.txt")
    held = os.path.join(rig.base, "held.txt")  # what the caller opened (for the memory tree: a real file)
    with open(held, "wb") as file:
        file.write(b"TOKEN=public\n")
    fd = os.open(held, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.path.exists(top):  # on disk: the path now names a link to the secret
            os.replace(top, top + ".old")
            os.symlink(".env", top)
        for ordered in (False, True):  # a walk run twice (ordered) reads the file from its start again
            found: list[LineMatch] = []
            walk = rig.walk(top="work/x.txt", descriptor=fd, ordered=ordered)
            assert await rig.search.lines(walk, LineQuery("TOKEN"), _into(found)) == WalkEnd()
            assert [(m.path, m.line, m.text) for m in found] == [(b"x.txt", 1, "TOKEN=public")]
        with pytest.raises(WorkspaceSearchFailed):  # a file named without its descriptor is refused
            await rig.search.lines(rig.walk(top="work/.env"), LineQuery("TOKEN"), _into([]))
    finally:
        os.close(fd)


# --- what is returned at all --------------------------------------------------------------------


async def test_only_regular_files_and_never_git_links_or_special_files(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "outside/secret.txt": b"precious\n",
            "work/a.txt": b"precious\n",
            "work/out": Link("../outside"),
            "work/v.txt": Link("../outside/secret.txt"),
            "work/fifo": Special(),
            "work/empty": None,
            "work/sub/.git": b"gitdir: ../.git/worktrees/sub\n",  # a worktree's .git file
            "work/sub/b.txt": b"",
        }
    )
    assert await rig.file_set() == {"a.txt", "sub/b.txt"}
    assert [m.path for m in await rig.lines("precious")] == [b"a.txt"]


async def test_names_linux_allows_come_back_as_bytes(build: Build) -> None:
    rig = build({**_repo(), "work/caf\udce9.txt": b"needle\n", "work/new\nline:1.txt": b"needle\n"})
    found: list[bytes] = []
    await rig.search.files(rig.walk(), _into(found))
    assert sorted(found) == [b"caf\xe9.txt", b"new\nline:1.txt"]
    assert sorted(m.path for m in await rig.lines("needle")) == [b"caf\xe9.txt", b"new\nline:1.txt"]


async def test_secrets_are_skipped_kept_or_listed_alone(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.env": b"KEY=1\n",
            "work/a/b/.env.production": b"KEY=2\n",
            "work/a/.envrc": b"KEY=3\n",  # not a secret name
            "work/a/x.py": b"KEY=4\n",
        }
    )
    assert await rig.file_set(secrets=Secrets.SKIP) == {"a/.envrc", "a/x.py"}
    assert await rig.file_set(secrets=Secrets.ONLY) == {".env", "a/b/.env.production"}
    assert await rig.file_set(secrets=Secrets.ONLY, name_glob="*.production") == {"a/b/.env.production"}
    assert len(await rig.file_set(secrets=Secrets.INCLUDE)) == 4
    assert [m.path for m in await rig.lines("KEY", secrets=Secrets.SKIP)] == [b"a/.envrc", b"a/x.py"]
    assert len(await rig.lines("KEY", secrets=Secrets.INCLUDE)) == 4


async def test_a_name_glob_applies_after_the_rules(build: Build) -> None:
    rig = build(
        {
            **_repo(),
            "work/.gitignore": b"ignored.py\n",
            "work/a.py": b"",
            "work/ignored.py": b"",
            "work/deep/er/b.py": b"",
            "work/c.pyc": b"",
            "work/x.txt": b"",
            "work/y.md": b"",
            "work/z.md": b"",
            "work/include:odd": b"",
        }
    )
    assert await rig.file_set(name_glob="*.py") == {"a.py", "deep/er/b.py"}
    assert await rig.file_set(name_glob="*.{txt,md}") == {"x.txt", "y.md", "z.md"}
    assert await rig.file_set(name_glob="[yz].md") == {"y.md", "z.md"}
    assert await rig.file_set(name_glob="?.py?") == {"c.pyc"}
    assert await rig.file_set(name_glob="include:odd") == {"include:odd"}


# --- order, caps, cancellation -------------------------------------------------------------------

ORDERED_TREE: dict[str, Entry] = {
    **_repo(),
    **{f"work/{name}": b"needle\nneedle\n" for name in ("a-b", "a.b", "a/b", "a/a/z", "B", "b", "\xe9")},
}


async def test_an_ordered_walk_comes_in_path_order_compared_name_by_name(build: Build) -> None:
    rig = build(ORDERED_TREE)
    expected = ["B", "a/a/z", "a/b", "a-b", "a.b", "b", "\xe9"]
    assert await rig.files(ordered=True) == expected
    found: list[LineMatch] = []
    await rig.search.lines(rig.walk(ordered=True), LineQuery("needle"), _into(found))
    assert [(os.fsdecode(m.path), m.line) for m in found] == [(p, n) for p in expected for n in (1, 2)]


async def test_a_caller_stops_a_walk_by_saying_it_has_enough(build: Build) -> None:
    rig = build(ORDERED_TREE)
    for ordered in (False, True):
        found: list[bytes] = []

        def three(path: bytes, found: list[bytes] = found) -> bool:
            found.append(path)
            return len(found) < 3

        assert await rig.search.files(rig.walk(ordered=ordered), three) == WalkEnd(enough=True)
        assert len(found) == 3
        matches: list[LineMatch] = []

        def two(match: LineMatch, matches: list[LineMatch] = matches) -> bool:
            matches.append(match)
            return len(matches) < 2

        assert await rig.search.lines(rig.walk(ordered=ordered), LineQuery("needle"), two) == WalkEnd(enough=True)
        assert len(matches) == 2
    assert (await rig.files(ordered=True))[:3] == ["B", "a/a/z", "a/b"]


async def test_a_cancelled_walk_ends_early_and_the_adapter_serves_the_next(build: Build) -> None:
    # Deterministic whatever the timing: the listing (3,000 paths of 41 bytes) is more than one read of rg's
    # output (64 KiB), and each feed checks for its caller's cancel before the next read, even of output
    # already buffered (tests/unit/test_search_feed_cancel.py), so the walk ends early however fast rg was.
    many = {f"work/folder-{n:03}/file-with-a-long-name-{m:03}.txt": b"needle\n" for n in range(60) for m in range(50)}
    rig = build({**_repo(), **many})
    found: list[bytes] = []
    with anyio.CancelScope() as scope:

        def cancel_at_first(path: bytes) -> bool:
            found.append(path)
            scope.cancel()
            return True

        await rig.search.files(rig.walk(), cancel_at_first)
        pytest.fail("the walk went on after its caller was cancelled")
    assert scope.cancelled_caught
    assert 1 <= len(found) < len(many)
    # The same adapter serves the next walk as usual.
    assert len(await rig.files()) == len(many)


async def test_a_walk_past_its_time_bound_says_it_was_cut_short(build: Build) -> None:
    rig = build({**_repo(), **{f"work/f{n}.txt": b"needle\n" for n in range(50)}})
    found: list[bytes] = []
    end = await rig.search.files(rig.walk(time_limit=0.0), _into(found))
    assert end.cut_short and not end.complete and len(found) < 50
    end = await rig.search.lines(rig.walk(time_limit=0.0), LineQuery("needle"), _into([]))
    assert end.cut_short and not end.complete


async def test_a_walk_that_cannot_run_raises_the_port_error(build: Build) -> None:
    rig = build({**_repo(), "work/a.txt": b"needle\n"})
    with pytest.raises(WorkspaceSearchFailed):
        await rig.broken.files(rig.walk(), _into([]))
    with pytest.raises(WorkspaceSearchFailed):
        await rig.broken.lines(rig.walk(), LineQuery("needle"), _into([]))


# --- lines -------------------------------------------------------------------------------------


async def test_lines_end_at_newline_only_as_read_file_numbers_them(build: Build) -> None:
    text = "a\fb\nc\u2028d\r\nneedle one\r\ne\x0bf\x1cg\nlast needle two".encode()
    rig = build({**_repo(), "work/f.txt": text})
    found = await rig.lines("needle")
    assert [(m.path, m.line, m.text) for m in found] == [(b"f.txt", 3, "needle one"), (b"f.txt", 5, "last needle two")]
    assert [m.line for m in await rig.lines("^c.d\r$")] == [2]  # `\r` is part of the line to the pattern


async def test_a_long_line_is_cut_around_its_first_match(build: Build) -> None:
    long = b"x" * 5000 + b"NEEDLE" + b"y" * 5000 + b"NEEDLE\n"
    fits = b"z" * (MATCH_WINDOW - 6) + b"NEEDLE\r\n"
    rig = build(
        {**_repo(), "work/min.js": long, "work/fits.txt": fits, "work/\xe9.txt": ("\xe9" * 300 + "NEEDLE\n").encode()}
    )
    by_path = {m.path: m for m in await rig.lines("NEEDLE")}
    cut = by_path[b"min.js"]
    assert cut.cut_before and cut.cut_after and len(cut.text) == MATCH_WINDOW
    assert cut.text == "x" * 100 + "NEEDLE" + "y" * 194
    whole = by_path[b"fits.txt"]
    assert not whole.cut_before and not whole.cut_after and whole.text == fits.decode().rstrip("\r\n")
    accented = by_path["\xe9.txt".encode()]  # the cut falls inside a two-byte character: it is dropped, not garbled
    assert accented.cut_before and not accented.cut_after
    assert accented.text == "\xe9" * 50 + "NEEDLE" and "\ufffd" not in accented.text


async def test_binary_files_are_not_searched_and_case_can_be_ignored(build: Build) -> None:
    rig = build({**_repo(), "work/bin.dat": b"needle\0\1\2", "work/t.txt": b"Needle\nneedle\n"})
    assert [(m.path, m.line) for m in await rig.lines("needle")] == [(b"t.txt", 2)]
    assert [(m.path, m.line) for m in await rig.lines("needle", ignore_case=True)] == [(b"t.txt", 1), (b"t.txt", 2)]


async def test_an_invalid_pattern_is_a_complaint_with_nothing_found(build: Build) -> None:
    rig = build({**_repo(), "work/a.txt": b"needle\n"})
    found: list[LineMatch] = []
    end = await rig.search.lines(rig.walk(), LineQuery("needle("), _into(found))
    assert found == [] and end.complaint and not end.enough


async def test_a_large_file_is_searched_to_its_end(build: Build) -> None:
    big = b"filler line\n" * 600_000 + b"needle at the end\n"  # ~7 MB
    rig = build({**_repo(), "work/big.txt": big})
    assert [(m.line, m.text) for m in await rig.lines("needle")] == [(600_001, "needle at the end")]


async def test_walks_after_aclose_still_run_each_on_its_own(build: Build) -> None:
    """The composition root closes the search once at shutdown; a walk still running then, or asked after,
    must not hang or run unconfined: it runs as a walk of its own (ADR 0037)."""
    rig = build({**_repo(), "work/a.txt": b"", "work/b/c.txt": b""})
    assert await rig.file_set() == {"a.txt", "b/c.txt"}
    await rig.search.aclose()
    with anyio.fail_after(20):
        assert await rig.file_set() == {"a.txt", "b/c.txt"}
