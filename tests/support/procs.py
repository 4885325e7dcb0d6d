"""Find processes by what /proc says about them: the tests' way to prove nothing survived."""

from __future__ import annotations

import os


def _read(pid: str, part: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{part}", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def processes_with(marker: str, *, environ: bool = False) -> list[int]:
    """Live processes (other than this one) whose command line, or environment, holds `marker`."""
    needle = marker.encode()
    parts = ("cmdline", "environ") if environ else ("cmdline",)
    return [
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit() and int(pid) != os.getpid() and any(needle in _read(pid, part) for part in parts)
    ]


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` that are still in the process table."""
    found = []
    for entry in os.listdir("/proc"):
        stat = _read(entry, "stat") if entry.isdigit() else b""
        if stat and int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found
