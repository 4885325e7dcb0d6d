"""Small helpers for looking at files the way the tools need to.

Binary detection is the git heuristic (a NUL byte near the start): cheap,
and good enough to keep images and archives out of the model's context.
"""

from __future__ import annotations

import os

SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def file_is_binary(path: str) -> bool:
    with open(path, "rb") as handle:
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
