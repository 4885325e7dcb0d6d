"""A hand-assembled seccomp deny-list for bwrap's ``--seccomp FD``.

Why by hand: libseccomp's Python binding is not a dependency, and the filter is
small enough to read in full. It is a deny-list, not an allow-list, because the
sandbox runs arbitrary developer tools (compilers, git, node, python) whose
syscall sets cannot be enumerated; what it removes is the kernel attack surface
and the ways to tamper with bwrap's own pid 1 that the sandbox notes measured as
open (ptrace of pid 1, io_uring, keyctl, TIOCSTI...).

Layout: check the architecture (anything but x86_64 is killed, as are x32
syscall numbers, so a 32-bit or x32 entry point cannot dodge the numbers
below), then one ``jeq nr / ret EPERM`` pair per denied syscall, then argument
checks for ioctl (TIOCSTI, TIOCLINUX on the low 32 bits, CVE-2019-10063) and
for the chmod family (setuid/setgid bits), then allow.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

# struct seccomp_data offsets (include/uapi/linux/seccomp.h), little endian.
_NR = 0
_ARCH = 4


def _arg_low(index: int) -> int:
    """Offset of the low 32 bits of syscall argument ``index``."""
    return 16 + 8 * index


# Classic BPF opcodes.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000

# x86_64 syscall numbers (arch/x86/entry/syscalls/syscall_64.tbl).
DENIED_SYSCALLS: dict[str, int] = {
    "syslog": 103,
    "ptrace": 101,
    "pivot_root": 155,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "perf_event_open": 298,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
}

_IOCTL = 16
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

# Every way to give a file setuid/setgid bits: syscall -> (mode arg, flags arg or None).
# chmod, fchmod, fchmodat, fchmodat2, creat, mknod, mknodat always carry a mode;
# open/openat only when O_CREAT or O_TMPFILE is set (otherwise "mode" is junk).
_SETID_MODE_ARGS: dict[int, tuple[int, int | None]] = {
    90: (1, None),  # chmod
    91: (1, None),  # fchmod
    268: (2, None),  # fchmodat
    452: (2, None),  # fchmodat2
    85: (1, None),  # creat
    133: (1, None),  # mknod
    259: (2, None),  # mknodat
    2: (2, 1),  # open
    257: (3, 2),  # openat
}
_CREATING_FLAGS = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE
_SETID_BITS = 0o6000
_OPENAT2 = 437  # its mode sits in a struct BPF cannot read: refuse, callers fall back to openat


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _deny(code_errno: int = errno.EPERM) -> bytes:
    return _insn(_RET_K, _RET_ERRNO | code_errno)


def build_filter() -> bytes:
    """Return the raw ``struct sock_filter[]`` bytes bwrap reads from ``--seccomp``."""
    prog = [
        _insn(_LD_W_ABS, _ARCH),
        _insn(_JEQ_K, AUDIT_ARCH_X86_64, jt=1, jf=0),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _NR),
        _insn(_JGE_K, _X32_SYSCALL_BIT, jt=0, jf=1),
        _insn(_RET_K, _RET_KILL_PROCESS),
    ]
    for number in sorted(DENIED_SYSCALLS.values()):
        prog += [_insn(_JEQ_K, number, jt=0, jf=1), _deny()]
    # ioctl: refuse terminal input injection whatever the high 32 bits hold.
    prog += [
        _insn(_JEQ_K, _IOCTL, jt=0, jf=5),
        _insn(_LD_W_ABS, _arg_low(1)),
        _insn(_JEQ_K, TIOCSTI, jt=2, jf=0),
        _insn(_JEQ_K, TIOCLINUX, jt=1, jf=0),
        _insn(_RET_K, _RET_ALLOW),
        _deny(),
    ]
    # No setuid/setgid bits on anything the command creates or chmods: the
    # workspace outlives the sandbox, and a setuid file there is a host
    # privilege escalation (setuid-root when the sandbox maps to host root).
    prog += [_insn(_LD_W_ABS, _NR), _insn(_JEQ_K, _OPENAT2, jt=0, jf=1), _deny(errno.ENOSYS)]
    for number, (mode_arg, flags_arg) in sorted(_SETID_MODE_ARGS.items()):
        prog += _setid_check(number, mode_arg, flags_arg)
    prog.append(_insn(_RET_K, _RET_ALLOW))
    return b"".join(prog)


def _setid_check(number: int, mode_arg: int, flags_arg: int | None) -> list[bytes]:
    """EPERM when syscall ``number`` would set S_ISUID/S_ISGID, else allow."""
    tail = [
        _insn(_LD_W_ABS, _arg_low(mode_arg)),
        _insn(_JSET_K, _SETID_BITS, jt=0, jf=1),
        _deny(),
        _insn(_RET_K, _RET_ALLOW),
    ]
    if flags_arg is not None:
        # Not creating: the mode argument is meaningless, allow (jump to the final allow).
        tail = [
            _insn(_LD_W_ABS, _arg_low(flags_arg)),
            _insn(_JSET_K, _CREATING_FLAGS, jt=0, jf=len(tail) - 1),
            *tail,
        ]
    return [_insn(_LD_W_ABS, _NR), _insn(_JEQ_K, number, jt=0, jf=len(tail)), *tail]


def supported_here() -> bool:
    """The filter encodes x86_64 numbers; anywhere else it would kill everything."""
    return platform.machine() in {"x86_64", "AMD64"}


def open_filter_fd() -> int:
    """A fresh, rewound memfd holding the filter.

    bwrap reads the fd to EOF, so a reused fd would hand it an empty program
    and make it fail closed; every call gets its own.
    """
    fd = os.memfd_create("term2-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, build_filter())
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
