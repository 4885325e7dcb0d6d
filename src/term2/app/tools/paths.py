"""Turn a model-supplied path into the canonical path every decision is made on.

The workspace rule compares canonical paths only, so resolution must follow
symlinks and `..` to where they really land *before* any decision: a link
inside the root that points at /etc is judged as /etc, and a path outside
the root that leads back in is judged as inside.
"""

from __future__ import annotations

import os
import re

from term2.app.tools.args import ArgumentError
from term2.app.tools.names import unshown
from term2.domain.workspace import is_within

PATH_MAX = 4096  # Linux's: no longer path can be opened anyway
_NOT_A_BYTE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # lone surrogates surrogateescape never makes


def canonical_root(root: str) -> str:
    return os.path.realpath(root)


def resolve(root: str, raw: str) -> str:
    """Resolve `raw` against the workspace root and canonicalize it.

    Relative paths are relative to the root (never to the process's own cwd).
    `~` is not expanded: the model gets exactly the path it wrote. For a path
    that does not exist yet, its nearest existing parent is canonicalized and
    the remaining components are appended, which is what a later create
    would actually touch. The walk up is a loop, not recursion: a path of
    thousands of components must be an answer, not a RecursionError.
    """
    if not raw:
        raise ArgumentError("path must not be empty")
    if "\x00" in raw:
        raise ArgumentError("path must not contain NUL characters")
    if len(raw) > PATH_MAX:
        raise ArgumentError(f"path is {len(raw)} characters long; the limit is {PATH_MAX}")
    base = canonical_root(root)
    head = raw if os.path.isabs(raw) else os.path.join(base, raw)
    missing: list[str] = []  # trailing components that do not exist, innermost first
    while not os.path.lexists(head):
        parent, name = os.path.split(head.rstrip("/") or "/")
        if name in ("", ".", ".."):
            break  # realpath settles `.` and `..` over missing folders by itself
        missing.append(name)
        head = parent
    return os.path.join(os.path.realpath(head), *reversed(missing))


def resolve_shown(root: str, text: str) -> str:
    """`resolve` of a path argument as the model writes it: in the form the tools show names (names.py).

    `caf\\xe9.txt`, as grep, glob and list_dir show a Latin-1 name, reaches the file whose name holds the
    byte 0xE9, and every decision is then made on that canonical path, as for any other. A lone surrogate
    that stands for no byte (JSON's `\\ud800`) names no file and is refused.
    """
    if _NOT_A_BYTE.search(text):
        raise ArgumentError("path holds a lone surrogate that stands for no byte; write names as the tools show them")
    return resolve(root, unshown(text))


def folder_of(resolved: str) -> str:
    """The folder a folder-scoped grant covers: the path itself if a directory."""
    return resolved if os.path.isdir(resolved) else os.path.dirname(resolved)


def display(path: str, root: str) -> str:
    """A short form for the model: relative inside the root, absolute outside."""
    base = canonical_root(root)
    if path == base:
        return "."
    if is_within(path, base):
        return os.path.relpath(path, base)
    return path
