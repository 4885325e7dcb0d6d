"""Walk a folder tree the way every listing and search tool should.

`.git` is always skipped (it is noise for the model and can be huge), and
symlinked directories are never descended into, so a walk cannot wander out
of the folder the workspace rule approved. The walk goes by descriptors
(anchored.py), so a folder swapped for a symlink mid-walk is not entered.

The `.gitignore` support is deliberately simple: only the workspace root's
`.gitignore` is read; blank lines and `#` comments are skipped; negations
(`!pattern`) are not supported and are ignored; a trailing `/` restricts a
pattern to directories; a pattern containing another `/` is matched with
fnmatch against the path relative to the root (a leading `/` anchors it), and
any other pattern against each file or directory name. Nested `.gitignore`
files, `.git/info/exclude` and global excludes are not read.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from term2.app.tools.anchored import FOLDER_READ, open_folder, open_regular, read_upto
from term2.app.tools.failure import ToolFailed
from term2.domain.workspace import is_within

ALWAYS_SKIPPED = frozenset({".git"})
DEPTH_LIMIT = 128
IGNORE_LIMIT = 1024 * 1024

Kind = Literal["folder", "file", "link", "special"]


@dataclass(frozen=True, slots=True)
class IgnoreRule:
    pattern: str
    anchored: bool
    dir_only: bool

    def matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        if self.anchored:
            return fnmatch.fnmatchcase(rel, self.pattern)
        return fnmatch.fnmatchcase(os.path.basename(rel), self.pattern)


@dataclass(frozen=True, slots=True)
class IgnoreRules:
    """Root `.gitignore` patterns, applied to paths relative to `root`."""

    root: str
    rules: tuple[IgnoreRule, ...] = ()

    @staticmethod
    def parse(root: str, text: str) -> IgnoreRules:
        rules: list[IgnoreRule] = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "!")):
                continue
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            anchored = "/" in line
            rules.append(IgnoreRule(line.lstrip("/"), anchored, dir_only))
        return IgnoreRules(root, tuple(rules))

    @staticmethod
    def load(root: str) -> IgnoreRules:
        """The root `.gitignore`, if it is a regular file: a planted FIFO or link is no rules."""
        try:
            fd = open_regular(os.path.join(root, ".gitignore"), root)
        except (OSError, ToolFailed):
            return IgnoreRules(root)
        try:
            text = read_upto(fd, IGNORE_LIMIT).decode("utf-8", errors="replace")
        except OSError:
            return IgnoreRules(root)
        finally:
            os.close(fd)
        return IgnoreRules.parse(root, text)

    def ignored(self, path: str, is_dir: bool) -> bool:
        if not self.rules or not is_within(path, self.root) or path == self.root:
            return False
        rel = os.path.relpath(path, self.root)
        return any(rule.matches(rel, is_dir) for rule in self.rules)


@dataclass(frozen=True, slots=True)
class Found:
    """One entry met by `walk`; `folder_fd` is open only until the walk moves on."""

    path: str  # canonical path, for display and the ignore rules: never opened by name
    name: str
    folder_fd: int
    kind: Kind


def _kind(entry: os.DirEntry[str]) -> Kind:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "folder"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "special"


def walk(top: str, root: str, ignore: IgnoreRules | None = None) -> Iterator[Found]:
    """Every entry under the canonical folder `top`, sorted per folder, skipping `.git` and ignored paths.

    A folder is entered through its parent's descriptor without following
    links: one swapped for a symlink since it was listed is not entered.
    Folders deeper than DEPTH_LIMIT below `top` are listed but not entered,
    which bounds the descriptors a walk holds open.
    """
    yield from _walk(open_folder(top, root, readable=True), top, ignore, 0)


def _walk(fd: int, folder: str, ignore: IgnoreRules | None, depth: int) -> Iterator[Found]:
    try:
        with os.scandir(fd) as scan:
            entries = sorted((e.name, _kind(e)) for e in scan if e.name not in ALWAYS_SKIPPED)
        inner: list[tuple[str, str]] = []
        for name, kind in entries:
            path = os.path.join(folder, name)
            if ignore and ignore.ignored(path, kind == "folder"):
                continue
            yield Found(path, name, fd, kind)
            if kind == "folder":
                inner.append((name, path))
        for name, path in inner if depth < DEPTH_LIMIT else ():
            try:
                child = os.open(name, FOLDER_READ, dir_fd=fd)
            except OSError:
                continue  # swapped for a link or removed since it was listed
            yield from _walk(child, path, ignore, depth + 1)
    finally:
        os.close(fd)
