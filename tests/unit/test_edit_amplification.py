"""No amplification: what an edit may produce, and what one update may carry, are capped (issue 18.5).

A 2 KB replace_all on a 100 KB file once wrote 95 MiB, raised term2's peak
memory by half a gigabyte and sent a 96 MiB update; rejected, it still built
a 38 MiB permission request. Memory is measured with tracemalloc (Python's
own allocations, the same on any machine), sizes by what the client was sent.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from term2.app.tools.edit_texts import EDIT_LIMIT
from term2.domain.approval import Choice
from term2.domain.diff import DIFF_CONTENT_BYTES
from term2.domain.history import DiffOutput, TextOutput
from term2.ports.approval import ApprovalDecision
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    made = new_harness(tmp_path)
    return made


async def _peak(action: Callable[[], Awaitable[str]]) -> tuple[str, int]:
    tracemalloc.start()
    try:
        text = await action()
        return text, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _sent(h: Harness) -> int:
    """The largest content one update carried, as JSON."""
    return max(len(json.dumps([repr(c) for c in call.content])) for call in h.calls())


async def test_a_replace_all_that_would_blow_up_is_refused_before_it_is_built(h: Harness) -> None:
    (h.root / "data.txt").write_text("a" * 100_000)
    text, peak = await _peak(
        lambda: h.call("edit_file", path="data.txt", old_string="a", new_string="b" * 2048, replace_all=True)
    )
    assert "the edit would make" in text and "the limit is 10.0 MiB" in text
    assert (h.root / "data.txt").read_text() == "a" * 100_000
    assert peak < 8 * MiB


async def test_a_rejected_edit_outside_builds_no_large_permission_request(h: Harness) -> None:
    target = h.outside / "data.txt"
    target.write_text("ab" * 50_000)
    h.approver.answer = ApprovalDecision(Choice.REJECT)
    text, peak = await _peak(
        lambda: h.call("edit_file", path=str(target), old_string="a", new_string="c" * 380, replace_all=True)
    )
    assert "rejected" in text
    (request,) = h.approver.requests
    assert len(repr(request.tool_call.content)) < 2 * DIFF_CONTENT_BYTES
    assert peak < 64 * MiB


async def test_a_large_change_reaches_the_client_as_one_line_of_counts(h: Harness) -> None:
    big = "".join(f"line {i}\n" for i in range(400_000))  # ~5 MiB
    (h.root / "big.txt").write_text(big)
    text, peak = await _peak(lambda: h.call("edit_file", path="big.txt", old_string="line 7\n", new_string="seven\n"))
    assert text.startswith(f"Edited {h.root / 'big.txt'} (+1 -1)")
    (content,) = h.last().content
    assert isinstance(content, TextOutput) and "too large to show as a diff" in content.text
    assert _sent(h) < 4096
    assert peak < 8 * len(big)


async def test_a_small_change_still_carries_its_diff_and_patch(h: Harness) -> None:
    (h.root / "a.txt").write_text("one\ntwo\n")
    await h.call("edit_file", path="a.txt", old_string="two", new_string="2")
    (content,) = h.last().content
    assert isinstance(content, DiffOutput) and content.patch is not None and "-two\n+2\n" in content.patch


async def test_write_file_refuses_content_over_the_limit(h: Harness) -> None:
    text = await h.call("write_file", path="huge.txt", content="x" * (EDIT_LIMIT + 1))
    assert "content is 10.0 MiB long; a file term2 writes is at most 10.0 MiB" in text
    assert not (h.root / "huge.txt").exists()


async def test_multibyte_text_is_capped_by_its_encoded_size(h: Harness) -> None:
    (h.root / "u.txt").write_text("é" * 100)
    text = await h.call("edit_file", path="u.txt", old_string="é", new_string="€" * 40_000, replace_all=True)
    assert "long; the limit is 10.0 MiB" in text
    assert (h.root / "u.txt").read_text() == "é" * 100


async def test_a_near_miss_on_a_minified_file_answers_with_a_bounded_hint(h: Harness) -> None:
    line = "var a=" + ",".join(f"v{i}" for i in range(1_500_000))  # ~12 MB would be over the limit: ~9 MiB
    line = line[: 9 * MiB]
    (h.root / "bundle.min.js").write_text(line)
    text = await h.call("edit_file", path="bundle.min.js", old_string=line[:300] + "ZZZ", new_string="x")
    assert "The closest text is at line 1" in text
    assert len(text) < 16 * 1024
    assert _sent(h) < 64 * 1024


async def test_the_update_cap_counts_bytes_not_characters(h: Harness) -> None:
    emoji = "\U0001f600" * 70_000  # 70k characters, 280 KB of UTF-8
    text = await h.call("write_file", path="faces.txt", content=emoji)
    assert text.startswith("Created")
    (content,) = h.last().content
    assert isinstance(content, TextOutput) and "too large to show as a diff" in content.text


def test_diffs_recorded_before_the_cap_are_not_sent_whole() -> None:
    from term2.adapters.acp import wire_v1, wire_v2

    old = DiffOutput("/w/big", "a\n" * 200_000, "b\n" * 200_000)  # no patch: an entry from before
    for rendered in (wire_v1.tool_content(old), wire_v2.tool_content(old)):
        assert rendered["type"] == "content" and len(json.dumps(rendered)) < 1024
