"""One walk of the workspace before each command, and one after it.

Before: every ``.env`` file (to mask), every ``.git`` entry and every folder
shaped like a git directory (to bind read-only), wherever they are. A walk
that cannot finish (too many entries, too deep) fails the command closed:
running it with part of the tree unchecked would leave secrets readable.

After: the same walk finds ``.git`` entries and git-directory shapes the
command created, and quarantines them by renaming (``.git`` → ``.git.term2-
quarantined``, a shape's ``HEAD`` → ``HEAD.term2-quarantined``), because the
host's git obeys their ``config`` (``core.fsmonitor``, ``core.hooksPath``…)
on the next ``git status`` an editor runs by itself (ADR 0005).

The same two walks also note every project instruction file (``AGENTS.md``,
``CLAUDE.md``, ``GEMINI.md``, any case) and its identity as ``lstat`` gives it,
change time included, which no command can set back. One the command created,
changed, replaced or removed is reported, not quarantined (ADR 0020): it is
ordinary text the user may well have asked for, but its text reaches the
system prompt of later sessions, so the model and the user must be told.

The walk holds one descriptor per level and opens every folder with
``O_NOFOLLOW`` relative to its parent, so a command running beside it (a
concurrent run on the same root) cannot steer it out of the root, and the
quarantine renames act on the folders the walk saw. The sandbox keeps the walk
between commands and lists again only the folders the kernel says changed
(``watched_tree``, ADR 0031); this module holds what a walk finds and what is
done with it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from term2.domain.footholds import GIT_DIR_KEYS
from term2.domain.workspace import MAX_DEPTH
from term2.ports.sandbox import SandboxFailed

SCAN_MAX_ENTRIES = 5_000_000  # a few generated trees (node_modules) in a monorepo; 5M paths fit in memory
SCAN_MAX_DEPTH = MAX_DEPTH  # descriptors held at once; deeper trees are refused (the file tools make none)
QUARANTINE_SUFFIX = ".term2-quarantined"
NOTICE_PATHS = 20  # instruction files named in one notice; the rest are counted
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class ScanIncomplete(Exception):
    """The walk stopped before seeing every entry."""


@dataclass(frozen=True, slots=True)
class GitMark:
    """A ``.git`` entry (``kind="dotgit"``) or a git-directory-shaped folder (``"shape"``)."""

    path: str
    kind: str
    ident: tuple[int, int]  # (st_dev, st_ino) of the entry itself, not followed


@dataclass(slots=True)
class TreeScan:
    root: str
    env_files: list[str] = field(default_factory=list)
    secret_links: list[str] = field(default_factory=list)
    marks: dict[str, GitMark] = field(default_factory=dict)  # below the root; the root's own .git apart
    setid_files: list[str] = field(default_factory=list)  # only when asked: it costs a stat per file
    # Every instruction file outside git metadata, by path: (mode, dev, ino, size, mtime, ctime) unfollowed.
    instructions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    entries: int = 0
    listed: int = 0  # folders this scan listed (all of them, unless the kernel's events said which changed)


def scan_tree(root: str, *, limit: int = SCAN_MAX_ENTRIES, setid: bool = False) -> TreeScan:
    """Walk ``root`` (canonical) in full, without following links; raise ScanIncomplete past the limits.

    ``setid`` also lists regular files with setuid/setgid bits (for runs mapped
    to host root, whose clean-up strips them), git metadata included: one walk
    instead of two. Inside git metadata nothing else is recorded ("quiet"
    folders): it is read-only as a whole, or quarantined as a whole. The sandbox
    itself keeps the walk and its watches between commands (``watched_tree``).
    """
    from term2.adapters.sandbox.watched_tree import WatchedTree  # it builds on this module's types

    tree = WatchedTree(root, watch=False)
    try:
        return tree.scan(limit=limit, setid=setid)
    finally:
        tree.close()


def unseen(path: str) -> ScanIncomplete:
    """A folder term2 may not list: a command may still reach names in it (search permission alone
    opens a known name, and a sandbox's owner mapping may pass where term2 may not), so what term2
    cannot see it cannot mask, quarantine or report; fail closed."""
    return ScanIncomplete(f"{path} cannot be listed (permission denied); make it readable (chmod u+rx) or remove it")


def planted(before: TreeScan, after: TreeScan) -> list[GitMark]:
    """Marks the command made: new paths, or a path now naming another object."""
    return [mark for path, mark in after.marks.items() if before.marks.get(path) != mark]


def quarantine(root: str, mark: GitMark) -> str:
    """Rename what makes ``mark`` a git directory; return the new path.

    A shape loses its ``HEAD`` (the file git needs first), a ``.git`` entry its
    name. The folder holding it is reached from the root component by
    component with O_NOFOLLOW, so a link swapped in cannot redirect the rename.
    """
    if mark.kind == "shape":
        folder, name = mark.path, "HEAD"
    else:
        folder, name = os.path.dirname(mark.path), os.path.basename(mark.path)
    fd = open_below(root, folder)
    try:
        target = name + QUARANTINE_SUFFIX
        taken = set(os.listdir(fd))
        n = 1
        while target in taken:
            n += 1
            target = f"{name}{QUARANTINE_SUFFIX}-{n}"
        os.rename(name, target, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)
    return os.path.join(folder, target)


def open_below(root: str, folder: str) -> int:
    """``folder`` (below canonical ``root``) opened from the root component by component with O_NOFOLLOW."""
    rel = os.path.relpath(folder, root)
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in [] if rel == "." else rel.split(os.sep):
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def scan_after(
    root: str, limit: int = SCAN_MAX_ENTRIES, *, setid: bool = False, walk: Callable[..., TreeScan] | None = None
) -> TreeScan | str:
    """The walk after a command (``walk``, the sandbox's watched one, or a full one), or the notice saying
    why it could not be done."""
    try:
        return (walk or scan_tree)(root, limit=limit, setid=setid)
    except ScanIncomplete as exc:
        return (
            f"term2 could not check the workspace for planted git metadata or changed instruction files after "
            f"this command ({exc}); "
            "commands stay refused until that is fixed"
        )
    except OSError as exc:
        return (
            "term2 could not check the workspace for planted git metadata or changed instruction files after "
            f"this command: {exc}"
        )


def quarantine_plants(root: str, before: TreeScan, after: TreeScan) -> list[str]:
    """After a command: quarantine what it planted; return one notice per finding, for the model and the user."""
    notices: list[str] = []
    for mark in planted(before, after):
        rel = shown_path(os.path.relpath(mark.path, root))
        what = "a .git entry" if mark.kind == "dotgit" else "a folder with " + ", ".join(sorted(GIT_DIR_KEYS))
        try:
            moved = quarantine(root, mark)
        except OSError as exc:
            notices.append(f"term2 found {what} at {rel}, created by this command, and could not quarantine it: {exc}")
            continue
        notices.append(
            f"term2 quarantined {rel}: this command created {what}, which makes it a git directory whose "
            f"config the host's git would obey (it can run programs on the next `git status`); renamed to "
            f"{shown_path(os.path.relpath(moved, root))}. Commands cannot create git repositories in the workspace; "
            "ask the user to run git init or git clone themselves."
        )
    return notices


def instruction_changes(before: TreeScan, after: TreeScan) -> list[tuple[str, str]]:
    """(what happened, path) for each instruction file the command created, changed or removed."""
    changes = [
        ("created" if path not in before.instructions else "changed", path)
        for path, ident in after.instructions.items()
        if before.instructions.get(path) != ident
    ]
    changes += [("removed", path) for path in before.instructions if path not in after.instructions]
    return sorted(changes, key=lambda change: change[1])


def quarantine_instructions(root: str, before: TreeScan, after: TreeScan) -> list[str]:
    """After a command nobody was asked about (ADR 0044): rename away every instruction file it created or
    replaced, so that none steers a later session; one notice for the model and the user."""
    moved: list[str] = []
    failed: list[str] = []
    removed: list[str] = []
    for what, path in instruction_changes(before, after):
        if what == "removed":  # nothing to take back (a pinned file cannot be removed, only its folder moved)
            removed.append(shown_path(os.path.relpath(path, root)))
            continue
        try:
            fd = open_below(root, os.path.dirname(path))
        except OSError as exc:
            failed.append(f"{shown_path(os.path.relpath(path, root))} ({exc.strerror})")
            continue
        try:
            name = os.path.basename(path)
            taken = set(os.listdir(fd))
            target, n = name + QUARANTINE_SUFFIX, 1
            while target in taken:
                n += 1
                target = f"{name}{QUARANTINE_SUFFIX}-{n}"
            os.rename(name, target, src_dir_fd=fd, dst_dir_fd=fd)
            moved.append(f"{shown_path(os.path.relpath(path, root))} -> {shown_path(target)}")
        except OSError as exc:
            failed.append(f"{shown_path(os.path.relpath(path, root))} ({exc.strerror})")
        finally:
            os.close(fd)
    if not moved and not failed and not removed:
        return []
    text = (
        "term2 quarantined project instruction files this command wrote without the user being asked (auto "
        f"mode): {'; '.join(moved[:NOTICE_PATHS]) or 'none'}. Their text would have steered every later session; "
        "write AGENTS.md with write_file instead, which asks the user."
    )
    if failed:
        text += f" It could not quarantine: {'; '.join(failed[:NOTICE_PATHS])}."
    if removed:
        text += f" Removed by the command (tell the user): {'; '.join(removed[:NOTICE_PATHS])}."
    return [text]


def shown_path(path: str) -> str:
    """`path` as a notice shows it: quoted when it holds a control or line-breaking character, so a name
    cannot end the notice early or forge a line of its own."""
    if any(ord(c) < 0x20 or c in "\x7f\x85\u2028\u2029" for c in path):
        return repr(path)
    return path


def instruction_notice(root: str, before: TreeScan, after: TreeScan) -> str | None:
    """After a command: the one notice, for the model and the user, naming the instruction files it touched."""
    changes = instruction_changes(before, after)
    if not changes:
        return None
    named = "; ".join(f"{what} {shown_path(os.path.relpath(path, root))}" for what, path in changes[:NOTICE_PATHS])
    if len(changes) > NOTICE_PATHS:
        named += f"; and {len(changes) - NOTICE_PATHS} more"
    return (
        f"term2 noticed that this command changed project instruction files ({named}). term2 puts their text "
        "into the system prompt of later sessions in this project, so they steer what the agent does next "
        "time; they were left as they are. Tell the user which ones changed so they can review them."
    )


def refuse_incomplete(root: str, exc: ScanIncomplete) -> SandboxFailed:
    return SandboxFailed(
        f"refusing to run: term2 checks the whole workspace for secrets (.env) and git metadata before "
        f"each command, and {root} has {exc}; remove generated trees (node_modules, build output) or open a "
        "smaller folder"
    )
