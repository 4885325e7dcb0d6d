"""Every name Linux allows through the file tools (issue 20, part 4).

A name that is not UTF-8 (`caf\\xe9.txt`) is shown escaped by grep, glob and
list_dir; these tests pass that form back to read_file, edit_file,
multi_edit, write_file, apply_patch and run_shell's cwd, and check that it
reaches the same file, that every decision is made on the canonical path,
that what the client and the store get is text (the real store codec
encodes it), and that a name that only looks escaped has one reading.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from term2.adapters.acp import wire_v2
from term2.adapters.store.codec import decode_entry, encode_entry
from term2.app.tools.edit import EditFile, MultiEdit, WriteFile
from term2.app.tools.gate import ESCAPED_NOTE
from term2.app.tools.lifecycle import told
from term2.app.tools.names import said, shown
from term2.app.tools.patch import ApplyPatch
from term2.app.tools.toolbox import WorkspaceToolbox, default_tools
from term2.domain.history import DiffOutput, Location, TerminalOutput, TextOutput, ToolCall, ToolKind, ToolStatus
from term2.ports.llm import ToolCallRequest
from tests.fakes.approvers import REJECTED, FixedApprover
from tests.fakes.client_files import MemoryClientFiles
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio

LATIN1 = b"caf\xe9.txt"
ESCAPED = "caf\\xe9.txt"  # as grep, glob and list_dir show it


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    harness = new_harness(tmp_path)
    # Every edit tool at once (the default set offers one of edit_file and apply_patch per model).
    tools = (*default_tools(), MultiEdit(), ApplyPatch())
    harness.toolbox = WorkspaceToolbox({tool.name: tool for tool in tools}.values())
    return harness


def _bytes_path(h: Harness, *names: bytes) -> bytes:
    return os.path.join(os.fsencode(h.root), *names)


def _plant(h: Harness, name: bytes = LATIN1, text: bytes = b"old line\n") -> bytes:
    path = _bytes_path(h, name)
    with open(path, "wb") as f:
        f.write(text)
    return path


def _read(path: bytes) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _storable(h: Harness) -> None:
    """Every update and record is text: the real store codec keeps it, and decodes the same call."""
    for entry in h.records:
        assert decode_entry(encode_entry(entry)) == entry
    for call in h.calls():
        json.dumps([call.title, call.raw_input, [c.path for c in call.locations]], ensure_ascii=False).encode()
        for output in call.content:
            if isinstance(output, DiffOutput):
                output.path.encode()
                (output.patch or "").encode()


async def test_the_escaped_name_reaches_the_byte_file_for_read_edit_multi_edit_and_write(h: Harness) -> None:
    path = _plant(h)
    name = f"{h.root}/{ESCAPED}"

    read = await h.call("read_file", path=ESCAPED)
    assert read == "     1\told line\n"
    assert h.last().title == f"Read {name}" and h.last().locations == ()  # no exact name to give an editor

    edited = await h.call("edit_file", path=ESCAPED, old_string="old", new_string="new")
    assert _read(path) == b"new line\n"
    assert edited.startswith(f"Edited {name} (+1 -1)\n") and "-old line\n+new line\n" in edited
    assert f'+++ "b{name.replace(chr(92), chr(92) * 2)}"\n' in edited  # git quotes a name with a backslash
    [diff] = h.last().content  # named as shown and marked so: an editor is sent it as text, naming no file
    assert isinstance(diff, DiffOutput) and diff.path == name and not diff.exact_path
    assert h.last().title == f"Edit {name}" and h.last().locations == ()
    sent = wire_v2.tool_content(diff)
    assert sent["type"] == "content" and sent["content"]["type"] == "text"
    assert (
        sent["content"]["text"].startswith(f"{name} (its name is not UTF-8") and "```diff\n" in sent["content"]["text"]
    )
    assert "-old line\n+new line\n```\n" in sent["content"]["text"]

    await h.call("multi_edit", path=ESCAPED, edits=[{"old_string": "new", "new_string": "newer"}])
    assert _read(path) == b"newer line\n"

    written = await h.call("write_file", path=ESCAPED, content="whole\n")
    assert _read(path) == b"whole\n" and written.startswith(f"Overwrote {name}")
    created = await h.call("write_file", path="n\\xe9w.txt", content="fresh\n")
    assert _read(_bytes_path(h, b"n\xe9w.txt")) == b"fresh\n" and "n\\xe9w.txt" in created

    assert ToolStatus.FAILED not in h.statuses()
    assert sorted(os.listdir(os.fsencode(h.root))) == [LATIN1, b"n\xe9w.txt"]  # no file named with a backslash
    _storable(h)


async def test_apply_patch_names_the_byte_files_as_shown(h: Harness) -> None:
    path = _plant(h)
    patch = (
        "*** Begin Patch\n"
        f"*** Update File: {ESCAPED}\n@@\n-old line\n+patched line\n"
        "*** Add File: d\\xe9/new.txt\n+added\n"
        "*** End Patch\n"
    )
    text = await h.call("apply_patch", input=patch)
    assert _read(path) == b"patched line\n"
    assert _read(_bytes_path(h, b"d\xe9", b"new.txt")) == b"added\n"
    assert f"Edited {h.root}/{ESCAPED}" in text and f"Created {h.root}/d\\xe9/new.txt" in text
    assert h.last().locations == ()
    assert all(isinstance(c, DiffOutput) and not c.exact_path and "\\x" in c.path for c in h.last().content)
    _storable(h)


async def test_a_name_that_only_looks_escaped_has_one_reading(h: Harness) -> None:
    """A backslash in a path always starts an escape: the real `a\\x41` is `a\\\\x41`, as shown names it."""
    literal = _plant(h, b"a\\x41", b"the backslash file\n")
    plain = _plant(h, b"aA", b"the plain file\n")
    assert shown("a\\x41") == "a\\\\x41"
    assert "the backslash file" in await h.call("read_file", path="a\\\\x41")
    assert "the plain file" in await h.call("read_file", path="a\\x41")
    await h.call("edit_file", path="a\\\\x41", old_string="backslash", new_string="escaped")
    assert _read(literal) == b"the escaped file\n" and _read(plain) == b"the plain file\n"
    assert h.last().title == f"Edit {h.root}/a\\\\x41"
    # A backslash that starts no escape stays itself: the name `a\b` is reached either way.
    odd = _plant(h, b"a\\b", b"odd\n")
    assert await h.call("read_file", path="a\\b") == await h.call("read_file", path="a\\\\b") == "     1\todd\n"
    assert _read(odd) == b"odd\n"


async def test_the_workspace_rule_judges_the_canonical_path_the_escape_names(h: Harness) -> None:
    """Escapes cannot smuggle a path past the rule: `\\x2e\\x2e` is `..`, `\\x2eenv` is `.env`, a link is followed."""
    h.approver = FixedApprover(REJECTED)
    (h.outside / "victim.txt").write_text("precious outside\n")
    (h.root / ".env").write_text("SECRET=1\n")
    os.symlink(h.outside, _bytes_path(h, b"l\xe9nk"))
    outside_rel = f"\\x2e\\x2e/{h.outside.name}/victim.txt"
    for path in (outside_rel, "\\x2eenv", "l\\xe9nk/victim.txt"):
        text = await h.call("read_file", path=path)
        assert "rejected" in text and "precious" not in text and "SECRET" not in text, path
    write = await h.call("write_file", path="l\\xe9nk/victim.txt", content="overwritten\n")
    assert "rejected" in write and (h.outside / "victim.txt").read_text() == "precious outside\n"
    questions = [(r.title, r.description) for r in h.approver.requests]
    assert questions[0][0] == f"Allow reading {h.outside}/victim.txt?"
    assert questions[1][0] == f"Allow reading {h.root}/.env?"
    assert questions[2][0] == f"Allow reading {h.outside}/victim.txt?"  # the link's target, as judged
    _storable(h)


async def test_an_approval_question_names_a_byte_path_as_shown(h: Harness) -> None:
    """The user is asked about the byte file outside the root in the form the model wrote, and allowing it
    edits that file."""
    target = os.path.join(os.fsencode(h.outside), LATIN1)
    with open(target, "wb") as f:
        f.write(b"outside\n")
    await h.call("edit_file", path=f"{h.outside}/{ESCAPED}", old_string="outside", new_string="allowed")
    [question] = h.approver.requests
    assert question.title == f"Allow editing {h.outside}/{ESCAPED}?"
    assert question.description == f"{h.outside}/{ESCAPED} is outside the workspace root {h.root}." + ESCAPED_NOTE
    assert question.tool_call.title == f"Edit {h.outside}/{ESCAPED}"
    assert _read(target) == b"allowed\n"
    _storable(h)


async def test_errors_name_a_byte_path_as_shown(h: Harness) -> None:
    os.mkdir(_bytes_path(h, b"d\xe9"))
    missing = await h.call("read_file", path="d\\xe9/gone\\xff.txt")
    assert missing == f"Error: read_file failed: file not found: {h.root}/d\\xe9/gone\\xff.txt"
    folder = await h.call("read_file", path="d\\xe9")
    assert folder == f"Error: read_file failed: {h.root}/d\\xe9 is a directory"
    edit = await h.call("edit_file", path="d\\xe9/gone\\xff.txt", old_string="a", new_string="b")
    assert edit == f"Error: file not found: {h.root}/d\\xe9/gone\\xff.txt (use write_file to create it)"
    _plant(h, b"bin\xe9", b"\x00\x01")
    binary = await h.call("read_file", path="bin\\xe9")
    assert binary.startswith(f"Error: {h.root}/bin\\xe9 looks like a binary file")
    _storable(h)


async def test_lone_surrogates_in_arguments_are_bytes_or_refused_and_always_stored(h: Harness) -> None:
    """A run_code program passes os.listdir's names as they are: `\\udce9` is the byte 0xE9. JSON's `\\ud800`
    stands for no byte: refused, and the call's record still encodes."""
    path = _plant(h)
    raw = json.dumps({"path": "caf\udce9.txt"})  # the escape a program's json.dumps writes
    assert await h.call("read_file", raw=raw) == "     1\told line\n"
    assert h.last().raw_input == {"path": ESCAPED}
    text = await h.call("read_file", raw=json.dumps({"path": "a\ud800"}))
    assert text.startswith("Error: invalid arguments for read_file: path holds a lone surrogate")
    assert h.last().raw_input == {"path": "a\\ud800"} and h.last().status is ToolStatus.FAILED
    await h.call("write_file", raw=json.dumps({"path": "caf\udce9.txt", "content": "by a program\n"}))
    assert _read(path) == b"by a program\n"
    _storable(h)


@pytest.mark.parametrize("tool", ["grep", "glob", "list_dir"])
async def test_the_search_tools_read_their_path_the_same_way(h: Harness, tool: str) -> None:
    """grep, glob and list_dir take `path` as the edit tools do: a lone surrogate standing for no byte is
    refused by name, not failed as invalid arguments in general."""
    arguments = {"path": "a\ud800", **({"pattern": "x"} if tool != "list_dir" else {})}
    text = await h.call(tool, raw=json.dumps(arguments))
    assert f"invalid arguments for {tool}: path holds a lone surrogate" in text
    _storable(h)


async def test_a_byte_path_is_never_sent_to_the_editor(h: Harness) -> None:
    """ACP names files with JSON strings; the editor would read `\\xe9` as U+FFFD and act on another file."""
    path = _plant(h)
    files = MemoryClientFiles({f"{h.root}/caf\ufffd.txt": "another file\n"})
    ctx = replace(h.ctx(), client_files=files)
    for number, (tool, args) in enumerate(
        [
            ("read_file", {"path": ESCAPED}),
            ("edit_file", {"path": ESCAPED, "old_string": "old", "new_string": "new"}),
            ("write_file", {"path": ESCAPED, "content": "whole\n"}),
        ]
    ):
        await h.toolbox.execute(ToolCallRequest(f"ed-{number}", tool, json.dumps(args)), ctx)
    assert files.requests == [] and _read(path) == b"whole\n"
    assert files.buffers == {f"{h.root}/caf\ufffd.txt": "another file\n"}


async def test_run_shell_runs_in_the_byte_folder_and_shows_it_escaped(h: Harness) -> None:
    folder = _bytes_path(h, b"d\xe9")
    os.mkdir(folder)
    await h.call("run_shell", command="ls", cwd="d\\xe9")
    [request] = h.sandbox.commands
    assert os.fsencode(request.cwd) == folder
    terminals = [c for call in h.calls() for c in call.content if isinstance(c, TerminalOutput)]
    assert terminals and {t.cwd for t in terminals} == {f"{h.root}/d\\xe9"}
    assert h.last().locations == ()
    _storable(h)


def test_said_writes_out_only_lone_surrogates() -> None:
    assert said("plain a\\b") == "plain a\\b"
    assert said("caf\udce9 \ud800") == "caf\\xe9 \\ud800"


def test_every_edit_tool_takes_the_shown_form() -> None:
    """The tools that take a path all read it as names.py shows names (a new one must, too)."""
    root = "/nonexistent-root"
    for tool, args in (
        (EditFile(), {"path": ESCAPED, "old_string": "a", "new_string": "b"}),
        (MultiEdit(), {"path": ESCAPED, "edits": [{"old_string": "a", "new_string": "b"}]}),
        (WriteFile(), {"path": ESCAPED, "content": ""}),
    ):
        invocation = tool.prepare(args, root)
        assert invocation.target == f"{root}/caf\udce9.txt", tool.name
        assert invocation.locations == (), tool.name


def test_a_tool_call_record_with_a_lone_surrogate_is_stored_escaped() -> None:
    call = ToolCall(
        "c1",
        "Read /w/caf\udce9",
        ToolKind.READ,
        ToolStatus.FAILED,
        {"path": ["caf\udce9"]},
        (TextOutput("no such file: /w/caf\udce9"), DiffOutput("/w/caf\udce9", "a\n", "b\n", patch="-a\n+b\n")),
        (Location("/w/caf\udce9"), Location("/w/plain")),
    )
    clean = told(call)
    assert decode_entry(encode_entry(clean)) == clean
    assert clean.title == "Read /w/caf\\xe9" and clean.raw_input == {"path": ["caf\\xe9"]}
    assert clean.locations == (Location("/w/plain"),)  # an escape would name another file: no location
    assert clean.content[1] == DiffOutput("/w/caf\\xe9", "a\n", "b\n", patch="-a\n+b\n", exact_path=False)
