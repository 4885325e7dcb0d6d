"""edit_file's tolerances, multi_edit and apply_patch through WorkspaceToolbox (issue 21, ADR 0027).

What the model is told (the tolerance used, the places of an ambiguity, and
only where it may read the file: ADR 0019), what the user is asked (each file
a patch touches, in its own words), and that nothing is written unless all
of it is: a rejected file, a hunk that cannot be placed or a failed write
leaves every file as it was.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from term2.app.config import ConfigError, load_settings
from term2.app.conversation import render_system_prompt
from term2.app.edit_tools import edit_tool_names, trained_on_apply_patch
from term2.app.tools import WorkspaceToolbox
from term2.app.tools import patch_commit as patch_module
from term2.app.tools.toolbox import default_tools
from term2.domain.approval import Choice
from term2.domain.history import DiffOutput, ToolStatus
from term2.ports.approval import ApprovalDecision, ApprovalRequest
from tests.fakes.approvers import ScriptedApprover
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio

ALL_EDITORS = edit_tool_names(None, "both")


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = new_harness(tmp_path)
    harness.toolbox = WorkspaceToolbox(default_tools(ALL_EDITORS))
    return harness


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


# --- edit_file: tolerances and refusals, as the model reads them -------------------------


async def test_a_tolerant_edit_says_what_was_forgiven_and_shows_the_diff(h: Harness) -> None:
    target = h.root / "m.py"
    target.write_text("def f():\n    if x:\n        return 1\n")
    old, new = "if x:\n    return 1\n", "if x:\n    return 2\n"
    text = await h.call("edit_file", path="m.py", old_string=old, new_string=new)
    assert target.read_text() == "def f():\n    if x:\n        return 2\n"
    assert "it matched one place after re-indenting by +4 spaces" in text
    assert "-        return 1\n+        return 2\n" in text
    call = h.last()
    assert call.status is ToolStatus.COMPLETED and call.locations[0].line == 2


async def test_an_ambiguous_edit_names_every_place(h: Harness) -> None:
    target = h.root / "m.py"
    original = "a = 1  \nb\nz\na = 1 \nb\n"
    target.write_text(original)
    text = await h.call("edit_file", path="m.py", old_string="a = 1\nb", new_string="a = 2\nb")
    assert "matches 2 places" in text and "lines 1-2, 4-5" in text and "trailing whitespace" in text
    assert "     4\ta = 1 " in text
    assert h.last().status is ToolStatus.FAILED and target.read_text() == original


async def test_an_ambiguity_in_a_file_it_may_not_read_names_no_lines_nor_count(h: Harness) -> None:
    target = h.outside / "secret.txt"
    original = "token = 1  \nx\ntoken = 1 \nx\n"
    target.write_text(original)
    text = await h.call("edit_file", path=str(target), old_string="token = 1\nx", new_string="token = 2\nx")
    assert "did not apply" in text and "more than once" not in text and "token" not in text.replace("old_string", "")
    assert "line" not in text and target.read_text() == original


async def test_a_tolerant_edit_of_a_file_it_may_not_read_says_only_that_it_was_edited(h: Harness) -> None:
    target = h.outside / "conf.txt"
    target.write_text("key:\n\tvalue\n")
    text = await h.call("edit_file", path=str(target), old_string="key:\n    value", new_string="key:\n    other")
    assert target.read_text() == "key:\n\tother\n"
    assert "value" not in text and "tabs" not in text and "not shown" in text


async def test_an_edit_keeps_the_files_mode_and_crlf(h: Harness) -> None:
    target = h.root / "run.sh"
    target.write_bytes(b"#!/bin/sh\r\necho one\r\n")
    target.chmod(0o755)
    await h.call("edit_file", path="run.sh", old_string="echo one\n", new_string="echo one\necho two\n")
    assert target.read_bytes() == b"#!/bin/sh\r\necho one\r\necho two\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


async def test_write_file_over_a_crlf_file_keeps_crlf(h: Harness) -> None:
    target = h.root / "w.txt"
    target.write_bytes(b"a\r\nb\r\n")
    await h.call("write_file", path="w.txt", content="x\ny\n")
    assert target.read_bytes() == b"x\r\ny\r\n"
    await h.call("write_file", path="w.txt", content="x\ny\r\n")  # the content says which endings it wants
    assert target.read_bytes() == b"x\ny\r\n"


# --- multi_edit ----------------------------------------------------------------------------


async def test_multi_edit_applies_every_edit_in_order(h: Harness) -> None:
    target = h.root / "m.py"
    target.write_text("a = 1\nb = 2\nc = 3\n")
    edits = [
        {"old_string": "a = 1", "new_string": "a = 10"},
        {"old_string": "c = 3", "new_string": "c = 30"},
        {"old_string": "a = 10\nb = 2", "new_string": "a = 10\nb = 20"},
    ]
    text = await h.call("multi_edit", path="m.py", edits=edits)
    assert target.read_text() == "a = 10\nb = 20\nc = 30\n"
    assert text.startswith(f"Edited {target} (+3 -3)")


async def test_multi_edit_is_all_or_none(h: Harness) -> None:
    target = h.root / "m.py"
    target.write_text("a = 1\nb = 2\n")
    edits = [{"old_string": "a = 1", "new_string": "a = 10"}, {"old_string": "zzz", "new_string": "y"}]
    text = await h.call("multi_edit", path="m.py", edits=edits)
    assert text.startswith("Error: edit 2: old_string was not found") and "no edit was applied" in text
    assert "(the 1 edit before it applied first)" in text
    assert target.read_text() == "a = 1\nb = 2\n"


@pytest.mark.parametrize(
    ("edits", "said"),
    [
        ([], "non-empty list"),
        ("x", "non-empty list"),
        (["x"], "edit 1 must be an object"),
        ([{"old_string": "a", "new_string": "a"}], "edit 1: old_string and new_string are identical"),
        ([{"old_string": "a"}], "edit 1: missing required argument 'new_string'"),
    ],
)
async def test_multi_edit_arguments_are_checked(h: Harness, edits: object, said: str) -> None:
    (h.root / "m.py").write_text("a\n")
    text = await h.call("multi_edit", path="m.py", edits=edits)
    assert said in text and h.last().status is ToolStatus.FAILED


# --- apply_patch -----------------------------------------------------------------------------


async def test_a_patch_adds_deletes_renames_and_updates(h: Harness) -> None:
    (h.root / "app.py").write_text("def greet():\n    print('Hi')\n")
    (h.root / "old.txt").write_text("bye\n")
    (h.root / "tool.sh").write_text("echo a\n")
    (h.root / "tool.sh").chmod(0o750)
    text = await h.call(
        "apply_patch",
        input=patch(
            "*** Add File: docs/hello.txt",
            "+Hello world",
            "*** Update File: app.py",
            "@@ def greet():",
            "-    print('Hi')",
            "+    print('Hello')",
            "*** Delete File: old.txt",
            "*** Update File: tool.sh",
            "*** Move to: bin/tool.sh",
            "@@",
            "-echo a",
            "+echo b",
        ),
    )
    assert (h.root / "docs" / "hello.txt").read_text() == "Hello world\n"
    assert (h.root / "app.py").read_text() == "def greet():\n    print('Hello')\n"
    assert not (h.root / "old.txt").exists() and not (h.root / "tool.sh").exists()
    assert (h.root / "bin" / "tool.sh").read_text() == "echo b\n"
    assert stat.S_IMODE((h.root / "bin" / "tool.sh").stat().st_mode) == 0o750
    assert "Created" in text and "Edited" in text and "Deleted" in text and "Moved" in text
    call = h.last()
    assert call.status is ToolStatus.COMPLETED and not h.approver.requests
    assert sum(isinstance(c, DiffOutput) for c in call.content) == 5


async def test_a_hunk_that_cannot_be_placed_writes_nothing(h: Harness) -> None:
    (h.root / "a.txt").write_text("one\n")
    (h.root / "b.txt").write_text("x\ny\nx\ny\n")
    text = await h.call(
        "apply_patch",
        input=patch("*** Update File: a.txt", "-one", "+ONE", "*** Update File: b.txt", "@@", " x", "-y", "+Y"),
    )
    assert "matches 2 times" in text and "lines 1-2, 3-4" in text and "nothing was changed" in text
    assert (h.root / "a.txt").read_text() == "one\n" and (h.root / "b.txt").read_text() == "x\ny\nx\ny\n"


async def test_a_rejected_file_writes_nothing_and_each_file_is_asked(tmp_path: Path) -> None:
    h = new_harness(tmp_path)
    h.toolbox = WorkspaceToolbox(default_tools(ALL_EDITORS))

    def answer(request: ApprovalRequest) -> ApprovalDecision:
        return ApprovalDecision(None, "rejected") if "second" in request.title else ApprovalDecision(Choice.ALLOW_ONCE)

    h.approver = ScriptedApprover(answer)  # type: ignore[assignment]
    first, second = h.outside / "first.txt", h.outside / "second.txt"
    first.write_text("1\n")
    second.write_text("2\n")
    text = await h.call(
        "apply_patch",
        input=patch(
            "*** Add File: inside.txt",
            "+new",
            f"*** Update File: {first}",
            "-1",
            "+one",
            f"*** Update File: {second}",
            "-2",
            "+two",
        ),
    )
    assert "rejected" in text and h.last().status is ToolStatus.FAILED
    titles = [r.title for r in h.approver.requests]
    assert titles == [f"Allow editing {first}?", f"Allow editing {second}?"]
    assert first.read_text() == "1\n" and second.read_text() == "2\n" and not (h.root / "inside.txt").exists()


async def test_a_failed_write_undoes_the_ones_before_it(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    (h.root / "a.txt").write_text("one\n")
    real = patch_module.write_whole

    def failing(path: str, root: str, data: bytes, *, mode: int = 0o644) -> bool:
        if path.endswith("b.txt") and data == b"new\n":
            raise OSError(28, "No space left on device")
        return real(path, root, data, mode=mode)

    monkeypatch.setattr(patch_module, "write_whole", failing)
    text = await h.call(
        "apply_patch", input=patch("*** Update File: a.txt", "-one", "+ONE", "*** Add File: b.txt", "+new")
    )
    assert "No space left" in text and "undone" in text
    assert (h.root / "a.txt").read_text() == "one\n" and not (h.root / "b.txt").exists()


async def test_a_patch_over_a_file_it_may_not_read_shows_none_of_its_text(h: Harness) -> None:
    target = h.outside / "creds.txt"
    target.write_text("password = hunter2\nuser = me\n")
    text = await h.call(
        "apply_patch", input=patch(f"*** Update File: {target}", " password = hunter2", "-user = me", "+user = you")
    )
    assert target.read_text() == "password = hunter2\nuser = you\n"
    assert "hunter2" not in text and "not shown" in text
    missing = await h.call("apply_patch", input=patch(f"*** Update File: {target}", "-nope", "+x"))
    assert "hunter2" not in missing and "did not apply" in missing and "nowhere" not in missing


async def test_a_malformed_patch_is_an_argument_error_the_model_can_fix(h: Harness) -> None:
    text = await h.call("apply_patch", input="*** Begin Patch\n*** Update File: a.txt\n*** End Patch")
    assert text.startswith("Error: invalid arguments for apply_patch: the patch is malformed: line 2:")


async def test_a_file_named_twice_is_refused(h: Harness) -> None:
    text = await h.call("apply_patch", input=patch("*** Add File: a", "+x", "*** Delete File: a"))
    assert "appears twice" in text


# --- the preview is the change made ------------------------------------------------------------


async def test_a_file_changed_while_the_user_was_asked_is_not_written(tmp_path: Path) -> None:
    h = new_harness(tmp_path)
    target = h.outside / "n.txt"
    target.write_text("a = 1\n")

    def answer(request: ApprovalRequest) -> ApprovalDecision:
        target.write_text("a = 1\nb = 2\n")  # the file changes after the diff was worked out
        return ApprovalDecision(Choice.ALLOW_ONCE)

    h.approver = ScriptedApprover(answer)  # type: ignore[assignment]
    text = await h.call("edit_file", path=str(target), old_string="a = 1\n", new_string="a = 9\n")
    assert "changed after the user was shown this change" in text
    assert target.read_text() == "a = 1\nb = 2\n"


async def test_the_approved_diff_is_the_one_reported(h: Harness) -> None:
    target = h.outside / "n.txt"
    target.write_text("if x:\n\ty = 1\n")
    await h.call("edit_file", path=str(target), old_string="if x:\n    y = 1", new_string="if x:\n    y = 2")
    pending = h.calls()[0]
    assert pending.status is ToolStatus.PENDING
    assert pending.content == h.last().content and target.read_text() == "if x:\n\ty = 2\n"


# --- which edit tools a model gets ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "patch_trained"),
    [
        ("openai/gpt-5", True),
        ("gpt-5-codex", True),
        ("openrouter/openai/gpt-4.1-mini", True),
        ("o3", True),
        ("o4-mini", True),
        ("azure/codex-mini-latest", True),
        ("anthropic/claude-sonnet-4-5", False),
        ("openai/gpt-4o", False),
        ("gemini/gemini-2.5-pro", False),
        ("ollama/qwen3-coder", False),
        ("openai/o1", False),
    ],
)
def test_the_family_decides_the_edit_tools(model: str, patch_trained: bool) -> None:
    assert trained_on_apply_patch(model) is patch_trained
    expected = ("apply_patch",) if patch_trained else ("edit_file", "multi_edit")
    assert edit_tool_names(model) == expected
    assert edit_tool_names(model, "both") == ("edit_file", "multi_edit", "apply_patch")


def test_an_unknown_choice_is_refused() -> None:
    with pytest.raises(ValueError, match="edit_tools must be one of"):
        edit_tool_names("gpt-5", "patch")


@pytest.mark.parametrize("choice", ["edit_file", "apply_patch", "both"])
def test_the_prompt_teaches_the_edit_tools_offered_and_no_other(choice: str) -> None:
    specs = WorkspaceToolbox(default_tools(edit_tool_names(None, choice))).specs()
    prompt = render_system_prompt(root="/p", platform_name="Linux", today="2026-01-01", tools=specs, instructions="")
    offered = {spec.name for spec in specs}
    for name in ("edit_file", "multi_edit", "apply_patch"):
        assert (f"`{name}`" in prompt) is (name in offered), name
    assert "`write_file` creates a file" in prompt


def test_a_gpt_family_toolbox_offers_apply_patch_instead_of_edit_file() -> None:
    names = [tool.name for tool in default_tools(edit_tool_names("gpt-5"))]
    assert "apply_patch" in names and "edit_file" not in names and "multi_edit" not in names


def test_edit_tools_is_read_from_config_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('edit_tools = "both"\n')
    assert load_settings({"TERM2_CONFIG": str(config)}).edit_tools == "both"
    assert load_settings({"TERM2_CONFIG": str(config), "TERM2_EDIT_TOOLS": "apply_patch"}).edit_tools == "apply_patch"
    with pytest.raises(ConfigError, match="edit_tools must be one of auto, edit_file, apply_patch, both"):
        load_settings({"TERM2_EDIT_TOOLS": "patches"})
