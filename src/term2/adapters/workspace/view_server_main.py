"""The program kept running inside a search view: it starts rg for each request term2 sends (ADR 0037).

Also run once per call in a per-call view (`exec`, `one_shot`): the same
view made to follow no link, then rg in this program's place.

Run by the host's own interpreter (`-I -S -c` with this file's text, so the
view needs the interpreter's files but none of term2's), standard library
only. It imports everything it will ever use, then `chroot`s into the jail:
the part of the view holding only rg, the workspace and the ignore files
above it, exactly what the per-call view holds. From then on neither it nor
any rg it starts can reach the interpreter's files by any path, a symlink a
racing program planted in the workspace included.

Protocol, one datagram a message on a SOCK_SEQPACKET socket (id: 8 bytes):
- term2 → here: `R` id, then NUL-separated cwd and rg's arguments, with the
  write ends of rg's stdout and stderr pipes attached (SCM_RIGHTS), and a
  third descriptor when rg is to read a file term2 opened from its stdin;
  `K` id: SIGKILL that rg's process group.
- here → term2: `H` once ready (`E` and why, when it cannot serve);
  `X` id and rg's return code when it ended (negative: the signal); `F` id and why, when rg could
  not be started (term2 then runs that call in a per-call view).
EOF on the socket (term2 closed it, or died) kills every rg and ends this
process; so does an idle while with nothing running.
"""

from __future__ import annotations  # annotations name modules a one-shot never imports

import ctypes
import os
import signal
import struct
import sys

if sys.argv[1:2] != ["exec"]:  # the server's alone: a per-call view's one-shot spares their ~15 ms
    import select
    import socket
    import subprocess

# mount_setattr(2): 442 on every architecture (syscalls added since 5.1 share one number).
SYS_MOUNT_SETATTR = 442
MOUNT_ATTR_NOSYMFOLLOW = 0x00200000
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
CAP_SETPCAP = 8
CAP_SYS_ADMIN = 21
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
CAPABILITY_VERSION_3 = 0x20080522
RG = b"/.term2/rg"
RG_ENV = {b"XDG_CONFIG_HOME": b"/.term2/config", b"HOME": b"/.term2/home"}
MESSAGE = 1 << 16


def start(argv: list[bytes], cwd: bytes, out: int, err: int, given: int | None) -> subprocess.Popen[bytes]:
    """rg in its own process group, from `cwd`, with `given` or an empty stdin; OSError says why it did not start.

    `subprocess` starts it with vfork (no preexec function, no uid or gid
    change): ~0.8 ms, against ~2 ms for `os.fork` of this process and exec.
    """
    if given is None:
        stdin, stdin_w = os.pipe()
        os.close(stdin_w)  # an empty stdin: there is no /dev/null here
    else:
        stdin = given
    try:
        return subprocess.Popen(
            [RG, *argv], executable=RG, stdin=stdin, stdout=out, stderr=err, cwd=cwd, env=RG_ENV,
            process_group=0, close_fds=True, restore_signals=True,
        )  # fmt: skip
    finally:
        if given is None:
            os.close(stdin)  # `given` is the caller's to close


def serve(sock: socket.socket, idle_ms: int) -> None:
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    running: dict[int, tuple[bytes, subprocess.Popen[bytes]]] = {}  # pidfd -> (id, rg)
    groups: dict[bytes, int] = {}  # id -> pid
    try:
        while True:
            events = poller.poll(None if running else idle_ms)
            if not events:
                return  # idle: term2 starts another when it needs one
            for fd, _mask in events:
                if fd in running:
                    ident, rg = running.pop(fd)
                    poller.unregister(fd)
                    os.close(fd)
                    groups.pop(ident, None)
                    sock.send(b"X" + ident + struct.pack("<i", rg.wait()))
                    continue
                message, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE, 3, socket.MSG_CMSG_CLOEXEC)
                if not message:
                    return
                kind, ident, body = message[:1], message[1:9], message[9:]
                if kind == b"K":
                    if ident in groups:
                        try:
                            os.killpg(groups[ident], signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                    continue
                if kind != b"R" or len(fds) not in (2, 3):
                    for extra in fds:
                        os.close(extra)
                    continue
                cwd, *argv = body.split(b"\0")
                try:
                    rg = start(argv, cwd, fds[0], fds[1], fds[2] if len(fds) == 3 else None)
                except (OSError, subprocess.SubprocessError) as failure:
                    sock.send(b"F" + ident + str(failure).encode("utf-8", "replace")[:1000])
                    continue
                finally:
                    for received in fds:
                        os.close(received)
                pidfd = os.pidfd_open(rg.pid)
                running[pidfd] = (ident, rg)
                groups[ident] = rg.pid
                poller.register(pidfd, select.POLLIN)
    finally:
        for pid in groups.values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def no_link_followed() -> None:
    """Make every mount of the view follow no symlink (MOUNT_ATTR_NOSYMFOLLOW), then drop for good the
    capabilities that allowed it: from here on no path rg opens resolves through a link, whoever
    swapped one in and whenever (issue 30). Raises OSError when any step fails: the view is not used.

    A walk opens each file by a path built from what it listed; a command or run_code program
    racing it can put a link to a `.env` (or anywhere) under a listed name in between. Without
    links, a name in the view is the object under that name, and a secret is reached only under
    its own name, which the walk skips.
    """
    libc = ctypes.CDLL(None, use_errno=True)

    def check(result: int, what: str) -> None:
        if result != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")

    attr = ctypes.create_string_buffer(struct.pack("QQQQ", MOUNT_ATTR_NOSYMFOLLOW, 0, 0, 0), 32)
    check(libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, attr, 32), "mount_setattr")
    for cap in (CAP_SYS_ADMIN, CAP_SETPCAP):  # out of the bounding set: no exec gets them back
        check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "PR_CAPBSET_DROP")
    header = ctypes.create_string_buffer(struct.pack("Ii", CAPABILITY_VERSION_3, 0), 8)
    sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; the low 32 capabilities first
    check(libc.capget(header, sets), "capget")
    for index in range(3):  # lowering permitted lowers the ambient set with it
        sets[index] &= ~((1 << CAP_SYS_ADMIN) | (1 << CAP_SETPCAP)) & 0xFFFFFFFF
    check(libc.capset(header, sets), "capset")
    check(libc.capget(header, sets), "capget")
    held = (sets[0] | sets[1] | sets[2]) & ((1 << CAP_SYS_ADMIN) | (1 << CAP_SETPCAP))
    if held or libc.prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) != 0:
        raise OSError("CAP_SYS_ADMIN was not dropped")


def one_shot(jail: str, cwd: str, argv: list[str]) -> None:
    """A per-call view: the same view, made to follow no link, then rg itself in place of this program,
    reading stdin (a file term2 opened, or nothing) and writing to term2's pipes."""
    os.closerange(3, 1 << 16)
    try:
        no_link_followed()
        os.chroot(jail)
        os.chdir(cwd)
        os.execve(RG, [RG, *(os.fsencode(arg) for arg in argv)], RG_ENV)
    except OSError as failure:  # `term2 view:` tells term2 the view failed (ripgrep.VIEW_FAILED), not rg
        os.write(2, f"term2 view: {failure}\n".encode("utf-8", "replace"))
        os._exit(2)


def main() -> None:
    if sys.argv[1] == "exec":
        one_shot(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    fd, jail, idle_ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    os.closerange(3, fd)  # whatever term2 let through: only the socket stays
    os.closerange(fd + 1, 1 << 16)
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    try:
        no_link_followed()
        os.chroot(jail)
        os.chdir("/")
    except OSError as failure:
        sock.send(b"E" + str(failure).encode("utf-8", "replace"))
        return
    sock.send(b"H")
    serve(sock, idle_ms)


if __name__ == "__main__":
    main()
