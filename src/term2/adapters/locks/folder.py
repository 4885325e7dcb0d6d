"""Where the user's folder locks live: a path, which opening a session needs (term2's own folders are never a
workspace) without the locks themselves (ADR 0053)."""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path


def lock_folder(env: Mapping[str, str]) -> Path:
    """Where the user's locks live, chosen so that every term2 process of the user picks the same folder.

    The system's runtime folder for the user (`/run/user/<uid>`, cleared at logout) when it exists, whatever
    a process's environment says; else `$XDG_RUNTIME_DIR`; else a folder in the home the password database
    gives the user (not `$HOME`, not term2's home: two processes with different ones must still meet, and
    no other user can make a folder there first).
    """
    uid = os.getuid()
    system = Path(f"/run/user/{uid}")
    with contextlib.suppress(OSError):
        info = os.stat(system, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid:
            return system / "term2-locks"
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "term2-locks"
    return Path(pwd.getpwuid(uid).pw_dir) / ".local" / "state" / "term2-locks"
