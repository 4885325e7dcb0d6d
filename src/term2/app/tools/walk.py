"""Walk a folder tree the way every listing and search tool should.

`.git` is always skipped (it is noise for the model and can be huge), and
symlinked directories are never descended into, so a walk cannot wander out
of the folder the workspace rule approved.

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

from term2.domain.workspace import is_within

ALWAYS_SKIPPED = frozenset({".git"})


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
        try:
            with open(
                os.path.join(root, ".gitignore"), encoding="utf-8", errors="replace"
            ) as handle:
                return IgnoreRules.parse(root, handle.read())
        except OSError:
            return IgnoreRules(root)

    def ignored(self, path: str, is_dir: bool) -> bool:
        if not self.rules or not is_within(path, self.root) or path == self.root:
            return False
        rel = os.path.relpath(path, self.root)
        return any(rule.matches(rel, is_dir) for rule in self.rules)


def walk_files(top: str, ignore: IgnoreRules | None = None) -> Iterator[str]:
    """Every file under `top`, sorted per folder, skipping `.git` and ignored paths."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in ALWAYS_SKIPPED
            and not (ignore and ignore.ignored(os.path.join(folder, d), True))
        )
        for name in sorted(files):
            path = os.path.join(folder, name)
            if ignore and ignore.ignored(path, False):
                continue
            yield path


def walk_entries(top: str) -> Iterator[tuple[str, bool]]:
    """Every (path, is_dir) under `top`, skipping `.git`, without following links."""
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in ALWAYS_SKIPPED)
        for d in dirs:
            path = os.path.join(folder, d)
            yield path, not os.path.islink(path)  # a link is listed, never entered
        for name in sorted(files):
            yield os.path.join(folder, name), False
