"""Project instructions: which files speak for a project, in what order, and how much of them.

A project tells agents how it works in `AGENTS.md` files (older ones in
`CLAUDE.md` or `GEMINI.md`). The files from the git root down to the session's
folder all apply, the deeper ones more specific, so they reach the model root
first and the most specific last. They are the user's own text, but they can
be any size: each one and their sum are capped, and a cut is always said out
loud so the model knows it did not see everything.

They steer every session, so they are trusted only from the user (ADR 0020):
a file, a `.git` marker or the folder holding either that another user owns
(root excepted), or a folder every user may write to, could be another local
user's text in this user's system prompt. Such entries are ignored, as git
ignores a repository another user owns (`safe.directory`, CVE-2022-24765).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

PRIMARY = "AGENTS.md"
CANDIDATES = (PRIMARY, "CLAUDE.md", "GEMINI.md")
FILE_LIMIT = 32 * 1024
TOTAL_LIMIT = 64 * 1024
_FOLDED = frozenset(name.casefold() for name in CANDIDATES)
_OWNER_READ = 0o400
_GROUP_WRITE = 0o020
_OTHERS_WRITE = 0o002  # S_IWOTH


def is_instruction_name(name: str) -> bool:
    """Whether a file of this name may be read as instructions, whatever its case.

    The loader asks for the exact names, but on a case-insensitive file system
    (or an ext4 casefold folder) that lookup opens `agents.md` too: the footholds
    are judged on the folded name so that no spelling slips past them.
    """
    return name.casefold() in _FOLDED


def is_instruction_file(path: str) -> bool:
    return is_instruction_name(PurePosixPath(path).name)


def untrusted_reason(
    *,
    owner: int,
    folder_owner: int,
    folder_mode: int,
    me: int,
    mode: int = 0o644,
    links: int = 1,
    group: int | None = None,
    folder_group: int | None = None,
    my_group: int | None = None,
) -> str | None:
    """Why an entry (instruction file or `.git` marker) with these facts is not the user's, or None.

    ``owner`` owns the entry and ``folder_owner`` the folder holding it, whose
    permission bits are ``folder_mode``; ``me`` is term2's effective uid. Root
    is trusted because it could write anything anyway. The folder counts
    because its owner can swap the entry at will, and a folder that every
    user may write to lets any of them do so (a sticky bit only keeps them from
    removing the user's own entries, not from making theirs). Whoever may
    write the entry itself may steer the agent too: an entry writable by every
    user, or by a group other than the user's own (``my_group``, None when
    unknown: then no group counts as theirs), is not the user's alone, nor is
    a folder writable by such a group. A regular file with other names (hard
    ``links``) can be rewritten under a name no check looks at.
    """
    trusted = {me, 0}
    if owner not in trusted:
        return f"owned by uid {owner}, not by you (uid {me}) or root"
    if folder_owner not in trusted:
        return f"its folder is owned by uid {folder_owner}, not by you (uid {me}) or root"
    if folder_mode & _OTHERS_WRITE:
        return "its folder is writable by every user"
    if folder_owner == me != 0 and not folder_mode & _OWNER_READ:
        return "its folder cannot be listed, so the sandbox cannot see what a command put in it"
    if mode & _OTHERS_WRITE:
        return "it is writable by every user"
    if _foreign_group_write(mode, group, my_group):
        return f"it is writable by group {group}, not only by you"
    if _foreign_group_write(folder_mode, folder_group, my_group):
        return f"its folder is writable by group {folder_group}, not only by you"
    if links > 1:
        return f"it has {links} names (hard links): a write under another name would change it unseen"
    return None


def _foreign_group_write(mode: int, group: int | None, my_group: int | None) -> bool:
    return bool(mode & _GROUP_WRITE) and group is not None and group not in {my_group, 0}


def folders_down(top: str, cwd: str) -> tuple[str, ...]:
    """`top`, then each folder below it on the way to `cwd`, ending with `cwd` itself."""
    top_path, cwd_path = PurePosixPath(top), PurePosixPath(cwd)
    if top_path != cwd_path and top_path not in cwd_path.parents:
        raise ValueError(f"{cwd} is not inside {top}")
    below = cwd_path.relative_to(top_path).parts
    return tuple(str(top_path.joinpath(*below[:depth])) for depth in range(len(below) + 1))


def chosen_name(present: Collection[str]) -> str | None:
    """The one file a folder speaks with: `AGENTS.md`, else the first fallback present.

    An `AGENTS.md` that is there shadows the fallbacks even when it cannot be
    read (a FIFO, a symlink): a project that wrote one meant it, not the older file.
    """
    return next((name for name in CANDIDATES if name in present), None)


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """One file's text as read: `data` holds at most FILE_LIMIT + 1 bytes, to tell a cut."""

    path: str  # relative to the git root, with `/`
    data: bytes


def _kib(size: int) -> str:
    return f"{size // 1024} KiB"


def cut_utf8(data: bytes, limit: int) -> bytes:
    """At most `limit` bytes of `data`, never ending inside a UTF-8 character."""
    if len(data) <= limit:
        return data
    end = limit
    while end > 0 and limit - end < 3 and data[end] & 0xC0 == 0x80:
        end -= 1
    return data[:end]


def _body(file: InstructionFile, room: int) -> tuple[str, int, bool]:
    """The file's text within its own cap and the room left, the bytes it used, whether the total cut it."""
    data, notes = file.data, []
    if len(data) > FILE_LIMIT:
        data = cut_utf8(data, FILE_LIMIT)
        notes.append(f"[term2: {file.path} cut at {_kib(FILE_LIMIT)}]")
    total_cut = len(data) > room
    if total_cut:
        data = cut_utf8(data, room)
        notes.append(f"[term2: project instructions cut at {_kib(TOTAL_LIMIT)} in total]")
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    return "\n".join([text, *notes]) if notes else text, len(data), total_cut


def render_instructions(files: Sequence[InstructionFile]) -> str:
    """The section the model gets: each file headed with its path, root first; "" without files."""
    parts: list[str] = []
    room = TOTAL_LIMIT
    for index, file in enumerate(files):
        body, used, total_cut = _body(file, room)
        parts.append(f'<project_instructions path="{file.path}">\n{body}\n</project_instructions>')
        room -= used
        if total_cut:
            left_out = [f.path for f in files[index + 1 :]]
            if left_out:
                parts.append(f"[term2: not included, over the total cap: {', '.join(left_out)}]")
            break
    if not parts:
        return ""
    header = (
        "# Project instructions\n\n"
        "The project's own instruction files, from the git root down to the workspace. Follow them; "
        "where two disagree, the later (more specific) one wins, and the user's request wins over both."
    )
    return header + "\n\n" + "\n\n".join(parts)
