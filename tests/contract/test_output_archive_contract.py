"""The OutputArchive port, run against the file adapter and the in-memory one.

Plus the use of it: a result longer than the transcript's bound reaches the
model as head and tail with the id `read_output` takes, and reading it back
through the real tool returns the whole text.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from term2.adapters.store.output_files import MemoryOutputs, OutputFiles
from term2.app.results import RESULT_LIMIT, bounded_result
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.domain.history import HistoryEntry
from term2.domain.workspace import SessionAccess
from term2.ports.llm import ToolCallRequest
from term2.ports.outputs import OutputArchive
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent
from tests.fakes.turns import live_turn

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["files", "memory"])
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OutputArchive]:
    yield OutputFiles(tmp_path / "outputs") if request.param == "files" else MemoryOutputs()


async def test_what_is_kept_comes_back_whole(archive: OutputArchive) -> None:
    text = "line\n" * 100_000 + "é end"
    await archive.keep("sess_1", "out_1", text)
    assert await archive.fetch("sess_1", "out_1") == text


async def test_another_session_or_an_unknown_id_gets_nothing(archive: OutputArchive) -> None:
    await archive.keep("sess_1", "out_1", "secret")
    assert await archive.fetch("sess_2", "out_1") is None
    assert await archive.fetch("sess_1", "out_2") is None


@pytest.mark.parametrize("bad", ["../x", "a/b", "..", "", "x" * 300])
async def test_ids_cannot_address_paths(archive: OutputArchive, bad: str) -> None:
    with pytest.raises(ValueError):
        await archive.keep("sess_1", bad, "x")
    assert await archive.fetch("sess_1", bad) is None


async def test_files_are_private(tmp_path: Path) -> None:
    archive = OutputFiles(tmp_path / "outputs")
    await archive.keep("sess_1", "out_1", "x")
    path = tmp_path / "outputs" / "sess_1" / "out_1.txt"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


async def test_a_long_result_is_cut_for_the_model_and_read_back_through_read_output(
    archive: OutputArchive, tmp_path: Path
) -> None:
    text = "".join(f"row {n}\n" for n in range(20_000))
    shown = await bounded_result(text, "sess_1", archive)
    assert len(shown) < RESULT_LIMIT + 400 and shown.startswith("row 0\n") and shown.endswith("row 19999\n")
    output_id = shown.split('output_id "', 1)[1].split('"', 1)[0]

    async def ignore(_: SessionEvent | HistoryEntry) -> None:
        pass

    ctx = ToolContext(
        "sess_1", SessionAccess(str(tmp_path)), cast(Any, None), cast(Any, None), ignore, ignore, live_turn(), archive
    )
    page = await WorkspaceToolbox().execute(
        ToolCallRequest("c1", "read_output", f'{{"output_id": "{output_id}", "offset": 10001, "limit": 2}}'), ctx
    )
    assert page == " 10001\trow 10000\n 10002\trow 10001\n"
    other = ToolContext(
        "sess_2", SessionAccess(str(tmp_path)), cast(Any, None), cast(Any, None), ignore, ignore, live_turn(), archive
    )
    call = ToolCallRequest("c2", "read_output", f'{{"output_id": "{output_id}"}}')
    denied = await WorkspaceToolbox().execute(call, other)
    assert denied.startswith("Error: no output")


async def test_a_short_result_is_left_alone(archive: OutputArchive) -> None:
    assert await bounded_result("short", "sess_1", archive) == "short"


async def test_drop_removes_one_sessions_outputs_only(archive: OutputArchive) -> None:
    """session/delete's part (ADR 0046); dropping what was never kept, or an id that is no name, is no error."""
    await archive.keep("sess_1", "out_1", "gone")
    await archive.keep("sess_2", "out_1", "kept")
    await archive.drop("sess_1")
    assert await archive.fetch("sess_1", "out_1") is None
    assert await archive.fetch("sess_2", "out_1") == "kept"
    await archive.drop("sess_1")
    await archive.drop("../sess_2")
    assert await archive.fetch("sess_2", "out_1") == "kept"


async def test_drop_never_follows_a_link_out_of_the_archive(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "sess_1").symlink_to(outside)
    await OutputFiles(tmp_path / "outputs").drop("sess_1")
    assert (outside / "precious.txt").read_text() == "mine"
