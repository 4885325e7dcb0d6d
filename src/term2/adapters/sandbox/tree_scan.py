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
quarantine renames act on the folders the walk saw.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from term2.domain.footholds import GIT_DIR_KEYS, is_git_dir_shape, is_secret_name
from term2.domain.instructions import is_instruction_name
from term2.domain.workspace import MAX_DEPTH
from term2.ports.sandbox import SandboxFailed

SCAN_MAX_ENTRIES = 1_000_000
SCAN_MAX_DEPTH = MAX_DEPTH  # descriptors held at once; deeper trees are refused (the file tools make none)
QUARANTINE_SUFFIX = ".term2-quarantined"
NOTICE_PATHS = 20  # instruction files named in one notice; the rest are counted
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


def _head_counts(fd: int) -> bool:
    """git only takes a folder whose HEAD is a symlink or a non-empty file (an empty mask never counts)."""
    try:
        st = os.stat("HEAD", dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_size > 0)


def scan_tree(root: str, *, limit: int = SCAN_MAX_ENTRIES, setid: bool = False) -> TreeScan:
    """Walk ``root`` (canonical) without following links; raise ScanIncomplete past the limits.

    ``setid`` also lists regular files with setuid/setgid bits (for runs mapped
    to host root, whose clean-up strips them), git metadata included: one walk
    instead of two. Inside git metadata nothing else is recorded ("quiet"
    folders): it is read-only as a whole, or quarantined as a whole.
    """
    scan = TreeScan(root)
    top = os.open(root, _DIR_FLAGS)
    # Each frame: the folder's fd, its path, and the (subfolder, quiet) pairs still to visit.
    frames: list[tuple[int, str, list[tuple[str, bool]]]] = []
    try:
        frames.append((top, root, _visit(scan, top, root, limit, setid, quiet=False)))
        while frames:
            fd, path, pending = frames[-1]
            if not pending:
                frames.pop()
                os.close(fd)
                continue
            name, quiet = pending.pop()
            if len(frames) >= SCAN_MAX_DEPTH:
                raise ScanIncomplete(f"folders nested more than {SCAN_MAX_DEPTH} deep under {path}")
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except PermissionError:
                raise _unseen(os.path.join(path, name)) from None
            except OSError:
                continue  # gone, or swapped for a link since it was listed: nothing to walk
            child_path = os.path.join(path, name)
            try:
                frames.append((child, child_path, _visit(scan, child, child_path, limit, setid, quiet=quiet)))
            except BaseException:
                os.close(child)
                raise
    finally:
        for fd, _path, _pending in frames:
            os.close(fd)
    return scan


def _visit(scan: TreeScan, fd: int, path: str, limit: int, setid: bool, *, quiet: bool) -> list[tuple[str, bool]]:
    """Record what one folder holds; return the subfolders to walk into, and whether quietly."""
    subdirs: list[tuple[str, bool]] = []
    names: list[str] = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                scan.entries += 1
                if scan.entries > limit:
                    raise ScanIncomplete(f"more than {limit:,} files and folders")
                name = entry.name
                names.append(name)
                is_dir = entry.is_dir(follow_symlinks=False)
                if setid and not is_dir and entry.is_file(follow_symlinks=False) and _has_setid(entry):
                    scan.setid_files.append(os.path.join(path, name))
                if quiet:
                    if is_dir:
                        subdirs.append((name, True))
                    continue
                if name == ".git":
                    if path != scan.root:
                        full = os.path.join(path, name)
                        scan.marks[full] = GitMark(full, "dotgit", _ident(entry))
                    if is_dir and setid:
                        subdirs.append((name, True))
                    continue
                if is_instruction_name(name):
                    _note_instruction(scan, entry, os.path.join(path, name))
                if is_dir:
                    subdirs.append((name, False))
                elif is_secret_name(name):
                    if entry.is_symlink():
                        scan.secret_links.append(os.path.join(path, name))
                    elif entry.is_file(follow_symlinks=False):
                        scan.env_files.append(os.path.join(path, name))
    except PermissionError:
        raise _unseen(path) from None
    except OSError:
        return []  # gone since it was opened: nothing in it to mask
    if not quiet and path != scan.root and is_git_dir_shape(names) and _head_counts(fd):
        st = os.fstat(fd)
        scan.marks[path] = GitMark(path, "shape", (st.st_dev, st.st_ino))
        subdirs = [(name, True) for name, _quiet in subdirs] if setid else []
    return sorted(subdirs, reverse=True)


def _unseen(path: str) -> ScanIncomplete:
    """A folder term2 may not list: a command may still reach names in it (search permission alone
    opens a known name, and a sandbox's owner mapping may pass where term2 may not), so what term2
    cannot see it cannot mask, quarantine or report; fail closed."""
    return ScanIncomplete(f"{path} cannot be listed (permission denied); make it readable (chmod u+rx) or remove it")


def _note_instruction(scan: TreeScan, entry: os.DirEntry[str], path: str) -> None:
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return  # gone since it was listed: the walk after tells whether it came back
    scan.instructions[path] = (st.st_mode, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _has_setid(entry: os.DirEntry[str]) -> bool:
    try:
        return bool(entry.stat(follow_symlinks=False).st_mode & (stat.S_ISUID | stat.S_ISGID))
    except OSError:
        return False


def _ident(entry: os.DirEntry[str]) -> tuple[int, int]:
    st = entry.stat(follow_symlinks=False)
    return (st.st_dev, st.st_ino)


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
    fd = _open_below(root, folder)
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


def _open_below(root: str, folder: str) -> int:
    rel = os.path.relpath(folder, root)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in [] if rel == "." else rel.split(os.sep):
            nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def scan_after(root: str, limit: int = SCAN_MAX_ENTRIES, *, setid: bool = False) -> TreeScan | str:
    """The walk after a command, or the notice saying why it could not be done."""
    try:
        return scan_tree(root, limit=limit, setid=setid)
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
