"""The launcher that stands between term2 and one stdio MCP server: no process of the server outlives it.

Run by path with term2's interpreter (``python -I -S launcher.py PARENT_PID -- COMMAND ARGS...``),
stdlib only, so it starts in milliseconds and imports nothing of term2's. Why a process of its own:
a server may start helpers, and a helper may double-fork and `setsid` out of every process group;
signalling the server's group (what the SDK did) misses it, and the kernel's parent-death signal
reaches only the direct child. This launcher makes itself a child subreaper
(PR_SET_CHILD_SUBREAPER), so every process the server starts, however it detaches, becomes the
launcher's child when its own parent dies; and a process that has no children has no descendants
left. It ends them all, then itself, when:
- the server exits (its stdin closed by term2, a crash, on its own): the helpers it left are killed;
- term2 asks it to stop (SIGTERM, SIGINT or SIGHUP): the server gets SIGTERM and `GRACE_S` to exit;
- term2 dies, however (SIGKILL included): the kernel sends the launcher SIGTERM (PR_SET_PDEATHSIG),
  and a parent that died before that was set is seen by `getppid`.
Ending them all starts with one kill of the server's process group (the server leads one of its
own): the kernel signals a group as one act that no fork in it can outrun, so a helper that forks
and exits in a loop, faster than any look into /proc, ends there. The server is not reaped before
that kill, so the group's number cannot have been given to anyone else. What left the group
(`setsid`, `setpgid`) is then found in a loop: kill every descendant found in /proc, reap, again,
until `waitpid` says there are no children. Orphans of the killed reparent here between rounds.
A process that leaves the group and then forks and exits faster than a round can outlast the
loop (term2 kills the launcher after 7 s; ADR 0040's residual). The server gets the launcher's
stdin and stdout (the pipes to term2) and its stderr; the launcher keeps none of the pipes, so
term2 sees their ends as the server's. The server leads its own process group, so it cannot call
`setsid` itself (EPERM, as for any group leader); a daemon's usual fork before it works.

Exit status: the server's (128+N for a signal), 126 when the launcher could not guard the server
(not Linux, no prctl), 127 when the command could not be started (the reason on stderr).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 2.0  # for the server to exit after SIGTERM before everything is killed
STOPS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
WATCHED = {signal.SIGCHLD, *STOPS}


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        parent = int(stat.rsplit(b")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
    return children


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc (parents first)."""
    children = _children()
    found, pending = [], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _kill_descendants() -> None:
    """SIGKILL every descendant, each through a pidfd taken before checking it is still ours.

    A process number read from /proc may be freed and reused by another user's process before the
    signal; held as a pidfd it cannot be, and a second look at /proc says whether it is still below us.
    """
    handles: dict[int, int] = {}
    for pid in _descendants(os.getpid()):
        try:
            handles[pid] = os.pidfd_open(pid)
        except OSError:
            continue  # gone already
    ours = set(_descendants(os.getpid()))
    for pid, fd in handles.items():
        try:
            if pid in ours:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def _end_all(server: int) -> None:
    """Kill the server's group at once, then kill and reap until no child is left: then no descendant is
    left either (they reparent here). `server` is unreaped until here, so its group is still ours."""
    try:
        os.killpg(server, signal.SIGKILL)
    except OSError:
        pass  # none left in it (ESRCH), or only processes not ours to signal (EPERM, a setuid one): the loop goes on
    while True:
        _kill_descendants()
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _exited(server: int) -> int | None:
    """The server's exit status if it has exited, leaving it unreaped (its process group stays reserved)."""
    info = os.waitid(os.P_PID, server, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if info is None or info.si_pid == 0:
        return None
    return info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status


def _reap_others(server: int) -> None:
    """Reap the orphans that have exited, never the server."""
    for child in _children().get(os.getpid(), []):
        if child != server:
            try:
                os.waitpid(child, os.WNOHANG)
            except ChildProcessError:
                pass


def _supervise(server: int) -> int:
    """Wait for the server to exit or a stop to be asked; reap every other child meanwhile."""
    code, deadline = 0, None
    while True:
        _reap_others(server)
        status = _exited(server)
        if status is not None:
            code = status
            break
        if deadline is None:
            info: signal.struct_siginfo | None = signal.sigwaitinfo(WATCHED)
        else:
            info = signal.sigtimedwait(WATCHED, max(0.0, deadline - time.monotonic()))
        if info is None:
            break  # the grace is over
        if info.si_signo in STOPS and deadline is None:
            deadline = time.monotonic() + GRACE_S
            os.kill(server, signal.SIGTERM)
            code = 128 + info.si_signo
    _end_all(server)
    return code


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: launcher.py PARENT_PID -- COMMAND [ARGS...]\n")
        return 2
    parent, command = int(argv[0]), argv[2:]
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)  # taken by sigwaitinfo, never lost between checks
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError) as err:
        sys.stderr.write(f"term2 MCP launcher: cannot guard the server, so it is not started: {err}\n")
        return 126
    if os.getppid() != parent:  # term2 died before the death signal was set: start nothing
        return 128 + signal.SIGTERM
    try:
        server = os.posix_spawnp(
            command[0],
            command,
            os.environ,
            setsigmask=(),
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, *WATCHED),
            setpgroup=0,  # a group of its own, killed as one at the end (_end_all)
        )
    except (OSError, ValueError) as err:
        sys.stderr.write(f"term2 MCP launcher: could not start {command[0]!r}: {err}\n")
        return 127
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)  # the pipes are the server's now: their ends tell term2 about it, not about us
    os.dup2(null, 1)
    os.close(null)
    return _supervise(server)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
