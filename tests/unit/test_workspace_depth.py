"""The file tools and the sandbox agree on how deep a workspace may go (issue 18.8).

A write 1,200 folders deep once succeeded, and from then on every command in
the workspace was refused ("folders nested more than 256 deep"). Now one
limit (domain/workspace.py MAX_DEPTH) serves both: the deepest file the
tools make is one the sandbox's walk accepts, and one level more is refused
by the tool with a clear message before anything is created.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.adapters.sandbox.tree_scan import ScanIncomplete, scan_tree
from term2.domain.workspace import MAX_DEPTH
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    made = new_harness(tmp_path)
    return made


def _nested(depth: int) -> str:
    return "/".join(["d"] * depth + ["f.txt"])


async def test_a_write_deeper_than_the_sandbox_walks_is_refused_and_makes_nothing(h: Harness) -> None:
    text = await h.call("write_file", path=_nested(1200), content="x")
    assert "1200 folders deep in the workspace; the sandbox walks at most 255" in text
    assert not (h.root / "d").exists()
    scan_tree(str(h.root))  # the workspace stays usable


async def test_the_deepest_write_allowed_is_one_the_sandbox_accepts(h: Harness) -> None:
    text = await h.call("write_file", path=_nested(MAX_DEPTH - 1), content="x")
    assert text.startswith("Created"), text
    scan_tree(str(h.root))
    refused = await h.call("write_file", path=_nested(MAX_DEPTH), content="x")
    assert "the sandbox walks at most 255" in refused
    assert not (h.root / _nested(MAX_DEPTH)).parent.exists()


def test_one_level_more_made_by_other_means_is_what_the_sandbox_refuses(tmp_path: Path) -> None:
    os.makedirs(tmp_path / "/".join(["d"] * MAX_DEPTH))
    with pytest.raises(ScanIncomplete, match=f"nested more than {MAX_DEPTH} deep"):
        scan_tree(str(tmp_path))
