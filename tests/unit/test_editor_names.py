"""What an editor acts on names the very file; what the model reads names it escaped (ADR 0034).

The real file `x\\y.txt` is shown to the model as `x\\\\y.txt`, the form it passes back. An editor does not
read escapes back: a location or a diff path `x\\\\y.txt` would open, review or revert another file, one a
repository could plant. So a location and a diff's path carry the exact name whenever it is valid Unicode
text (JSON carries a backslash, a line break or a bidi control exactly), and none at all when the name is
not UTF-8. These tests drive the real tools, the lifecycle net, the store codec and both ACP renderers.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from term2.adapters.acp import wire_common, wire_v1, wire_v2
from term2.adapters.store.codec import decode_entry, encode_entry
from term2.adapters.terminal.drawing import diff as drawn_diff
from term2.adapters.terminal.drawing import tool_line
from term2.app.tools.changes import client_content
from term2.app.tools.names import for_editor, located, shown
from term2.app.tools.patch import ApplyPatch
from term2.app.tools.toolbox import WorkspaceToolbox, default_tools
from term2.domain.history import DiffOutput, Location, ToolCall, ToolKind, ToolStatus
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio

BACKSLASH = "x\\y.txt"  # a real name: x, a backslash, y.txt
SHOWN = "x\\\\y.txt"  # how the model is shown it, and passes it back
PLANTED = SHOWN  # the file an editor would act on if it were told the shown form


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = new_harness(tmp_path)
    tools = (*default_tools(), ApplyPatch())
    harness.toolbox = WorkspaceToolbox({tool.name: tool for tool in tools}.values())
    return harness


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def test_the_editor_gets_the_exact_name_of_any_unicode_name_and_none_for_bytes() -> None:
    for name in ("/w/x\\y.txt", "/w/a\nb.txt", "/w/evil\u202etxt.sh", "/w/tab\there", "/w/plain.txt"):
        assert for_editor(name) == name
        assert located(name, 3) == (Location(name, 3),)
    assert for_editor("/w/caf\udce9.txt") is None and located("/w/caf\udce9.txt") == ()


async def test_read_and_edit_give_the_editor_the_backslash_file_and_the_model_its_shown_form(h: Harness) -> None:
    _write(h.root / BACKSLASH, "old line\n")
    _write(h.root / PLANTED, "planted\n")
    exact, escaped = f"{h.root}/{BACKSLASH}", f"{h.root}/{SHOWN}"

    assert await h.call("read_file", path=SHOWN) == "     1\told line\n"
    assert h.last().title == f"Read {escaped}" and h.last().locations == (Location(exact, 1),)

    edited = await h.call("edit_file", path=SHOWN, old_string="old", new_string="new")
    assert (h.root / BACKSLASH).read_text() == "new line\n" and (h.root / PLANTED).read_text() == "planted\n"
    assert edited.startswith(f"Edited {escaped} (+1 -1)\n")
    assert h.last().title == f"Edit {escaped}" and h.last().locations == (Location(exact, 1),)
    [diff] = h.last().content
    assert isinstance(diff, DiffOutput) and diff.path == exact
    assert diff.old_text == "old line\n" and diff.new_text == "new line\n"
    # The patch names the exact file in git's own quoting (a backslash doubled inside quotes), not the shown one.
    assert diff.patch is not None and f'+++ "b{exact.replace(chr(92), chr(92) * 2)}"\n' in diff.patch

    await h.call("write_file", path=SHOWN, content="whole\n")
    [whole] = h.last().content
    assert isinstance(whole, DiffOutput) and whole.path == exact and h.last().locations == (Location(exact),)
    for entry in h.records:
        assert decode_entry(encode_entry(entry)) == entry


async def test_apply_patch_and_the_searches_locate_the_exact_file(h: Harness) -> None:
    folder = h.root / "d\\e"
    folder.mkdir()
    _write(folder / "f.txt", "needle\n")
    exact = f"{h.root}/d\\e"
    patch = "*** Begin Patch\n*** Update File: d\\\\e/f.txt\n@@\n-needle\n+pin\n*** End Patch\n"
    text = await h.call("apply_patch", input=patch)
    assert f"Edited {h.root}/d\\\\e/f.txt" in text
    assert h.last().locations == (Location(f"{exact}/f.txt", 1),)
    [diff] = h.last().content
    assert isinstance(diff, DiffOutput) and diff.path == f"{exact}/f.txt"

    for tool, args in (("list_dir", {"path": "d\\\\e"}), ("glob", {"pattern": "*", "path": "d\\\\e"})):
        await h.call(tool, **args)
        assert h.last().locations == (Location(exact),), tool
        assert f"{h.root}/d\\\\e" in h.last().title, tool


async def test_a_byte_name_has_no_location_and_its_diff_is_text(h: Harness) -> None:
    path = os.path.join(os.fsencode(h.root), b"caf\xe9.txt")
    with open(path, "wb") as f:
        f.write(b"old\n")
    await h.call("edit_file", path="caf\\xe9.txt", old_string="old", new_string="new")
    call = h.last()
    assert call.status is ToolStatus.COMPLETED and call.locations == ()
    [diff] = call.content
    assert isinstance(diff, DiffOutput) and not diff.exact_path and diff.path == f"{h.root}/caf\\xe9.txt"
    for render in (wire_v1.tool_content, wire_v2.tool_content):
        sent = render(diff)
        assert sent["type"] == "content" and sent["content"]["type"] == "text" and "path" not in sent
        text = sent["content"]["text"]
        assert text.startswith(f"{h.root}/caf\\xe9.txt (its name is not UTF-8") and "-old\n+new\n```\n" in text
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(drawn_diff(diff))  # a terminal (term2 exec, its approval question) draws it as any diff
    assert "    -old\n    +new\n" in console.file.getvalue()  # type: ignore[attr-defined]


def test_a_text_diff_is_fenced_beyond_any_backticks_it_holds() -> None:
    content = client_content("/w/caf\udce9.md", "a\n", "```\n````\n")
    assert isinstance(content, DiffOutput) and not content.exact_path
    sent = wire_v1.tool_content(content)
    assert sent["type"] == "content" and sent["content"]["type"] == "text"
    assert "`````diff\n" in sent["content"]["text"] and sent["content"]["text"].endswith("\n`````\n")


def test_both_renderers_send_the_exact_name_as_json_text() -> None:
    """A line break, a bidi control and a backslash reach the editor as themselves, in valid JSON."""
    for name in ("/w/x\\y.txt", "/w/a\nb.txt", "/w/evil\u202etxt.sh"):
        diff = client_content(name, "a\n", "b\n")
        assert isinstance(diff, DiffOutput) and diff.path == name
        v1 = wire_v1.tool_content(diff)
        v2 = wire_v2.tool_content(diff)
        assert v1["type"] == "diff" and v1["path"] == name
        assert v2["type"] == "diff" and v2["changes"] == [{"operation": "modify", "path": name}]
        [place] = wire_common.locations(located(name, 2))
        assert place == {"path": name, "line": 2}
        line = json.dumps([v1, v2, place], ensure_ascii=False)
        assert json.loads(line) == [v1, v2, place] and "\n" not in line


def test_a_terminal_draws_a_location_escaped_as_the_title_names_it() -> None:
    for name in ("/w/x\\y.txt", "/w/a\nb.txt", "/w/evil\u202etxt.sh"):
        place = (Location(name, 4),)  # the exact name, as an editor is told it
        call = ToolCall("c", f"Read {shown(name)}", ToolKind.READ, ToolStatus.COMPLETED, {}, (), place)
        drawn = tool_line(call).plain
        assert f"{shown(name)}:4" in drawn and "\n" not in drawn and "\u202e" not in drawn, drawn
        assert name not in drawn
