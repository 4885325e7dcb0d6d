"""Nothing a hint or a diff computes holds up the event loop or a cancel (issue 18.4).

A cancel must end the turn at once whatever a tool is computing: working an
edit out (reading, matching, the near-match hint) changes nothing and is
abandoned; only the write and its report run to the end. The v2 renderer,
which runs on the event loop, sends the patch the tool computed in its worker
thread instead of diffing there.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from term2.adapters.acp import wire_v2
from term2.app.tools import edit_refusals
from term2.domain.history import DiffOutput, ToolStatus
from term2.domain.near_match import NearMatch
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    made = new_harness(tmp_path)
    return made


async def test_a_cancel_does_not_wait_for_a_hint_being_computed(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_hint(text: str, snippet: str) -> NearMatch | None:
        started.set()
        release.wait(5)
        finished.set()
        return None

    monkeypatch.setattr(edit_refusals, "closest_lines", slow_hint)
    (h.root / "a.py").write_text("x = 1\n")
    try:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: h.call("edit_file", path="a.py", old_string="x = 2", new_string="y"))
                await anyio.to_thread.run_sync(started.wait, 5)
                scope.cancel()
        assert scope.cancelled_caught
        assert not finished.is_set(), "the cancel waited for the hint"
        assert h.statuses()[-1] is ToolStatus.CANCELLED
        assert (h.root / "a.py").read_text() == "x = 1\n"
    finally:
        release.set()


def test_the_v2_renderer_sends_the_tools_patch_and_diffs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_diffing(*_: object) -> str:
        raise AssertionError("diffed on the event loop")

    monkeypatch.setattr(wire_v2, "git_patch", no_diffing)
    rendered = wire_v2.tool_content(DiffOutput("/w/a", "x\n" * 7000, "y\n" * 7000, patch="PATCH"))
    assert rendered["type"] == "diff" and rendered["patch"]["text"] == "PATCH"
