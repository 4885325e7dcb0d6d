"""Fixtures for the threat suite: a real BubblewrapSandbox in two host modes.

* ``root-owned``: term2 runs as root and the workspace belongs to root, so the
  sandbox's uid maps to host uid 0 (only possible when the tests run as root).
* ``user-owned``: the workspace belongs to an unprivileged uid (65534 when the
  tests run as root, so the adapter drops to it; otherwise the test user).

Every host-side target an attack aims at (the "outside" directory, fake
secrets) belongs to the same uid as the workspace, so plain file permissions
would NOT stop the attack: only the sandbox does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from term2.adapters.sandbox import BubblewrapSandbox, Limits
from term2.ports.sandbox import CommandRequest, CommandResult

UNPRIVILEGED = 65534
IS_ROOT = os.geteuid() == 0
# Under /var/cache (read-only but NOT hidden inside the sandbox) when we can,
# so "outside" writes hit a real host directory rather than the private /tmp.
SCRATCH_PARENT = "/var/cache" if IS_ROOT and os.path.isdir("/var/cache") else None


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


@dataclass
class Box:
    """One workspace, a sibling "outside" dir, and the sandbox to attack them with."""

    mode: str
    sandbox: BubblewrapSandbox
    base: Path
    root: Path
    outside: Path
    owner: tuple[int, int]
    tag: str
    nproc_limit: int
    limits: Limits

    def own(self, *paths: Path) -> None:
        for path in paths:
            os.lchown(path, *self.owner)

    def make_dir(self, path: Path, mode: int = 0o755) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(mode)
        self.own(path)
        return path

    def write(self, path: Path, content: str, mode: int = 0o644) -> Path:
        path.write_text(content)
        self.own(path)
        path.chmod(mode)  # after chown, which clears setuid/setgid bits
        return path

    async def run(
        self,
        command: str,
        *,
        timeout_s: float = 8.0,
        output_limit: int = 256 * 1024,
        cwd: Path | None = None,
        sandbox: BubblewrapSandbox | None = None,
    ) -> CommandResult:
        request = CommandRequest(
            command=command,
            root=str(self.root),
            cwd=str(cwd or self.root),
            timeout_s=timeout_s,
            output_limit=output_limit,
        )
        return await (sandbox or self.sandbox).run(request)


def _modes() -> list[object]:
    root_mode = pytest.param(
        "root-owned",
        marks=pytest.mark.skipif(not IS_ROOT, reason="a root-owned workspace needs the tests to run as root"),
    )
    return [root_mode, "user-owned"]


@pytest.fixture(params=_modes())
def box(request: pytest.FixtureRequest) -> Iterator[Box]:
    mode: str = request.param
    if mode == "root-owned":
        owner = (0, 0)
    elif IS_ROOT:
        owner = (UNPRIVILEGED, UNPRIVILEGED)
    else:
        owner = (os.geteuid(), os.getegid())
    base = Path(tempfile.mkdtemp(prefix="term2-threats-", dir=SCRATCH_PARENT)).resolve()
    base.chmod(0o755)  # the dropped-to uid must be able to reach the workspace
    nproc = 64 + _processes_of(owner[0])
    limits = Limits(
        address_space=1 << 30,
        file_size=16 << 20,
        open_files=256,
        processes=nproc,
        cpu_seconds=30,
        tmpfs_size=16 << 20,
    )
    b = Box(
        mode=mode,
        sandbox=BubblewrapSandbox(limits=limits),
        base=base,
        root=base / "ws",
        outside=base / "outside",
        owner=owner,
        tag=uuid.uuid4().hex[:12],
        nproc_limit=nproc,
        limits=limits,
    )
    b.make_dir(b.root)
    b.make_dir(b.outside, 0o777)
    try:
        yield b
    finally:
        shutil.rmtree(base, ignore_errors=True)
