"""Small helpers for looking at file contents the way the tools need to.

Opening files is anchored.py's job; this module only judges bytes and sizes.

Binary detection is the git heuristic (a NUL byte near the start): cheap,
and good enough to keep images and archives out of the model's context.
"""

from __future__ import annotations

SNIFF_BYTES = 8192


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:SNIFF_BYTES]


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
