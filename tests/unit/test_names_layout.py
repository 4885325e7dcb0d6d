"""A name cannot draw a line of its own or read backwards where it is shown (names.shown, ADR 0034).

C1 controls (U+0085 breaks a line where Unicode's rules are followed), the
line and paragraph separators and the bidi controls (U+202E turns
`evil\\u202etxt.sh` into what looks like `evilhs.txt`) are written as their
UTF-8 bytes, like any other control character: the model passes that form
back to reach the same file, and an editor's approval question shows the
name as it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.app.tools.gate import ESCAPED_NOTE
from term2.app.tools.names import shown, unshown
from tests.fakes.approvers import REJECTED
from tests.unit.test_tools import new_harness

pytestmark = pytest.mark.anyio

LAYOUT = ["\u0085", "\u009b", "\u2028", "\u2029", "\u202e", "\u2066", "\u200f", "\u061c"]


@pytest.mark.parametrize("char", LAYOUT)
def test_a_layout_character_is_written_as_its_bytes_and_read_back(char: str) -> None:
    name = f"notes{char}txt.sh"
    escaped = "".join(f"\\x{byte:02x}" for byte in char.encode())
    assert shown(name) == f"notes{escaped}txt.sh"
    assert unshown(shown(name)) == name


async def test_list_dir_shows_it_escaped_and_a_question_about_it_names_it_as_it_is(tmp_path: Path) -> None:
    h = new_harness(tmp_path)
    h.approver.answer = REJECTED
    (h.root / "sub").mkdir()
    (h.root / "sub" / ".env.\u202etxt").write_text("KEY=1\n")

    listed = await h.call("list_dir", path="sub")
    assert listed == ".env.\\xe2\\x80\\xaetxt\n"
    await h.call("read_file", path="sub/.env.\\xe2\\x80\\xaetxt")

    (question,) = h.approver.requests
    assert "\u202e" not in question.title and "\u202e" not in (question.description or "")
    assert question.title == f"Allow reading {h.root}/sub/.env.\\xe2\\x80\\xaetxt?"
    assert question.description is not None and question.description.endswith(ESCAPED_NOTE)
