"""Act on the very object the workspace rule judged: open by descriptors, never by path.

The tools get canonical paths (resolve() followed every symlink), so a symlink
met while opening one component at a time can only be a swap made after the
decision, typically by a run_code program running beside its own tool call.
It is refused, never followed. Every later step (make a folder, open, list,
walk, clean up) is relative to a descriptor opened this way, so the kernel
never re-resolves a path string between term2's check and its act. Opening
starts from the root's descriptor for paths inside it and from `/` for the
(approved) paths outside it.

Files are opened with O_NONBLOCK and checked with fstat, so that a FIFO,
socket or device planted where a file was expected is refused instead of
blocking a worker thread forever or streaming without end.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from term2.app.tools import names
from term2.app.tools.failure import ToolFailed
from term2.domain.workspace import is_within

FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FOLDER_READ = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
FILE_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
FILE_WRITE = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
CHUNK = 64 * 1024


def changed(path: str, detail: str) -> ToolFailed:
    return ToolFailed(f"{names.shown(path)} changed while it was being opened ({detail}); nothing was done")


def _swapped(path: str, folder_fd: int, name: str, shown: str) -> ToolFailed:
    try:
        detail = f"{names.shown(shown)} is now a symlink to {names.shown(os.readlink(name, dir_fd=folder_fd))}"
    except OSError:
        detail = f"{names.shown(shown)} is no longer what was judged"
    return changed(path, detail)


def special_kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, for the refusal message."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def _start(path: str, root: str) -> tuple[int, list[str], str]:
    """A descriptor to start from, the components below it, and its path."""
    if is_within(path, root):
        rel = os.path.relpath(path, root)
        return os.open(root, FOLDER), ([] if rel == "." else rel.split("/")), root
    return os.open("/", FOLDER), [part for part in path.split("/") if part], "/"


def _descend(fd: int, name: str, path: str, shown: str, create: bool) -> int:
    """Open the folder `name` under `fd` without following it, making it first if asked."""
    try:
        return os.open(name, FOLDER, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError:
        if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise _swapped(path, fd, name, shown) from None
        raise NotADirectoryError(f"{names.shown(shown)} is not a directory") from None
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # made by someone else since: opened like any other, without following
    return _descend(fd, name, path, shown, create=False)


def open_folder(path: str, root: str, *, create: bool = False, readable: bool = False) -> int:
    """A descriptor of the canonical folder `path` (O_PATH unless `readable`).

    With `create`, missing folders are made on the way, each inside the
    descriptor of its parent. FileNotFoundError names `path` as a folder.
    """
    fd, parts, shown = _start(path, root)
    try:
        for name in parts:
            shown = os.path.join(shown, name)
            try:
                child = _descend(fd, name, path, shown, create)
            except FileNotFoundError:
                raise FileNotFoundError(f"folder not found: {names.shown(path)}") from None
            os.close(fd)
            fd = child
        if readable:
            child = os.open(".", FOLDER_READ, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_parent(path: str, root: str, *, create: bool = False) -> tuple[int, str]:
    """The parent folder's descriptor and the last component ("." for `/`)."""
    return open_folder(os.path.dirname(path), root, create=create), os.path.basename(path) or "."


def lstat_in(folder_fd: int, name: str, path: str) -> os.stat_result:
    """What `name` is in the folder, without following it: a symlink is a swap."""
    try:
        info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise FileNotFoundError(f"file not found: {names.shown(path)}") from None
    if stat.S_ISLNK(info.st_mode):
        raise _swapped(path, folder_fd, name, path)
    return info


def require_regular(info: os.stat_result, path: str, verb: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"{names.shown(path)} is a directory")
    kind = special_kind(info.st_mode)
    if kind is not None or not stat.S_ISREG(info.st_mode):
        raise ToolFailed(f"{names.shown(path)} is {kind or 'not a file'}, not a regular file; it is not {verb}")


def open_in(folder_fd: int, name: str, path: str, *, flags: int = FILE_READ, verb: str = "read") -> int:
    """Open the regular file `name` in the folder, refusing links and special files.

    The name is looked at before it is opened (opening a device can have
    effects of its own) and the descriptor after (it may have been swapped in
    between: O_NONBLOCK keeps that open from blocking on a FIFO).
    """
    require_regular(lstat_in(folder_fd, name, path), path, verb)
    try:
        fd = os.open(name, flags, dir_fd=folder_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _swapped(path, folder_fd, name, path) from None
        raise
    try:
        require_regular(os.fstat(fd), path, verb)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str, root: str, *, verb: str = "read") -> int:
    """A read-only descriptor of the canonical regular file `path`."""
    try:
        folder_fd, name = open_parent(path, root)
    except FileNotFoundError:
        raise FileNotFoundError(f"file not found: {names.shown(path)}") from None
    try:
        return open_in(folder_fd, name, path, verb=verb)
    finally:
        os.close(folder_fd)


def read_upto(fd: int, limit: int) -> bytes:
    """At most `limit` bytes from `fd`, read in bounded chunks."""
    parts: list[bytes] = []
    left = limit
    while left > 0:
        data = os.read(fd, min(CHUNK, left))
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)


def capped_lines(fd: int, first: bytes, cap: int) -> Iterator[bytes]:
    """The lines of `first` and then of the rest of `fd`, each cut at `cap` bytes.

    A longer line is yielded as soon as it reaches the cap and the rest of it
    is skipped as it is read, so one enormous line never sits in memory and
    a reader that stops at a cut line stops reading the file too.
    """
    line = bytearray()
    skipping = False
    chunk = first
    while chunk:
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline == -1 else newline + 1
            if skipping:
                skipping = newline == -1
            else:
                line += chunk[start : min(end, start + cap - len(line))]
                if newline != -1 or len(line) >= cap:
                    yield bytes(line)
                    line.clear()
                    skipping = newline == -1
            start = end
        chunk = os.read(fd, CHUNK)
    if line:
        yield bytes(line)


def write_whole(path: str, root: str, data: bytes, *, mode: int = 0o644) -> bool:
    """Create or replace the canonical file `path` with `data`; True when it was created.

    Missing folders are made on the way. An existing file is opened without
    truncation and emptied only once it is known to be the regular file
    judged. A file this call created is removed again if writing fails, by
    name in its own folder and only while that name still holds its inode.
    """
    folder_fd, name = open_parent(path, root, create=True)
    try:
        try:
            existing: os.stat_result | None = lstat_in(folder_fd, name, path)
        except FileNotFoundError:
            existing = None
        if existing is None:
            fd = os.open(name, FILE_WRITE | os.O_CREAT | os.O_EXCL, mode & 0o7777, dir_fd=folder_fd)
        else:
            require_regular(existing, path, "written")
            fd = open_in(folder_fd, name, path, flags=FILE_WRITE, verb="written")
        try:
            mine = os.fstat(fd)
            try:
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except BaseException:
                if existing is None:
                    _remove_own(folder_fd, name, mine)
                raise
        finally:
            os.close(fd)
        return existing is None
    finally:
        os.close(folder_fd)


def remove_whole(path: str, root: str) -> None:
    """Remove the canonical regular file `path`, by name in its folder, reached by descriptors from the root.

    A symlink or special file put there is refused, never followed: unlink removes a name, not what it
    points at, so a swap after the check removes only the name swapped in.
    """
    folder_fd, name = open_parent(path, root)
    try:
        require_regular(lstat_in(folder_fd, name, path), path, "removed")
        os.unlink(name, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)


def _remove_own(folder_fd: int, name: str, mine: os.stat_result) -> None:
    try:
        now = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            os.unlink(name, dir_fd=folder_fd)
    except OSError:
        pass  # best effort: the write's own error is the one to report
