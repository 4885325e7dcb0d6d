"""Small helpers for looking at files the way the tools need to.

Binary detection is the git heuristic (a NUL byte near the start): cheap,
and good enough to keep images and archives out of the model's context.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from term2.app.tools.base import ToolFailed

SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def _moved(path: str, actual: str) -> ToolFailed:
    return ToolFailed(f"{path} changed while it was being opened (it now leads to {actual}); nothing was done")


def open_checked(path: str) -> BinaryIO:
    """Open the canonical `path` for reading, only if it still is that file.

    The workspace decision was taken on the resolved path; a symlink swapped in
    since (say, by a run_code program running beside its own tool call) must be
    refused, not followed. O_NOFOLLOW covers the last component, the check of
    what the descriptor really names covers the folders above it.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    actual = os.readlink(f"/proc/self/fd/{fd}")
    if actual != path:
        os.close(fd)
        raise _moved(path, actual)
    return os.fdopen(fd, "rb")


def write_checked(path: str, data: bytes) -> None:
    """Replace the contents of the canonical `path`, with the same check as `open_checked`.

    The file is opened without truncation and emptied only once the check has
    passed, so a swapped path never loses its contents; a file this call created
    in the wrong place is removed again.
    """
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    created = False
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
        created = True
    try:
        actual = os.readlink(f"/proc/self/fd/{fd}")
        if actual != path:
            if created:
                try:
                    os.unlink(actual)
                except OSError:
                    pass
            raise _moved(path, actual)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def file_is_binary(path: str) -> bool:
    with open_checked(path) as handle:
        return looks_binary(handle.read(SNIFF_BYTES))


def require_file(path: str) -> None:
    """Raise FileNotFoundError / IsADirectoryError with the path in the message."""
    if not os.path.lexists(path) or not os.path.exists(path):
        raise FileNotFoundError(f"file not found: {path}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory")


def count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
