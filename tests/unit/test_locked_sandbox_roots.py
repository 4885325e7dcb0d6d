"""LockedSandbox holds the program lock of every root a program can write (ADR 0038, 0050).

A command can write the session's additional roots as it writes its root, so an
editor request on a path under an extra root must be held off while it runs, and
the program must wait for one in flight there, exactly as for the root.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from term2.app.tools.locked_sandbox import LockedSandbox
from term2.domain.editor_exclusion import FolderId
from term2.ports.sandbox import CommandRequest, SandboxFailed
from tests.fakes.folder_locks import MemoryFolderLocks
from tests.fakes.sandboxes import CannedSandbox

pytestmark = pytest.mark.anyio


def identity(path: Path) -> FolderId:
    info = os.stat(path)
    return FolderId(info.st_dev, info.st_ino)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    paths = (tmp_path / "ws", tmp_path / "more", tmp_path / "third")
    for path in paths:
        (path / "d").mkdir(parents=True)
    return paths


def request(roots: tuple[Path, ...]) -> CommandRequest:
    return CommandRequest("true", str(roots[0]), str(roots[0]), extra_roots=tuple(str(r) for r in roots[1:]))


async def test_an_editor_request_under_an_extra_root_is_held_off_while_a_program_runs(
    roots: tuple[Path, Path, Path],
) -> None:
    locks = MemoryFolderLocks()
    inner = CannedSandbox(hang=True)
    sandbox = LockedSandbox(inner, locks)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sandbox.run, request(roots))
        await anyio.wait_all_tasks_blocked()
        assert len(inner.commands) == 1  # the program runs
        for root in roots:  # a request on root/d/f: its way holds the root
            async with locks.editor([identity(root.parent), identity(root), identity(root / "d")]) as held:
                assert not held, root
        async with locks.editor([identity(roots[0].parent)]) as held:
            assert held  # the folder above the roots is no root of the program's
        tg.cancel_scope.cancel()
    assert sorted(locks.programs_seen) == sorted(identity(r) for r in roots)


@pytest.mark.parametrize("held_root", [0, 2], ids=["the-root", "an-extra-root"])
async def test_a_program_waits_for_an_editor_request_in_flight_under_any_of_its_roots(
    roots: tuple[Path, Path, Path], held_root: int
) -> None:
    locks = MemoryFolderLocks()
    inner = CannedSandbox()
    sandbox = LockedSandbox(inner, locks)
    ran_during: list[bool] = []
    in_flight = True

    async def program() -> None:
        await sandbox.run(request(roots))
        ran_during.append(in_flight)

    async with anyio.create_task_group() as tg, locks.editor([identity(roots[held_root])]) as held:
        assert held
        tg.start_soon(program)
        await anyio.wait_all_tasks_blocked()
        assert inner.commands == []  # waiting for the request under that root
        in_flight = False
    assert ran_during == [False] and len(inner.commands) == 1


async def test_an_extra_root_that_cannot_be_opened_means_no_run(roots: tuple[Path, Path, Path]) -> None:
    inner = CannedSandbox()
    locks = MemoryFolderLocks()
    sandbox = LockedSandbox(inner, locks)
    with pytest.raises(SandboxFailed, match="cannot be opened"):
        await sandbox.run(request((roots[0], roots[1] / "gone")))
    assert inner.commands == [] and not locks.programs[identity(roots[0])]
