"""What the model writes as grep's pattern or include, or glob's pattern, reaches rg as one argument's value.

No argument list can hold a NUL character: such a pattern or glob is
refused by the ripgrep adapter in words, as rg refuses one it cannot read
(not a Python error from starting the process, reported as an unexpected
failure). A glob or pattern that looks like an option stays a value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio
NUL_REFUSED = "a pattern or glob cannot hold a NUL character"


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = new_harness(tmp_path)
    (harness.root / "a.txt").write_text("hello\n")
    return harness


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("grep", {"pattern": "hel\u0000lo"}),
        ("grep", {"pattern": "hello", "include": "*\u0000"}),
        ("glob", {"pattern": "*\u0000.txt"}),
    ],
)
async def test_a_nul_in_a_pattern_or_glob_is_refused_in_words(h: Harness, tool: str, arguments: object) -> None:
    text = await h.call(tool, raw=json.dumps(arguments))
    assert NUL_REFUSED in text and "unexpectedly" not in text


@pytest.mark.parametrize("value", ["--pre=sh", "-uuu", "--files"])
async def test_an_option_shaped_pattern_or_glob_stays_a_value(h: Harness, value: str) -> None:
    (h.root / value).write_text(f"{value}\n")
    assert await h.call("grep", pattern=value) == f"{value}:1:{value}\n"
    assert await h.call("glob", pattern=value) == f"{value}\n"
    assert await h.call("grep", pattern="hello", include=value) == "No matches for 'hello' under .\n"
