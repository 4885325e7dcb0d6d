"""What one folder of the workspace holds that the sandbox must act on (ADR 0005, 0010, 0020).

Listed from an open descriptor, never by path: ``.env`` files to mask, links
named like them to refuse, ``.git`` entries and git-directory shapes to pin
or quarantine, instruction files to watch, setid files to strip (host-root
runs only), and the subfolders to walk into. A folder inside git metadata is
"quiet": only its setid files count, the metadata being read-only or
quarantined as a whole.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from term2.adapters.sandbox.tree_scan import GitMark, ScanIncomplete, unseen
from term2.domain.footholds import is_git_dir_shape, is_secret_name
from term2.domain.instructions import is_instruction_name


@dataclass(slots=True)
class Facts:
    """The notable part of one folder's listing (most folders have none, and keep no Facts)."""

    env_files: list[str] = field(default_factory=list)
    secret_links: list[str] = field(default_factory=list)
    marks: list[GitMark] = field(default_factory=list)
    instructions: list[str] = field(default_factory=list)  # paths; stat'ed afresh by every scan
    setid_files: list[str] = field(default_factory=list)
    # Named like a git directory (HEAD, objects, refs) but its HEAD does not count yet: writing HEAD
    # changes no name, so such a folder is listed again by every scan.
    head_pending: bool = False

    def empty(self) -> bool:
        return (
            not (self.env_files or self.secret_links or self.marks or self.instructions or self.setid_files)
            and not self.head_pending
        )


@dataclass(slots=True)
class Listing:
    entries: int
    subdirs: dict[str, tuple[int, bool]]  # name -> (inode as listed, quiet)
    facts: Facts | None


def list_folder(fd: int, path: str, *, top: bool, quiet: bool, setid: bool, budget: int, limit: int) -> Listing:
    """List the open folder ``fd`` at ``path``; ``top`` for the workspace root (its own ``.git`` is not a
    plant). Raise ScanIncomplete past ``budget`` entries (what is left of the tree's ``limit``), or when
    the folder may not be listed."""
    facts = Facts()
    subdirs: dict[str, tuple[int, bool]] = {}
    names: list[str] = []
    count = 0
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                count += 1
                if count > budget:
                    raise ScanIncomplete(f"more than {limit:,} files and folders")
                name = entry.name
                names.append(name)
                is_dir = entry.is_dir(follow_symlinks=False)
                if setid and not is_dir and entry.is_file(follow_symlinks=False) and _has_setid(entry):
                    facts.setid_files.append(os.path.join(path, name))
                if quiet:
                    if is_dir:
                        subdirs[name] = (entry.inode(), True)
                    continue
                if name == ".git":
                    if not top:
                        full = os.path.join(path, name)
                        facts.marks.append(GitMark(full, "dotgit", _ident(entry)))
                    if is_dir and setid:
                        subdirs[name] = (entry.inode(), True)
                    continue
                if is_instruction_name(name):
                    facts.instructions.append(os.path.join(path, name))
                if is_dir:
                    subdirs[name] = (entry.inode(), False)
                elif is_secret_name(name):
                    if entry.is_symlink():
                        facts.secret_links.append(os.path.join(path, name))
                    elif entry.is_file(follow_symlinks=False):
                        facts.env_files.append(os.path.join(path, name))
    except PermissionError:
        raise unseen(path) from None
    except OSError:
        return Listing(0, {}, None)  # gone since it was opened: nothing in it to mask
    if not quiet and not top and is_git_dir_shape(names):
        if _head_counts(fd):
            st = os.fstat(fd)
            facts.marks.append(GitMark(path, "shape", (st.st_dev, st.st_ino)))
            subdirs = {name: (ino, True) for name, (ino, _quiet) in subdirs.items()} if setid else {}
        else:
            facts.head_pending = True
    return Listing(count, subdirs, None if facts.empty() else facts)


def _head_counts(fd: int) -> bool:
    """git only takes a folder whose HEAD is a symlink or a non-empty file (an empty mask never counts)."""
    try:
        st = os.stat("HEAD", dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_size > 0)


def _has_setid(entry: os.DirEntry[str]) -> bool:
    try:
        return bool(entry.stat(follow_symlinks=False).st_mode & (stat.S_ISUID | stat.S_ISGID))
    except OSError:
        return False


def _ident(entry: os.DirEntry[str]) -> tuple[int, int]:
    st = entry.stat(follow_symlinks=False)
    return (st.st_dev, st.st_ino)
