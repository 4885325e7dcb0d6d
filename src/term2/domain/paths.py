"""Canonical paths compared as paths, not strings: "/a/bc" is not inside "/a/b"."""

from __future__ import annotations

from pathlib import PurePosixPath


def is_within(path: str, folder: str) -> bool:
    p, f = PurePosixPath(path), PurePosixPath(folder)
    return p == f or f in p.parents
