"""Paths the host later runs or reads, and roots no session may have.

Pure rules shared by the file tools and the sandbox, so that a tool call and a
shell command are judged alike:

* a folder holding ``HEAD``, ``objects`` and ``refs`` is a git directory to the
  host's git (it is what ``is_git_directory`` looks for), and its ``config``
  (``core.fsmonitor``, ``core.hooksPath``, ``core.pager``…) runs code on the
  next ``git status`` an editor issues by itself. Writing what completes that
  shape, or inside such a folder, is as dangerous as writing in ``.git``;
* a root that is ``/``, a home, a system folder or term2's own data would make
  the sandbox's one writable path, and the file tools' "inside the root", cover
  what the user never meant to hand over.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from pathlib import PurePosixPath

from term2.domain.paths import is_within

GIT_DIR_KEYS = frozenset({"HEAD", "objects", "refs"})

# Refused as roots themselves: too wide to hand to a model.
_WIDE_ROOTS = frozenset(
    {"/", "/home", "/root", "/tmp", "/var", "/var/tmp", "/var/lib", "/var/log", "/var/run", "/var/cache",
     "/opt", "/srv", "/mnt", "/media", "/snap", "/nix", "/private"}
)  # fmt: skip
# Refused as roots and anywhere below: the system itself.
_SYSTEM_TREES = (
    "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc", "/sys", "/dev", "/run",
)  # fmt: skip


def is_secret_name(name: str) -> bool:
    """``.env`` and ``.env.*``: where developers keep the keys a model would carry off."""
    return name == ".env" or name.startswith(".env.")


def is_secret_file(path: str) -> bool:
    return is_secret_name(PurePosixPath(path).name)


def is_git_dir_shape(names: Iterable[str]) -> bool:
    """True when a folder with these entries is a git directory to the host's git."""
    return set(names) >= GIT_DIR_KEYS


def is_git_plant(rel_parts: Sequence[str], entries: Sequence[Collection[str]]) -> bool:
    """Would writing at ``root/rel_parts`` touch git metadata?

    ``entries[i]`` holds the names already in the folder ``root/rel_parts[:i]``
    (an absent folder has none). The write counts as a plant when any component
    is ``.git`` (a directory, or a ``gitdir:`` pointer file), or when some folder
    on the way, with the component the write adds to it, has the git-directory
    shape: that is completing the shape, or writing inside one that exists.
    """
    return ".git" in rel_parts or git_shape_depth(rel_parts, entries) is not None


def git_shape_depth(rel_parts: Sequence[str], entries: Sequence[Collection[str]]) -> int | None:
    """How many components of ``rel_parts`` name the folder that has, or with this
    write would get, the git-directory shape (see ``is_git_plant``); None when none does."""
    for index, child in enumerate(rel_parts):
        present = entries[index] if index < len(entries) else ()
        if {*present, child} >= GIT_DIR_KEYS:
            return index
    return None


def unsafe_root_reason(root: str, *, home: str, private: Collection[str] = ()) -> str | None:
    """Why canonical ``root`` may not be a workspace root, or None when it may.

    ``home`` is the user's canonical home; ``private`` are term2's own data and
    configuration folders (canonical), which no session may contain or sit in.
    """
    if root in _WIDE_ROOTS:
        return f"{root} is too wide a folder to give an agent write access to; open a project folder instead"
    for tree in _SYSTEM_TREES:
        if is_within(root, tree):
            return f"{root} is a system folder ({tree}); term2 does not edit the system, open a project folder instead"
    if home and home != "/" and is_within(home, root):
        what = "your home folder" if root == home else f"a folder above your home ({home})"
        return f"{root} is {what}; open a project folder inside it instead"
    for folder in private:
        if is_within(root, folder) or is_within(folder, root):
            return f"{root} overlaps term2's own data ({folder}); open a project folder that does not hold it"
    return None
