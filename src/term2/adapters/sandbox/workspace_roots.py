"""The workspace roots of one command: which may be bound (the walks around it are ``root_walks``).

A session's roots are its cwd root and the editor's additional directories (ACP v1,
ADR 0050). Every one is bound writable, so every one is judged as the root is
judged before anything is bound (a bad root is never bound, ADR 0011): one root
judged more loosely would be the way around every rule the others keep.

Each extra root must belong to the root's owner: the command runs as that one
user (``invocation.identity_for``), so a root of another user would be written
with the wrong rights, a user's folder by host root, or root's by the user.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from term2.domain.footholds import unsafe_root_reason
from term2.domain.paths import is_within
from term2.ports.sandbox import CommandRequest, SandboxFailed


def validated(request: CommandRequest, hidden: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
    """Canonical root, cwd and extra roots, or SandboxFailed: a bad root is never bound."""
    root, cwd = request.root, request.cwd
    for name, path in (("root", root), ("cwd", cwd)):
        _check_directory(f"workspace {name}", path)
    _check_safe(root, hidden)
    if cwd != root and not cwd.startswith(root + "/"):
        raise SandboxFailed(f"cwd {cwd!r} is outside the workspace root {root!r}")
    return root, cwd, extra_roots(root, request.extra_roots, hidden)


def extra_roots(root: str, extras: Sequence[str], hidden: Sequence[str]) -> tuple[str, ...]:
    """The additional roots, each judged exactly as the root, none overlapping another, all of the root's owner.

    Overlap is refused rather than merged: a root inside another would be bound twice (the inner bind
    over the outer one's masks) and walked twice, each walk blind to the other's view of the same files.
    """
    if not extras:
        return ()
    owner = _owner(root)
    accepted: list[str] = []
    for extra in extras:
        what = "additional workspace root"
        _check_directory(what, extra)
        _check_safe(extra, hidden)
        for other in (root, *accepted):
            if is_within(extra, other) or is_within(other, extra):
                relation = "is" if extra == other else "is inside" if is_within(extra, other) else "holds"
                raise SandboxFailed(f"refusing to bind {what} {extra!r}: it {relation} the workspace root {other!r}")
        if _owner(extra) != owner:
            raise SandboxFailed(
                f"refusing to bind {what} {extra!r}: it belongs to another user than the workspace root "
                f"{root!r}; a command runs as the root's owner, so every root must be that user's"
            )
        accepted.append(extra)
    return tuple(accepted)


def _owner(path: str) -> int:
    try:
        return os.stat(path).st_uid
    except OSError as exc:
        raise SandboxFailed(f"workspace root {path!r} cannot be checked: {exc}") from exc


def _check_directory(what: str, path: str) -> None:
    if not os.path.isabs(path) or os.path.realpath(path) != path:
        raise SandboxFailed(f"{what} {path!r} is not a canonical absolute path")
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise SandboxFailed(f"{what} {path!r} is not a directory")
    except FileNotFoundError as exc:
        raise SandboxFailed(f"{what} {path!r} does not exist") from exc


def _check_safe(root: str, hidden: Sequence[str]) -> None:
    reason = unsafe_root_reason(root, home=os.path.realpath(os.path.expanduser("~")), private=hidden)
    if reason is not None:
        raise SandboxFailed(f"refusing to make {root!r} writable: {reason}")
