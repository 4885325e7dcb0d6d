"""A workspace held in memory, searched with git's ignore rules: the alternate adapter of the workspace search port.

The tree is a mapping of paths to contents; nothing here touches the disk.
The ignore rules are git's, composed the way git and ripgrep compose them:
for each path, the ignore files of its folder and of every folder above it
up to the repository's top are asked, the deepest first (`.rgignore`
before `.ignore` before `.gitignore`), then the top's `.git/info/exclude`,
then the global excludes file; the last pattern that matches within the
first file that has one decides. `pathspec`'s GitIgnoreSpec reads each
file's patterns (negation, anchoring, directory-only, `**`, escapes). An
ignored folder is not entered, so nothing below it can be brought back, as
in git. The contract suite (tests/contract/test_workspace_search_contract.py)
holds it to the same answers as the real adapter on the same tree.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import anyio
import anyio.lowlevel
from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern as Pattern

from term2.domain.footholds import is_secret_name
from term2.domain.name_glob import name_glob_regex
from term2.domain.workspace import is_within
from term2.ports.workspace_search import (
    MATCH_BEFORE,
    MATCH_WINDOW,
    LineMatch,
    LineQuery,
    Secrets,
    Walk,
    WalkEnd,
    WorkspaceSearchFailed,
)

T = TypeVar("T", bytes, LineMatch)
SEARCH_IGNORE_FILES = (".ignore", ".rgignore")  # read inside and outside repositories, as ripgrep does


@dataclass(frozen=True, slots=True)
class Link:
    target: str


@dataclass(frozen=True, slots=True)
class Special:
    """A FIFO, socket or device: never returned, never opened."""


Node = bytes | Link | Special | dict[str, "Node"]


@dataclass
class MemoryTree:
    """Folders (dicts), files (bytes), links and special files under `/`, by absolute path."""

    top: dict[str, Node] = field(default_factory=dict)

    @staticmethod
    def of(entries: Mapping[str, bytes | Link | Special | None]) -> MemoryTree:
        """A tree from absolute paths; None makes an (empty) folder, parents are made as needed."""
        tree = MemoryTree()
        for path, node in entries.items():
            if node is None:
                tree.folder(path)
            else:
                *parents, name = _parts(path)
                tree.folder("/" + "/".join(parents))[name] = node
        return tree

    def folder(self, path: str) -> dict[str, Node]:
        node = self.top
        for part in _parts(path):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise NotADirectoryError(path)
            node = child
        return node

    def get(self, path: str) -> Node | None:
        node: Node = self.top
        for part in _parts(path):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def read(self, path: str) -> bytes | None:
        node = self.get(path)
        return node if isinstance(node, bytes) else None


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part]


@dataclass
class MemoryWorkspaceSearch:
    """The workspace search port over a MemoryTree; `global_excludes` names the user's global file in it."""

    tree: MemoryTree
    global_excludes: str | None = None
    available: bool = True
    walks: list[Walk] = field(default_factory=list)  # every walk asked for, for tests to inspect

    async def aclose(self) -> None:
        """Nothing is kept between walks here."""

    async def files(self, walk: Walk, take: Callable[[bytes], bool]) -> WalkEnd:
        self._start(walk)
        found = [rel for rel, _ in self._walked(walk)]
        return await self._feed(walk, found, take)

    async def lines(self, walk: Walk, query: LineQuery, take: Callable[[LineMatch], bool]) -> WalkEnd:
        self._start(walk)
        try:
            regex = re.compile(query.pattern, re.IGNORECASE if query.ignore_case else 0)
        except re.error as err:
            return WalkEnd(complaint=f"regex parse error: {err}")
        found: list[LineMatch] = []
        for rel, data in self._opened(walk) or self._walked(walk):
            if b"\0" in data:
                continue  # binary: not searched
            found.extend(_matches(rel, data, regex))
        return await self._feed(walk, found, take)

    def _start(self, walk: Walk) -> None:
        self.walks.append(walk)
        if not self.available:
            raise WorkspaceSearchFailed("the memory workspace was told to be unavailable")
        if not os.path.isabs(walk.top) or not os.path.isabs(walk.root):
            raise WorkspaceSearchFailed(f"not an absolute path: {walk.top}")

    async def _feed(self, walk: Walk, found: list[T], take: Callable[[T], bool]) -> WalkEnd:
        if walk.ordered:
            found.sort(key=_path_order)
        with anyio.move_on_after(walk.time_limit) as scope:
            for item in found:
                await anyio.lowlevel.checkpoint()  # cancellation and the time bound end the walk here
                if not take(item):
                    return WalkEnd(enough=True)
        if scope.cancelled_caught:
            return WalkEnd(cut_short=f"stopped after {walk.time_limit:g} s")
        return WalkEnd()

    def _opened(self, walk: Walk) -> list[tuple[bytes, bytes]]:
        """The file the caller opened, read through its descriptor (as the port says: never by path);
        nothing when the walk names a folder; the port's error for a file named without one."""
        if walk.descriptor is None:
            if isinstance(self.tree.get(walk.top), bytes):
                raise WorkspaceSearchFailed(f"{walk.top} is not a folder: a file is searched through its descriptor")
            return []
        data = b""
        while chunk := os.pread(walk.descriptor, 1 << 16, len(data)):
            data += chunk
        return [(os.fsencode(os.path.basename(walk.top)), data)]

    def _walked(self, walk: Walk) -> Iterator[tuple[bytes, bytes]]:
        """(path below top, contents) of each regular file the walk returns, in no promised order."""
        node = self.tree.get(walk.top)
        if isinstance(node, bytes):  # a file named explicitly: returned whatever the rules and filters say
            yield os.fsencode(os.path.basename(walk.top)), node
            return
        if not isinstance(node, dict):
            raise WorkspaceSearchFailed(f"not found: {walk.top}")
        rules = None if walk.include_ignored else _Rules(self.tree, walk, self.global_excludes)
        names = None if walk.name_glob is None else name_glob_regex(walk.name_glob)
        pending: list[tuple[str, dict[str, Node]]] = [(walk.top, node)]
        while pending:
            folder, children = pending.pop()
            for name, child in children.items():
                if name == ".git" or isinstance(child, Link | Special):
                    continue
                path = os.path.join(folder, name)
                if rules is not None and rules.ignored(path, isinstance(child, dict)):
                    continue
                if isinstance(child, dict):
                    pending.append((path, child))
                elif _kept(name, walk.secrets, names):
                    yield os.fsencode(os.path.relpath(path, walk.top)), child


def _kept(name: str, secrets: Secrets, names: re.Pattern[str] | None) -> bool:
    secret = is_secret_name(name)
    if (secrets is Secrets.SKIP and secret) or (secrets is Secrets.ONLY and not secret):
        return False
    return names is None or names.fullmatch(name) is not None


def _path_order(item: bytes | LineMatch) -> tuple[list[bytes], int]:
    if isinstance(item, LineMatch):
        return item.path.split(b"/"), item.line
    return item.split(b"/"), 0


@dataclass(frozen=True, slots=True)
class _Source:
    """One ignore file's patterns, anchored at `base` (its folder, or the repository's top)."""

    base: str
    spec: GitIgnoreSpec

    def decides(self, path: str, is_folder: bool) -> bool | None:
        """True: ignored; False: brought back by a negation; None: no pattern here matches.

        Only patterns matching the path itself count. pathspec also matches a
        path through a folder above it (`node_modules/` matches
        `node_modules/a/b.js`), which is how git reads a whole file list, but a
        walk never enters an ignored folder, and a folder the caller named
        below one is walked as git and rg walk it: judged by its own path.
        """
        rel = os.path.relpath(path, self.base)
        if rel.startswith("../") or rel == "..":
            return None
        subject = rel + "/" if is_folder else rel
        for pattern in reversed(self.spec.patterns):
            if pattern.include is not None and pattern.regex is not None and _own_match(pattern, subject, is_folder):
                return bool(pattern.include)
        return None


def _own_match(pattern: Pattern, subject: str, is_folder: bool) -> bool:
    """Whether `pattern` matches `subject` (a folder's ending in `/`) itself, not only a folder above it."""
    regex = pattern.regex
    assert regex is not None
    text = (pattern.pattern if isinstance(pattern.pattern, str) else "").rstrip()
    if text.endswith(("/**", "/**/")):  # pathspec reads `a/**` as the prefix `a/`: anything strictly inside
        found = regex.match(subject)
        return found is not None and found.end() < len(subject) and (is_folder or not text.endswith("/"))
    return regex.fullmatch(subject) is not None


class _Rules:
    """The ignore files that apply below one walk's top, read once per folder.

    git's files (`.gitignore`, `.git/info/exclude`, the global excludes) stop
    at the nearest repository's top: a nested repository is seen with its own
    rules only, as its own git sees it. `.ignore`/`.rgignore` are not git's
    and apply from every folder above.
    """

    def __init__(self, tree: MemoryTree, walk: Walk, global_excludes: str | None) -> None:
        self.tree = tree
        self.global_excludes = global_excludes
        # Nothing above the workspace is read but the ignore files between it and its repository's top.
        scope = walk.root if is_within(walk.top, walk.root) else walk.top
        self.ceiling = _repository_top(tree, scope) or scope
        self._cache: dict[str, list[_Source]] = {}

    def ignored(self, path: str, is_folder: bool) -> bool:
        for source in self._sources(os.path.dirname(path)):
            decision = source.decides(path, is_folder)
            if decision is not None:
                return decision
        return False

    def _sources(self, folder: str) -> list[_Source]:
        """The ignore files asked about an entry of `folder`, in the order they are asked."""
        if folder not in self._cache:
            repo = _repository_top(self.tree, folder)
            chain = [folder]
            while chain[-1] not in (self.ceiling, "/"):
                chain.append(os.path.dirname(chain[-1]))
            found: list[_Source] = []
            # ripgrep: every .rgignore (deepest first), then every .ignore, then every .gitignore, then the rest.
            for name in reversed(SEARCH_IGNORE_FILES):
                found += self._files(chain, name)
            if repo is not None:
                found += self._files(chain[: chain.index(repo) + 1], ".gitignore")
                for path in (os.path.join(repo, ".git", "info", "exclude"), self.global_excludes):
                    data = None if path is None else self.tree.read(path)
                    if data is not None:
                        found.append(_Source(repo, _spec(data)))
            self._cache[folder] = found
        return self._cache[folder]

    def _files(self, chain: list[str], name: str) -> list[_Source]:
        found: list[_Source] = []
        for place in chain:
            data = self.tree.read(os.path.join(place, name))
            if data is not None:
                found.append(_Source(place, _spec(data)))
        return found


def _repository_top(tree: MemoryTree, folder: str) -> str | None:
    current = folder
    while True:
        if tree.get(os.path.join(current, ".git")) is not None:
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _spec(data: bytes) -> GitIgnoreSpec:
    return GitIgnoreSpec.from_lines(data.decode("utf-8", "surrogateescape").splitlines())


def _matches(rel: bytes, data: bytes, regex: re.Pattern[str]) -> Iterator[LineMatch]:
    """The lines of `data` (ended by `\\n` only) holding a match, each cut around its first match when long."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8", "surrogateescape")
        found = regex.search(text)
        if found is None:
            continue
        column = len(text[: found.start()].encode("utf-8", "surrogateescape"))
        content = raw.removesuffix(b"\r")  # a `\r\n` ending is not part of the text
        long = len(content) > MATCH_WINDOW
        lo = max(0, column - MATCH_BEFORE) if long else 0
        cut_after = long and len(content) > lo + MATCH_WINDOW
        shown = content[lo : lo + MATCH_WINDOW].decode("utf-8", "replace")
        if lo > 0:
            shown = shown.lstrip("\ufffd")
        if cut_after:
            shown = shown.rstrip("\ufffd")
        yield LineMatch(rel, number, shown, cut_before=lo > 0, cut_after=cut_after)
