"""A pids cgroup per command: the process limit that also binds host root.

RLIMIT_NPROC is not enforced for host uid 0, so a command in a root-owned
workspace (term2 running as root, as in CI and containers) could fork without
bound until its timeout. When this process may create cgroups (root, with a
pids controller mounted), each command gets its own child cgroup with
`pids.max`; a shell line writes its own pid into it and then execs the rest of
the argv, so bwrap and everything under it are counted from the first fork.
Where no cgroup can be made, the rlimit is all there is, and the adapter says so.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass

V1_ROOT = "/sys/fs/cgroup/pids"
V2_ROOT = "/sys/fs/cgroup"
PARENT = "term2"
JOIN = 'echo $$ > "$0" && exec "$@"'  # run by /bin/sh: join the cgroup, then become the sandbox


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _parent() -> str | None:
    """The writable cgroup folder under which per-command groups go, or None."""
    if os.geteuid() != 0:
        return None
    if os.path.isdir(V1_ROOT) and os.access(V1_ROOT, os.W_OK):
        parent = os.path.join(V1_ROOT, PARENT)
        os.makedirs(parent, exist_ok=True)
        return parent
    controllers = os.path.join(V2_ROOT, "cgroup.controllers")
    try:
        with open(controllers) as handle:
            has_pids = "pids" in handle.read().split()
    except OSError:
        return None
    if not has_pids:
        return None
    parent = os.path.join(V2_ROOT, PARENT)
    os.makedirs(parent, exist_ok=True)
    _write(os.path.join(V2_ROOT, "cgroup.subtree_control"), "+pids")
    _write(os.path.join(parent, "cgroup.subtree_control"), "+pids")
    return parent


@dataclass(frozen=True, slots=True)
class PidsCgroup:
    path: str

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        try:
            parent = _parent()
            if parent is None:
                return None
            path = os.path.join(parent, uuid.uuid4().hex)
            os.mkdir(path)
            _write(os.path.join(path, "pids.max"), str(limit))
        except OSError:
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside this cgroup."""
        return ["/bin/sh", "-c", JOIN, os.path.join(self.path, "cgroup.procs"), *argv]

    def remove(self) -> None:
        """Delete the group once its processes are gone (they were killed with the sandbox)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
