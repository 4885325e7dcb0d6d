"""One folder locks suite, two adapters (ADR 0038).

(a) `flock`: FlockFolderLocks on lock files in a private folder (the real adapter every term2 process
    of the user shares).
(b) `memory`: MemoryFolderLocks (tests/fakes), the double the tool tests use.

Both must keep what the file tools rely on: an editor request is held only while no program runs on
a folder on its way; a program on any other folder leaves it alone; a program that starts waits for
the editor requests in flight on its root, and editors arriving meanwhile are turned away. Nothing
here depends on timing: a program that entered too early is caught by what it saw when it entered.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from anyio.abc import TaskStatus

from term2.adapters.locks.flock_folders import FlockFolderLocks
from term2.domain.editor_exclusion import FolderId
from term2.ports.folder_locks import FolderLockError, FolderLocks
from tests.fakes.folder_locks import MemoryFolderLocks

pytestmark = pytest.mark.anyio

ROOT, HOME, WS, D, ELSEWHERE = (FolderId(1, n) for n in (2, 3, 4, 5, 6))
WAY = (ROOT, HOME, WS, D)  # /, /home, /home/ws, /home/ws/d: the way to /home/ws/d/f


@pytest.fixture(params=["flock", "memory"])
def locks(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FolderLocks]:
    if request.param == "flock":
        yield FlockFolderLocks(tmp_path / "locks")
    else:
        yield MemoryFolderLocks()


async def test_an_editor_request_is_held_when_no_program_runs(locks: FolderLocks) -> None:
    async with locks.editor(WAY) as held:
        assert held
    async with locks.editor(WAY) as again, locks.editor(WAY) as beside:  # editors share
        assert again and beside


@pytest.mark.parametrize("root", WAY)
async def test_a_program_on_any_folder_of_the_way_turns_the_editor_away(locks: FolderLocks, root: FolderId) -> None:
    async with locks.program(root), locks.editor(WAY) as held:
        assert not held
    async with locks.editor(WAY) as held:
        assert held, "the program's end gives the folder back"


async def test_a_program_elsewhere_or_deeper_leaves_the_editor_alone(locks: FolderLocks) -> None:
    async with locks.program(ELSEWHERE), locks.program(FolderId(1, 99)), locks.editor(WAY) as held:
        assert held


async def test_programs_share_a_root(locks: FolderLocks) -> None:
    # run_code's nested run_shell, or two sessions' commands
    async with locks.program(WS), locks.program(WS), locks.editor(WAY) as held:
        assert not held


async def test_a_program_waits_for_the_editor_request_in_flight(locks: FolderLocks) -> None:
    in_flight = True
    seen: list[bool] = []

    async def program(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async with locks.program(WS):
            seen.append(in_flight)

    async with anyio.create_task_group() as tg, locks.editor(WAY) as held:
        assert held
        await tg.start(program)
        await anyio.wait_all_tasks_blocked()
        async with locks.editor(WAY) as later:
            assert not later, "an editor arriving while a program waits to start is turned away"
        in_flight = False
    assert seen == [False], "the program entered while the editor request was in flight"


async def test_an_unusable_lock_folder_keeps_the_editor_off_and_programs_from_starting(tmp_path: Path) -> None:
    folder = tmp_path / "open-to-all"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    locks = FlockFolderLocks(folder)
    async with locks.editor(WAY) as held:
        assert not held
    with pytest.raises(FolderLockError, match="unusable"):
        async with locks.program(WS):
            pytest.fail("a program ran without its lock")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "private", target_is_directory=True)
    (tmp_path / "private").mkdir(mode=0o700)
    async with FlockFolderLocks(link).editor(WAY) as held:
        assert not held, "a lock folder reached through a symlink is not trusted"


async def test_a_lock_folder_removed_meanwhile_is_made_again(tmp_path: Path) -> None:
    locks = FlockFolderLocks(tmp_path / "locks")
    async with locks.editor(WAY) as held:
        assert held
    shutil.rmtree(tmp_path / "locks")  # e.g. a cleaner of old files in the runtime folder
    async with locks.program(WS), locks.editor(WAY) as held:
        assert not held, "the program's lock was taken in the folder made again"
    assert (tmp_path / "locks").stat().st_mode & 0o777 == 0o700


async def test_a_lock_folder_unusable_once_is_used_again_once_fixed(tmp_path: Path) -> None:
    # A process that found it unusable must not go on running programs unlocked: another process, finding
    # it usable, would ask the editor beside them (issue 30 review). Each use looks again instead.
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    locks = FlockFolderLocks(folder)
    with pytest.raises(FolderLockError):
        async with locks.program(WS):
            pass
    folder.chmod(0o700)
    async with locks.program(WS), FlockFolderLocks(folder).editor(WAY) as held:
        assert not held, "the program holds its lock, seen by another process's locks"
    async with locks.editor(WAY) as held:
        assert held


# --- two term2 processes of one user share the flock adapter's locks ---------------------------------

CHILD = """
import sys, anyio
from pathlib import Path
from term2.adapters.locks.flock_folders import FlockFolderLocks
from term2.domain.editor_exclusion import FolderId

async def main():
    locks = FlockFolderLocks(Path(sys.argv[1]))
    print("trying", flush=True)
    async with locks.program(FolderId(1, 4)):
        print("running " + Path(sys.argv[2]).read_text(), flush=True)
        sys.stdin.readline()
    print("done", flush=True)

anyio.run(main)
"""


class Child:
    """Another process's program on WS, driven line by line."""

    def __init__(self, folder: Path, marker: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(folder), str(marker)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def finish(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        done = self.line()
        assert self.proc.wait(timeout=60) == 0
        return done


async def test_a_program_in_another_process_turns_the_editor_away(tmp_path: Path) -> None:
    locks = FlockFolderLocks(tmp_path / "locks")
    marker = tmp_path / "marker"
    marker.write_text("free")
    child = Child(tmp_path / "locks", marker)
    assert await anyio.to_thread.run_sync(child.line) == "trying"
    assert await anyio.to_thread.run_sync(child.line) == "running free"
    async with locks.editor(WAY) as held:
        assert not held
    assert await anyio.to_thread.run_sync(child.finish) == "done"
    async with locks.editor(WAY) as held:
        assert held


async def test_a_program_in_another_process_waits_for_this_ones_editor_request(tmp_path: Path) -> None:
    locks = FlockFolderLocks(tmp_path / "locks")
    marker = tmp_path / "marker"
    marker.write_text("editor in flight")
    async with locks.editor(WAY) as held:
        assert held
        child = Child(tmp_path / "locks", marker)
        assert await anyio.to_thread.run_sync(child.line) == "trying"
        while True:  # until the child's program has checked in (it then waits for this request)
            async with locks.editor(WAY) as beside:
                if not beside:
                    break
            await anyio.sleep(0.01)
        marker.write_text("editor done")
    assert await anyio.to_thread.run_sync(child.line) == "running editor done"
    assert await anyio.to_thread.run_sync(child.finish) == "done"


async def test_the_lock_folder_does_not_grow_with_the_folders_used(tmp_path: Path) -> None:
    # Lock files per folder identity were never removed: one set for every folder on the way of every path
    # the editor was ever asked about, kept across reboots where the folder is in the home (issue 30 review).
    folder = tmp_path / "locks"
    locks = FlockFolderLocks(folder)
    for n in range(40):
        way = (ROOT, HOME, WS, FolderId(7, n))
        async with locks.editor(way) as held:
            assert held
        async with locks.program(FolderId(8, n)):
            pass
    assert len(list(folder.iterdir())) == 1, sorted(p.name for p in folder.iterdir())[:6]


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")
@pytest.mark.parametrize("mode", [0o777, 0o755])
async def test_a_lock_folder_inside_a_folder_another_user_controls_is_refused(tmp_path: Path, mode: int) -> None:
    # e.g. XDG_RUNTIME_DIR=/tmp/runtime-me made first by someone else: they can move term2-locks away while a
    # program holds its lock there, and the next lock is taken in a fresh folder that knows of no program.
    theirs = tmp_path / "runtime-me"
    theirs.mkdir()
    os.chown(theirs, 54321, 54321)
    theirs.chmod(mode)
    locks = FlockFolderLocks(theirs / "term2-locks")
    with pytest.raises(FolderLockError, match="another user"):
        async with locks.program(WS):
            (theirs / "term2-locks").rename(theirs / "moved")  # what its owner may do at any time
            async with locks.editor(WAY) as held:
                assert not held, "the editor was let in beside a running program"
    async with locks.editor(WAY) as held:
        assert not held
