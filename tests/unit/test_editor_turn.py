"""The editor's turn (ADR 0038) with the in-memory locks: which calls reach the editor, and which programs wait.

The end-to-end race is tests/e2e/test_editor_race_e2e.py; here each rule is driven on its own through
the real tools and LockedSandbox: a program holding its root's lock sends the file tools to the disk,
a context without locks never asks the editor, a lock that cannot be taken means the program did not
run, a program waits for a request in flight, and a read the editor never answers is served by the
disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import anyio.abc
import anyio.from_thread
import pytest

from term2.app.tools import through_client
from term2.app.tools.locked_sandbox import LockedSandbox
from term2.domain.editor_exclusion import FolderId
from term2.ports.folder_locks import FolderLockError
from term2.ports.llm import ToolCallRequest
from term2.ports.sandbox import CommandRequest, SandboxFailed
from tests.fakes.client_files import MemoryClientFiles
from tests.fakes.folder_locks import MemoryFolderLocks
from tests.fakes.sandboxes import CannedSandbox
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return new_harness(tmp_path)


def identity(path: Path) -> FolderId:
    info = os.stat(path)
    return FolderId(info.st_dev, info.st_ino)


async def call(h: Harness, files: MemoryClientFiles, name: str, **args: object) -> str:
    h.counter += 1
    ctx = replace(h.ctx(), client_files=files)
    return await h.toolbox.execute(ToolCallRequest(f"call-{h.counter}", name, json.dumps(args)), ctx)


@pytest.mark.parametrize("holder", ["root", "above", "subfolder"])
async def test_a_program_on_a_folder_of_the_way_sends_the_tools_to_the_disk(h: Harness, holder: str) -> None:
    (h.root / "d").mkdir()
    target = h.root / "d" / "f.txt"
    target.write_text("disk\n")
    files = MemoryClientFiles({str(target): "buffer\n"})
    folder = {"root": h.root, "above": h.root.parent, "subfolder": h.root / "d"}[holder]
    async with h.folder_locks.program(identity(folder)):
        read = await call(h, files, "read_file", path="d/f.txt")
        await call(h, files, "write_file", path="d/f.txt", content="written\n")
    assert "disk" in read and files.requests == []
    assert target.read_text() == "written\n"
    assert "buffer" in await call(h, files, "read_file", path="d/f.txt"), "the program's end gives the editor back"


async def test_a_program_on_another_folder_leaves_the_editor_in_use(h: Harness) -> None:
    (h.root / "d").mkdir()
    (h.root / "e").mkdir()
    target = h.root / "d" / "f.txt"
    target.write_text("disk\n")
    files = MemoryClientFiles({str(target): "buffer\n"})
    async with h.folder_locks.program(identity(h.root / "e")):
        assert "buffer" in await call(h, files, "read_file", path="d/f.txt")


async def test_without_folder_locks_the_editor_is_never_asked(h: Harness) -> None:
    target = h.root / "f.txt"
    target.write_text("disk\n")
    files = MemoryClientFiles({str(target): "buffer\n"})
    h.counter += 1
    ctx = replace(h.ctx(), client_files=files, folder_locks=None)
    read = await h.toolbox.execute(ToolCallRequest("call-x", "read_file", json.dumps({"path": "f.txt"})), ctx)
    assert "disk" in read and files.requests == []


@dataclass
class BrokenLocks(MemoryFolderLocks):
    @asynccontextmanager
    async def program(self, root: FolderId) -> AsyncIterator[None]:
        raise FolderLockError("no lock today")
        yield  # pragma: no cover


async def test_a_program_whose_lock_cannot_be_taken_does_not_run(tmp_path: Path) -> None:
    inner = CannedSandbox()
    sandbox = LockedSandbox(inner, BrokenLocks())
    with pytest.raises(SandboxFailed, match="no lock today"):
        await sandbox.run(CommandRequest("true", str(tmp_path), str(tmp_path)))
    assert inner.commands == []


async def test_a_read_the_editor_never_answers_is_served_by_the_disk(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = h.root / "f.txt"
    target.write_text("disk\n")

    class Silent(MemoryClientFiles):
        async def read_text(
            self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None
        ) -> str:
            await anyio.sleep_forever()
            raise AssertionError  # pragma: no cover

    monkeypatch.setattr(through_client, "READ_WAIT_S", 0)
    assert "disk" in await call(h, Silent({str(target): "buffer\n"}), "read_file", path="f.txt")


# --- an edit reads and writes on one side ---------------------------------------------------------------


async def test_an_edit_worked_out_from_the_buffer_is_not_written_to_the_disk_when_a_program_arrives(
    h: Harness,
) -> None:
    target = h.root / "f.txt"
    target.write_text("x = 1\n")
    ran: list[str] = []

    async def program() -> None:
        async with h.folder_locks.program(identity(h.root)):
            ran.append(target.read_text())

    async with anyio.create_task_group() as tg:

        class Arriving(MemoryClientFiles):
            async def read_text(
                self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None
            ) -> str:
                text = await super().read_text(session_id, path, line=line, limit=limit)
                tg.start_soon(program)  # a command starts while the edit is worked out from the buffer
                await anyio.wait_all_tasks_blocked()
                return text

        files = Arriving({str(target): "x = 1\ny = 2\n"})
        result = await call(h, files, "edit_file", path="f.txt", old_string="y = 2", new_string="y = 3")
        assert ran == [], "the program waits for the edit"
    assert "y = 3" in result
    assert files.buffers[str(target)] == "x = 1\ny = 3\n", "the edit's own write went through the editor"
    assert target.read_text() == "x = 1\n", "the buffer's text never reached the disk"
    assert ran == ["x = 1\n"], "the program waited for the edit, then ran"


async def test_an_edit_that_read_the_disk_writes_the_disk_even_if_the_program_ended_meanwhile(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from term2.app.tools import edit_texts

    target = h.root / "f.txt"
    target.write_text("x = 1\n")
    files = MemoryClientFiles({str(target): "x = 1\nunsaved = 0\n"})
    ended = anyio.Event()
    read_from_disk = edit_texts.disk_old

    def read_then_end_the_program(path: str, root: str) -> object:
        old = read_from_disk(path, root)
        anyio.from_thread.run_sync(ended.set)
        return old

    monkeypatch.setattr(edit_texts, "disk_old", read_then_end_the_program)

    async def program(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with h.folder_locks.program(identity(h.root)):
            task_status.started()
            await ended.wait()

    async with anyio.create_task_group() as tg:
        await tg.start(program)
        result = await call(h, files, "edit_file", path="f.txt", old_string="x = 1", new_string="x = 2")
    assert "x = 2" in result
    assert target.read_text() == "x = 2\n"
    assert files.requests == [], "the buffer (with its unsaved line) was neither read nor overwritten"


async def test_a_patch_worked_out_from_the_buffer_is_not_written_to_the_disk_when_a_program_arrives(
    h: Harness,
) -> None:
    from term2.app.edit_tools import edit_tool_names
    from term2.app.tools.toolbox import WorkspaceToolbox, default_tools

    h.toolbox = WorkspaceToolbox(default_tools(edit_tool_names(None, "both")))
    target = h.root / "f.txt"
    target.write_text("x = 1\n")
    ran: list[str] = []

    async def program() -> None:
        async with h.folder_locks.program(identity(h.root)):
            ran.append(target.read_text())

    async with anyio.create_task_group() as tg:

        class Arriving(MemoryClientFiles):
            async def read_text(
                self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None
            ) -> str:
                text = await super().read_text(session_id, path, line=line, limit=limit)
                tg.start_soon(program)
                await anyio.wait_all_tasks_blocked()
                return text

        files = Arriving({str(target): "x = 1\ny = 2\n"})
        patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n-y = 2\n+y = 3\n*** End Patch\n"
        result = await call(h, files, "apply_patch", input=patch)
        assert ran == []
    assert "failed" not in result
    assert files.buffers[str(target)] == "x = 1\ny = 3\n" and target.read_text() == "x = 1\n"
    assert ran == ["x = 1\n"]


@pytest.mark.parametrize("second_file", ["b.txt", "new/b.txt"])
async def test_a_program_arriving_between_a_patchs_files_neither_fails_it_nor_leaves_it_half_made(
    h: Harness, second_file: str
) -> None:
    # The patch holds its editor turns across every file (one_source), so a program arriving after the first
    # file went to the editor waits for the whole patch. The second file's own turn used to see that waiting
    # program and fail; the first file, then "undone" on the disk, kept its change in the editor's buffer.
    # A file in a folder the patch makes ("new/") has a way longer than the one held: only the rest is locked.
    from term2.app.edit_tools import edit_tool_names
    from term2.app.tools.toolbox import WorkspaceToolbox, default_tools

    h.toolbox = WorkspaceToolbox(default_tools(edit_tool_names(None, "both")))
    first, second = h.root / "a.txt", h.root / second_file
    first.write_text("a = 1\n")
    ran: list[str] = []

    async def program() -> None:
        async with h.folder_locks.program(identity(h.root)):
            ran.append("ran")

    async with anyio.create_task_group() as tg:

        class Arriving(MemoryClientFiles):
            async def write_text(self, session_id: str, path: str, content: str) -> None:
                await super().write_text(session_id, path, content)
                if path == str(first):
                    tg.start_soon(program)  # a command starts once the first file is in the editor
                    await anyio.wait_all_tasks_blocked()

        files = Arriving({str(first): "a = 1\n"})
        if second_file == "b.txt":
            second.write_text("b = 1\n")
            files.buffers[str(second)] = "b = 1\n"
            change = "*** Update File: b.txt\n@@\n-b = 1\n+b = 2\n"
        else:
            change = f"*** Add File: {second_file}\n+b = 2\n"
        patch = f"*** Begin Patch\n*** Update File: a.txt\n@@\n-a = 1\n+a = 2\n{change}*** End Patch\n"
        result = await call(h, files, "apply_patch", input=patch)
        assert ran == [], "the program waits for the whole patch"
    assert "failed" not in result, result
    assert files.buffers[str(first)] == "a = 2\n" and files.buffers[str(second)] == "b = 2\n"
    assert ran == ["ran"]


@pytest.mark.parametrize("first_file", ["existing", "added"])
async def test_a_patch_that_fails_part_way_undoes_the_editors_changes_in_the_editor(
    h: Harness, first_file: str
) -> None:
    # The first file went to the editor's buffer; the second write's answer never came. The undo must put the
    # buffer back through the editor (the disk never held the change: writing it there undid nothing while the
    # model was told "undone"), and a file the editor created, which ACP cannot remove, is reported, not claimed.
    from term2.app.edit_tools import edit_tool_names
    from term2.app.tools.toolbox import WorkspaceToolbox, default_tools
    from term2.ports.client_files import ClientFileError

    h.toolbox = WorkspaceToolbox(default_tools(edit_tool_names(None, "both")))
    first, second = h.root / "a.txt", h.root / "b.txt"
    second.write_text("b = 1\n")

    class Silent(MemoryClientFiles):
        async def write_text(self, session_id: str, path: str, content: str) -> None:
            if path == str(second):
                raise ClientFileError("the client went away", answered=False)
            await super().write_text(session_id, path, content)

    files = Silent({str(second): "b = 1\n"})
    if first_file == "existing":
        first.write_text("a = 1\n")
        files.buffers[str(first)] = "a = 1 # unsaved\n"
        change = "*** Update File: a.txt\n@@\n-a = 1 # unsaved\n+a = 2\n"
    else:
        change = "*** Add File: a.txt\n+a = 2\n"
    patch = f"*** Begin Patch\n{change}*** Update File: b.txt\n@@\n-b = 1\n+b = 2\n*** End Patch\n"
    result = await call(h, files, "apply_patch", input=patch)
    assert "failed" in result and second.read_text() == "b = 1\n"
    if first_file == "existing":
        assert "were undone" in result, result
        assert files.buffers[str(first)] == "a = 1 # unsaved\n", "the buffer got its own text back"
        assert first.read_text() == "a = 1\n", "the disk was never the change's side"
    else:
        assert "check them" in result, result
        assert not first.exists()
