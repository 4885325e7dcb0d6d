"""Host checks that come before the probe run: is the sandbox's toolchain trustworthy?

bwrap, prlimit and setpriv run with the agent's privileges before any
confinement exists, so a binary an unprivileged user could replace would be a
privilege escalation, and a ``bwrap`` found on PATH could be anything (a cwd
entry, a planted script). Hence absolute paths, root ownership, no group or
world write bit, and a minimum version (``--disable-userns`` arrived in 0.8.0).
"""

from __future__ import annotations

import os
import re
import stat
import sys

import anyio

from term2.adapters.sandbox import seccomp
from term2.adapters.sandbox.environment import sandbox_environment
from term2.adapters.sandbox.invocation import PRLIMIT, SETPRIV, SHELL

MIN_BWRAP_VERSION = (0, 8, 0)


def trusted_binary_problem(path: str) -> str | None:
    """Why ``path`` must not be executed with the agent's privileges, or None."""
    if not os.path.isabs(path):
        return f"{path} is not an absolute path"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path} is not installed"
    except OSError as exc:
        return f"{path} cannot be inspected: {exc}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid != 0:
        return f"{path} is owned by uid {st.st_uid}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if not os.access(path, os.X_OK):
        return f"{path} is not executable"
    return None


def parse_version(text: str) -> tuple[int, ...] | None:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


def _pidfds_work() -> bool:
    """Killing a sandbox's init by pidfd is what makes the kill immune to pid reuse."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


async def check_host(bwrap: str) -> str | None:
    """The first reason commands cannot be sandboxed here, or None."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap sandboxing needs Linux, not {sys.platform}"
    if not seccomp.supported_here():
        return "the seccomp filter is built for x86_64 only"
    if not _pidfds_work():
        return "this kernel has no pidfd_open (Linux 5.3+ is needed to kill sandboxes reliably)"
    binaries = [bwrap, PRLIMIT, SHELL] + ([SETPRIV] if os.geteuid() == 0 else [])
    for binary in binaries:
        problem = trusted_binary_problem(binary)
        if problem is not None:
            return problem
    try:
        done = await anyio.run_process([bwrap, "--version"], check=False, env=sandbox_environment("/"), stdin=None)
    except OSError as exc:
        return f"{bwrap} --version failed: {exc}"
    text = (done.stdout + done.stderr).decode(errors="replace").strip()
    version = parse_version(text)
    if version is None:
        return f"cannot read the bubblewrap version from {text!r}"
    if version < MIN_BWRAP_VERSION:
        wanted = ".".join(map(str, MIN_BWRAP_VERSION))
        return f"bubblewrap {'.'.join(map(str, version))} is too old; {wanted} or newer is required"
    return None
