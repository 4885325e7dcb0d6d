"""read_file, edit_file and write_file through an editor's buffers (ADR 0024), with the in-memory client.

The editor's text replaces the disk's only after the gate allowed the call, the model's result keeps
the shape a disk read or edit gives, every cap and refusal of the disk still holds, a refusal falls
back to the disk, and a path swapped for a symlink while the editor acted is reported, never trusted.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from term2.app.tools.bridge import nested_context
from term2.app.tools.edit_texts import EDIT_LIMIT
from term2.domain.approval import Choice
from term2.ports.approval import ApprovalDecision
from term2.ports.llm import ToolCallRequest
from tests.fakes.client_files import MemoryClientFiles
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return new_harness(tmp_path)


async def call(h: Harness, files: MemoryClientFiles | None, name: str, **args: object) -> str:
    h.counter += 1
    ctx = replace(h.ctx(), client_files=files)
    return await h.toolbox.execute(ToolCallRequest(f"call-{h.counter}", name, json.dumps(args)), ctx)


CONTENTS = [
    "",
    "one line without a break",
    "a\nb\nc\n",
    "windows\r\nlines\r\n",
    "\n\n\nempty lines\n",
    "x" * 50_000 + "\nafter a huge line\n",
    "".join(f"line {n}\n" for n in range(6_000)),  # past the cap
    "".join("\n" for _ in range(6_000)),  # past the cap, in empty lines only
]


@pytest.mark.parametrize("content", CONTENTS, ids=range(len(CONTENTS)))
@pytest.mark.parametrize("window", [{}, {"offset": 2}, {"offset": 2, "limit": 2}, {"limit": 5_000}])
async def test_a_read_through_the_editor_looks_exactly_like_a_read_of_the_disk(
    h: Harness, content: str, window: dict[str, int]
) -> None:
    target = h.root / "same.txt"
    target.write_bytes(content.encode())
    from_disk = await call(h, None, "read_file", path="same.txt", **window)
    files = MemoryClientFiles({str(target): content})
    from_editor = await call(h, files, "read_file", path="same.txt", **window)
    if "past the end" in from_disk:
        assert "past the end" in from_editor
    else:
        assert from_editor == from_disk
    assert set(files.asked("fs/read_text_file")) == {str(target)}


async def test_the_model_reads_the_buffer_not_the_disk(h: Harness) -> None:
    (h.root / "a.py").write_text("disk\n")
    files = MemoryClientFiles({str(h.root / "a.py"): "unsaved\n"})
    assert await call(h, files, "read_file", path="a.py") == "     1\tunsaved\n"


async def test_a_binary_file_on_disk_is_refused_without_asking_the_editor(h: Harness) -> None:
    (h.root / "img.png").write_bytes(b"\x89PNG\x00\x00binary")
    files = MemoryClientFiles({str(h.root / "img.png"): "text?"})
    text = await call(h, files, "read_file", path="img.png")
    assert "binary" in text and files.requests == []


async def test_a_binary_buffer_is_refused_too(h: Harness) -> None:
    (h.root / "b.txt").write_text("fine\n")
    files = MemoryClientFiles({str(h.root / "b.txt"): "nul\x00inside"})
    assert "looks like a binary file" in await call(h, files, "read_file", path="b.txt")
    assert "binary" in await call(h, files, "edit_file", path="b.txt", old_string="nul", new_string="x")
    assert files.asked("fs/write_text_file") == []


async def test_an_edit_goes_to_the_editor_with_the_same_report_as_on_disk(h: Harness) -> None:
    (h.root / "disk.py").write_text("a = 1\nb = 2\n")
    on_disk = await call(h, None, "edit_file", path="disk.py", old_string="b = 2", new_string="b = 3")
    (h.root / "buf.py").write_text("stale\n")
    files = MemoryClientFiles({str(h.root / "buf.py"): "a = 1\nb = 2\n"})
    in_editor = await call(h, files, "edit_file", path="buf.py", old_string="b = 2", new_string="b = 3")
    assert in_editor == on_disk.replace("disk.py", "buf.py")
    assert files.buffers[str(h.root / "buf.py")] == "a = 1\nb = 3\n"
    assert (h.root / "buf.py").read_text() == "stale\n"


async def test_write_file_reports_against_the_buffer(h: Harness) -> None:
    (h.root / "w.txt").write_text("disk\n")
    files = MemoryClientFiles({str(h.root / "w.txt"): "buffer\n"})
    text = await call(h, files, "write_file", path="w.txt", content="new\n")
    assert "-buffer\n+new" in text and (h.root / "w.txt").read_text() == "disk\n"


async def test_refusals_fall_back_to_the_disk(h: Harness) -> None:
    target = h.root / "r.txt"
    target.write_text("on disk\n")
    files = MemoryClientFiles({str(target): "buffer\n"}, refuse={str(target)})
    assert await call(h, files, "read_file", path="r.txt") == "     1\ton disk\n"
    text = await call(h, files, "edit_file", path="r.txt", old_string="on disk", new_string="edited")
    assert text.startswith("Edited") and target.read_text() == "edited\n"
    assert files.asked("fs/write_text_file") == [str(target)]


async def test_a_client_without_the_capabilities_is_never_asked(h: Harness) -> None:
    (h.root / "n.txt").write_text("disk\n")
    files = MemoryClientFiles({str(h.root / "n.txt"): "buffer\n"}, reads=False, writes=False)
    assert await call(h, files, "read_file", path="n.txt") == "     1\tdisk\n"
    await call(h, files, "write_file", path="n.txt", content="x\n")
    assert files.requests == [] and (h.root / "n.txt").read_text() == "x\n"


async def test_a_client_gone_during_a_write_fails_the_call_and_leaves_the_disk(h: Harness) -> None:
    (h.root / "g.txt").write_text("disk\n")
    files = MemoryClientFiles({str(h.root / "g.txt"): "disk\n"}, reads=False)
    files.gone = True
    text = await call(h, files, "write_file", path="g.txt", content="new\n")
    assert "whether it changed is unknown" in text
    assert (h.root / "g.txt").read_text() == "disk\n"


async def test_a_secret_reaches_the_editor_only_once_the_user_allows_it(h: Harness) -> None:
    env = h.root / ".env"
    env.write_text("KEY=disk\n")
    files = MemoryClientFiles({str(env): "KEY=buffer-secret\n"})
    h.approver.answer = ApprovalDecision(None, "rejected")
    await call(h, files, "read_file", path=".env")
    await call(h, files, "edit_file", path=".env", old_string="KEY=guess", new_string="KEY=x")
    await call(h, files, "write_file", path=".env", content="KEY=x\n")
    assert files.requests == [] and len(h.approver.requests) == 3
    h.approver.answer = ApprovalDecision(Choice.ALLOW_ONCE)
    assert "buffer-secret" in await call(h, files, "read_file", path=".env")


async def test_an_edit_where_the_model_may_not_read_shows_nothing_of_the_buffer(h: Harness) -> None:
    target = h.outside / "credentials"
    target.write_text("disk\n")
    files = MemoryClientFiles({str(target): "token = buffer-secret\n"})
    h.approver.answer = ApprovalDecision(Choice.ALLOW_EDIT_FOLDER_SESSION)
    written = await call(h, files, "write_file", path=str(target), content="gone\n")
    assert written.startswith(f"Wrote {target};") and "buffer-secret" not in written
    assert files.asked("fs/write_text_file") == [str(target)] and target.read_text() == "disk\n"
    h.approver.answer = ApprovalDecision(Choice.REJECT)  # the folder's edit grant covers it: not asked
    missed = await call(h, files, "edit_file", path=str(target), old_string="token = guess", new_string="x")
    assert "buffer-secret" not in missed and "did not apply" in missed


async def test_the_size_cap_holds_for_the_buffer(h: Harness) -> None:
    (h.root / "big.txt").write_text("small\n")
    files = MemoryClientFiles({str(h.root / "big.txt"): "y" * (EDIT_LIMIT + 1)})
    text = await call(h, files, "edit_file", path="big.txt", old_string="y", new_string="z")
    assert "too large to edit" in text and files.asked("fs/write_text_file") == []


@dataclass
class SwappingClient(MemoryClientFiles):
    """An editor during whose act the judged folder is swapped for a symlink leading outside."""

    swap: tuple[Path, Path] | None = None  # (folder, where its symlink leads)

    async def read_text(self, session_id: str, path: str, *, line: int | None = None, limit: int | None = None) -> str:
        text = await super().read_text(session_id, path, line=line, limit=limit)
        self._swap()
        return text

    async def write_text(self, session_id: str, path: str, content: str) -> None:
        await super().write_text(session_id, path, content)
        self._swap()

    def _swap(self) -> None:
        assert self.swap is not None
        folder, elsewhere = self.swap
        os.rename(folder, folder.with_name("moved"))
        os.symlink(elsewhere, folder)


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
async def test_a_swap_while_the_editor_acts_is_reported_not_trusted(h: Harness, tool: str) -> None:
    (h.root / "sub").mkdir()
    target = h.root / "sub" / "f.txt"
    target.write_text("judged\n")
    (h.outside / "f.txt").write_text("elsewhere\n")
    files = SwappingClient({str(target): "judged buffer\n"}, reads=tool == "read_file")
    files.swap = (h.root / "sub", h.outside)
    if tool == "read_file":
        text = await call(h, files, "read_file", path="sub/f.txt")
        assert "changed while" in text and "judged buffer" not in text
    else:
        text = await call(h, files, "write_file", path="sub/f.txt", content="new\n")
        assert "path changed meanwhile" in text
    assert h.last().status.value == "failed"


def test_run_code_nested_calls_do_not_use_the_editor(h: Harness) -> None:
    ctx = replace(h.ctx(), client_files=MemoryClientFiles())
    assert nested_context(ctx, "call-1", {}).client_files is None
