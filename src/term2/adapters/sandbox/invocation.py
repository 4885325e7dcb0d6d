"""The exact argv a sandboxed command runs under (sandbox notes §4).

Kept as a pure function so the probe in ``status()`` and every real run share
one builder: the probe proves the production argv, not a look-alike.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from term2.adapters.sandbox.installed import BWRAP as BWRAP  # named where start-up checks it is installed

PRLIMIT = "/usr/bin/prlimit"
SETPRIV = "/usr/bin/setpriv"
SHELL = "/bin/bash"
SANDBOX_UID = 1000  # the uid/gid the command sees; it maps to whoever started bwrap
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/run", "/root", "/home")
# The host a command sees, read-only: the system and its toolchains, nothing
# else. Not `/`: every other folder may hold a Unix socket (an agent, docker,
# an IDE) or another user's data, and a socket can be connected through a
# read-only mount. Top-level links (merged /usr) are recreated as links.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix")


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-command resource limits (rlimits set by prlimit before bwrap starts).

    ``processes`` (RLIMIT_NPROC) only binds when bwrap runs as a non-root host
    uid: the kernel exempts host uid 0. ``address_space`` (RLIMIT_AS) breaks
    programs that reserve huge virtual ranges (JVM, Go race detector, ASan),
    hence the generous default.
    """

    address_space: int = 16 << 30
    file_size: int = 1 << 30
    open_files: int = 1024
    processes: int = 1024
    cpu_seconds: int = 900
    tmpfs_size: int = 256 << 20
    # Entries the pre-run walk may see (.env masks, git metadata); past it the run is refused.
    scan_entries: int = 5_000_000


@dataclass(frozen=True, slots=True)
class Identity:
    """Whom bwrap runs as on the host.

    ``drop_to`` is the (uid, gid) to switch to with setpriv when term2 is root
    and the workspace belongs to someone else; ``host_root`` is true when the
    sandbox's uid is host uid 0 (extra masks then apply).
    """

    drop_to: tuple[int, int] | None
    host_root: bool


def identity_for(root_uid: int, root_gid: int) -> Identity:
    if os.geteuid() != 0:
        return Identity(drop_to=None, host_root=False)
    if root_uid != 0:
        return Identity(drop_to=(root_uid, root_gid), host_root=False)
    return Identity(drop_to=None, host_root=True)


def private_dirs() -> list[str]:
    """Host dirs replaced by a private tmpfs; symlinked ones by their target."""
    seen: list[str] = []
    for path in PRIVATE_DIRS:
        real = os.path.realpath(path)
        if os.path.isdir(real) and real not in seen and real != "/":
            seen.append(real)
    return seen


def host_view() -> list[str]:
    """bwrap arguments that show the system folders, read-only, on an empty root."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def build_argv(
    *,
    bwrap: str,
    limits: Limits,
    identity: Identity,
    roots: Sequence[tuple[str, Sequence[str]]],
    cwd: str,
    command: str,
    status_fd: int,
    seccomp_fd: int,
    host_masks: list[str],
    network: tuple[list[str], list[str]] | None = None,
) -> list[str]:
    """``roots``: each workspace root (the one holding ``cwd`` first, then the extra ones, ADR 0050) with
    the protection arguments of its own walk, bound in that order: no root holds another, so no bind
    covers another's masks. ``network``: the proxy sockets' bind arguments and the bridge that runs the
    command (ADR 0030); without it the command has its namespace's loopback and nothing else."""
    argv = [
        PRLIMIT,
        f"--as={limits.address_space}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        f"--nproc={limits.processes}",
        f"--cpu={limits.cpu_seconds}",
        "--",
    ]
    if identity.drop_to is not None:
        uid, gid = identity.drop_to
        argv += [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
    argv += [
        bwrap,
        "--json-status-fd", str(status_fd),
        "--unshare-all", "--unshare-user", "--disable-userns",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--hostname", "sandbox",
        "--cap-drop", "ALL",
        "--new-session", "--die-with-parent",
        *host_view(),
        "--dev", "/dev",
        "--proc", "/proc", "--remount-ro", "/proc",
    ]  # fmt: skip
    for directory in private_dirs():
        argv += ["--size", str(limits.tmpfs_size), "--tmpfs", directory]
    argv += host_masks
    # After the tmpfs mounts, so a root under /tmp or /home is still reachable; each root's masks right
    # after its own bind, which they must lie on.
    for root, protection in roots:
        argv += ["--bind", root, root, *protection]
    if network is not None:
        argv += network[0]  # after the tmpfs mounts: the sockets appear on the private /run
    # The empty root bwrap builds the view on is read-only too: no stray files outside the root.
    argv += ["--remount-ro", "/", "--chdir", cwd, "--seccomp", str(seccomp_fd)]
    argv += ["--", *(network[1] if network is not None else []), SHELL, "--noprofile", "--norc", "-c", command]
    return argv
