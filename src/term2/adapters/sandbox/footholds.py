"""Protected paths inside the writable root, and the host-side clean-up after a run.

The workspace root is writable, but a few things in it are run or read by the
*host* later and so are footholds for persistence or theft:

* git metadata: a planted hook or ``core.fsmonitor``/``core.pager`` runs on
  the developer's next git command, and editors run ``git status`` by
  themselves. The root's ``.git``, every nested ``.git`` (submodules,
  worktrees, vendored repositories) and every folder shaped like a git
  directory are bound read-only as a whole; a mount point cannot be renamed
  (EBUSY). Without a repository, ``.git`` and the root's ``HEAD`` are covered
  so that none can be made. What a command creates elsewhere is quarantined
  after it (``tree_scan.py``).
* ``.env`` / ``.env.*`` files anywhere (a complete walk, or no run): masked
  with an empty, unreadable file, so secrets the developer keeps there are
  not read.

bwrap creates missing mount points on the host ("ghosts"); they are recorded
here and removed once no run on that root is active any more.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from term2.adapters.sandbox.tree_scan import TreeScan
from term2.ports.sandbox import SandboxFailed

_SETID = stat.S_ISUID | stat.S_ISGID


_MASK_PARENT = "/tmp"
_PREFIX = "term2-sandbox-"


def _sweep_stale() -> None:
    """Remove mask dirs left by term2 processes that died without cleaning up."""
    try:
        entries = list(os.scandir(_MASK_PARENT))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.removeprefix(_PREFIX).split("-", 1)[0]
        if not entry.name.startswith(_PREFIX) or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.geteuid() or not entry.is_dir(follow_symlinks=False):
                continue
        except OSError:
            continue
        MaskMaterial(file=os.path.join(entry.path, "mask"), directory=os.path.join(entry.path, "empty")).remove()


@dataclass(frozen=True, slots=True)
class MaskMaterial:
    """Host-side sources for masks: an empty mode-000 file and an empty read-only dir.

    They live in a fresh directory under /tmp, which every sandbox covers with its
    own tmpfs, so a command can never reach (and chmod) the source inode.
    """

    file: str
    directory: str

    @classmethod
    def create(cls) -> MaskMaterial:
        _sweep_stale()
        base = tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=_MASK_PARENT)
        os.chmod(base, 0o711)  # bwrap may run as the workspace owner and must reach these
        file = os.path.join(base, "mask")
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o000)
        os.close(fd)
        os.chmod(file, 0o000)
        directory = os.path.join(base, "empty")
        os.mkdir(directory)
        os.chmod(directory, 0o555)
        return cls(file=file, directory=directory)

    def remove(self) -> None:
        base = os.path.dirname(self.file)
        for path, remover in (
            (self.file, os.unlink),
            (self.directory, os.rmdir),
            (base, os.rmdir),
        ):
            try:
                remover(path)
            except OSError:
                pass


@dataclass(slots=True)
class ProtectionPlan:
    """bwrap arguments to append after ``--bind root root``, and the ghosts they create."""

    args: list[str] = field(default_factory=list)
    ghosts: list[str] = field(default_factory=list)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _refuse_symlink(path: str, st: os.stat_result | None) -> None:
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise SandboxFailed(
            f"refusing to run: protected path {path} is a symlink; "
            "replace it with a real file or directory (or remove it) and retry"
        )


def _is_empty_dir(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def plan_protection(scan: TreeScan, masks: MaskMaterial, *, guard_instructions: bool = False) -> ProtectionPlan:
    """Mount arguments that pin git metadata read-only and mask ``.env`` files found by ``scan``; with
    ``guard_instructions`` (a command nobody was asked about, ADR 0044), every instruction file that is a
    regular file is pinned read-only too (a mount point: writing fails with EROFS, renaming or removing
    it with EBUSY). What such a command creates or swaps in is quarantined after it (tree_scan)."""
    plan = ProtectionPlan()
    if guard_instructions:
        for path in sorted(scan.instructions):
            st = _lstat(path)
            if st is not None and stat.S_ISREG(st.st_mode):
                plan.args += ["--ro-bind", path, path]
    for link in scan.secret_links:
        _refuse_symlink(link, _lstat(link))
    _plan_git(scan.root, masks, plan)
    for mark in scan.marks.values():
        st = _lstat(mark.path)
        if st is None or stat.S_ISLNK(st.st_mode):
            continue  # a link is not followed by the mount; replacing it is caught after the run
        plan.args += ["--ro-bind", mark.path, mark.path]
    for env_file in scan.env_files:
        plan.args += ["--ro-bind", masks.file, env_file]
    return plan


def _plan_git(root: str, masks: MaskMaterial, plan: ProtectionPlan) -> None:
    """The root's ``.git``, read-only as a whole; without a repository, none can be made.

    Read-only as a whole, not file by file: ``commondir``, ``gitdir`` and
    ``worktrees/*/`` redirect git to another config just as well as
    ``config`` itself does. A missing or empty ``.git`` is covered with an
    empty read-only directory, and the root's own ``HEAD`` is then pinned too,
    because the host's git, finding no repository in ``.git``, would take the
    root itself for a bare one.
    """
    git = os.path.join(root, ".git")
    st = _lstat(git)
    _refuse_symlink(git, st)
    no_repository = st is None or (stat.S_ISDIR(st.st_mode) and not os.path.lexists(os.path.join(git, "HEAD")))
    if st is None or (stat.S_ISDIR(st.st_mode) and _is_empty_dir(git)):
        plan.args += ["--ro-bind", masks.directory, git]
        if st is None:
            plan.ghosts.append(git)
    else:
        plan.args += ["--ro-bind", git, git]  # a mount point: renaming it fails with EBUSY
    if no_repository:
        head = os.path.join(root, "HEAD")
        head_st = _lstat(head)
        _refuse_symlink(head, head_st)
        if head_st is None:
            plan.args += ["--ro-bind", masks.file, head]
            plan.ghosts.append(head)
        else:
            plan.args += ["--ro-bind", head, head]


def remove_ghosts(ghosts: list[str]) -> None:
    """Delete mount points bwrap created, only while they are still empty."""
    for path in sorted(ghosts, key=len, reverse=True):
        st = _lstat(path)
        if st is None:
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(path)  # fails (and is kept) if something is inside
            elif stat.S_ISREG(st.st_mode) and st.st_size == 0:
                os.unlink(path)
        except OSError:
            pass


def strip_setid_bits(files: list[str]) -> list[str]:
    """Clear setuid/setgid on the given regular files (found by the post-run walk); return what changed.

    Runs after the sandbox is gone and opens each file with O_NOFOLLOW, so a
    symlink cannot redirect the chmod outside the root.
    """
    return [path for path in files if _clear_setid(path)]


def _clear_setid(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_SETID)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def secret_masks(masks: MaskMaterial) -> list[str]:
    """bwrap arguments hiding root-only host secrets, for runs that map to host root.

    When the sandbox's uid is host uid 0 (a root-owned workspace with a root
    agent), file permissions do not protect these; a mount over them does.
    """
    args: list[str] = []
    candidates = [
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow",
        "/etc/gshadow-",
        "/etc/sudoers",
    ]
    ssh = Path("/etc/ssh")
    if ssh.is_dir():
        candidates += sorted(str(p) for p in ssh.glob("ssh_host_*_key"))
    for path in candidates:
        st = _lstat(path)
        if st is not None and stat.S_ISREG(st.st_mode):
            args += ["--ro-bind", masks.file, path]
    for directory in ("/etc/ssl/private",):
        st = _lstat(directory)
        if st is not None and stat.S_ISDIR(st.st_mode):
            args += ["--ro-bind", masks.directory, directory]
    return args


def hidden_masks(hidden: Sequence[str], masks: MaskMaterial) -> list[str]:
    """bwrap arguments covering term2's own store and config, wherever they live.

    Only existing paths are covered (a mount point is never created for them),
    folders with an empty read-only directory, files with the empty mode-000 file.
    """
    args: list[str] = []
    for path in hidden:
        st = _lstat(path)
        if st is None:
            continue
        source = masks.directory if stat.S_ISDIR(st.st_mode) else masks.file
        args += ["--ro-bind", source, path]
    return args


# System folders where a program run by root may still leave a socket (a service under /opt, a
# local install under /usr/local). The rest of /usr and /nix are package-managed and immutable.
SOCKET_SCAN_DIRS = ("/etc", "/opt", "/usr/local")
SOCKET_SCAN_MAX_ENTRIES = 200_000


def host_sockets(dirs: Sequence[str] = SOCKET_SCAN_DIRS, limit: int = SOCKET_SCAN_MAX_ENTRIES) -> list[str]:
    """Unix sockets in the visible system folders, to cover with a mask (links never followed)."""
    found: list[str] = []
    pending = [d for d in dirs if os.path.isdir(d) and not os.path.islink(d)]
    seen = 0
    while pending and seen < limit:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                        continue
                    try:
                        if stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                            found.append(entry.path)
                    except OSError:
                        continue
        except OSError:
            continue
    return found


def socket_masks(sockets: Sequence[str], masks: MaskMaterial) -> list[str]:
    """A socket covered by the empty mode-000 file cannot be connected to."""
    args: list[str] = []
    for path in sockets:
        st = _lstat(path)
        if st is not None and stat.S_ISSOCK(st.st_mode):
            args += ["--ro-bind", masks.file, path]
    return args
