"""The built-in tools, driven through WorkspaceToolbox with the fakes in tests/fakes.

Every denial path asserts that nothing was written and no command ran; every
call asserts the statuses the client saw and the ones the history recorded.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio
import jsonschema
import pytest

from term2.app.tools import WorkspaceToolbox
from term2.app.tools.read import ReadFile
from term2.app.turn import Turn
from term2.domain.approval import Choice
from term2.domain.diff import git_patch
from term2.domain.history import (
    DiffOutput,
    HistoryEntry,
    TerminalOutput,
    TextOutput,
    ToolCall,
    ToolKind,
    ToolStatus,
)
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalDecision, DenialReason
from term2.ports.llm import ToolCallRequest
from term2.ports.sandbox import (
    CommandRequest,
    CommandResult,
    SandboxFailed,
    SandboxUnavailable,
)
from term2.ports.tools import ToolContext
from term2.ports.updates import SessionEvent, TerminalChunk, ToolCallChanged
from tests.fakes.approvers import FixedApprover
from tests.fakes.folder_locks import MemoryFolderLocks
from tests.fakes.sandboxes import CannedSandbox
from tests.fakes.turns import live_turn
from tests.support.toolboxes import workspace_toolbox

pytestmark = pytest.mark.anyio

DENIALS: tuple[DenialReason, ...] = (
    "rejected",
    "cancelled",
    "unknown_option",
    "malformed",
    "disconnected",
    "stale",
    "no_interaction",
)


@dataclass
class Harness:
    root: Path
    outside: Path
    approver: FixedApprover
    sandbox: CannedSandbox
    access: SessionAccess
    events: list[SessionEvent] = field(default_factory=list)
    records: list[HistoryEntry] = field(default_factory=list)
    toolbox: WorkspaceToolbox = field(default_factory=workspace_toolbox)
    counter: int = 0
    turn: Turn = field(default_factory=live_turn)
    folder_locks: MemoryFolderLocks = field(default_factory=MemoryFolderLocks)

    def ctx(self) -> ToolContext:
        async def emit(event: SessionEvent) -> None:
            self.events.append(event)

        async def record(entry: HistoryEntry) -> None:
            self.records.append(entry)

        return ToolContext(
            "sess-1", self.access, self.approver, self.sandbox, emit, record, self.turn, folder_locks=self.folder_locks
        )

    async def call(self, name: str, raw: str | None = None, **args: object) -> str:
        self.counter += 1
        text = raw if raw is not None else json.dumps(args)
        return await self.toolbox.execute(ToolCallRequest(f"call-{self.counter}", name, text), self.ctx())

    def calls(self) -> list[ToolCall]:
        return [e.call for e in self.events if isinstance(e, ToolCallChanged)]

    def statuses(self) -> list[ToolStatus]:
        return [c.status for c in self.calls()]

    def recorded_statuses(self) -> list[ToolStatus]:
        return [e.status for e in self.records if isinstance(e, ToolCall)]

    def last(self) -> ToolCall:
        return self.calls()[-1]


def new_harness(tmp_path: Path) -> Harness:
    """A fresh root and outside folder (canonical), an allowing approver and a canned sandbox."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    root = Path(os.path.realpath(root))
    outside = Path(os.path.realpath(outside))
    return Harness(root, outside, FixedApprover(), CannedSandbox(), SessionAccess(str(root)))


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return new_harness(tmp_path)


DONE = [ToolStatus.PENDING, ToolStatus.IN_PROGRESS, ToolStatus.COMPLETED]
FAILED_RUN = [ToolStatus.PENDING, ToolStatus.IN_PROGRESS, ToolStatus.FAILED]


# --- toolbox shape -----------------------------------------------------------


def test_specs_are_valid_json_schemas() -> None:
    specs = WorkspaceToolbox().specs()
    assert [s.name for s in specs] == [
        "read_file",
        "list_dir",
        "glob",
        "grep",
        "write_file",
        "edit_file",
        "multi_edit",
        "run_shell",
        "run_code",
        "read_output",
        "update_plan",
    ]
    for spec in specs:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.description


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unique"):
        WorkspaceToolbox([ReadFile(), ReadFile()])


async def test_statuses_are_emitted_and_recorded(h: Harness) -> None:
    (h.root / "a.txt").write_text("x\n")
    await h.call("read_file", path="a.txt")
    assert h.statuses() == DONE
    assert h.recorded_statuses() == DONE
    firsts = [e.first for e in h.events if isinstance(e, ToolCallChanged)]
    assert firsts == [True, False, False]
    call = h.last()
    assert call.kind is ToolKind.READ
    assert call.raw_input == {"path": "a.txt"}
    assert call.locations[0].path == str(h.root / "a.txt")
    assert call.locations[0].line == 1


@pytest.mark.parametrize(
    ("name", "raw", "needle"),
    [
        ("read_file", "{not json", "not valid JSON"),
        ("read_file", "[1, 2]", "must be a JSON object"),
        ("read_file", "{}", "missing required argument 'path'"),
        ("read_file", '{"path": 3}', "'path' must be a string"),
        ("read_file", '{"path": "a", "offset": 0}', "'offset' must be at least 1"),
        ("edit_file", '{"path": "a", "old_string": "x"}', "'new_string'"),
        ("grep", '{"pattern": "x", "include": "../*"}', "must not contain '..'"),
        ("glob", '{"pattern": "../*"}', "must not contain '..'"),
        ("run_shell", '{"command": "  "}', "must not be blank"),
        ("no_such_tool", "{}", "no tool named 'no_such_tool'"),
    ],
)
async def test_bad_calls_fail_without_raising(h: Harness, name: str, raw: str, needle: str) -> None:
    text = await h.call(name, raw=raw)
    assert needle in text
    assert text.startswith("Error:")
    assert h.statuses() == [ToolStatus.PENDING, ToolStatus.FAILED]
    assert h.recorded_statuses() == [ToolStatus.PENDING, ToolStatus.FAILED]
    assert h.last().content == (TextOutput(text),)
    assert not h.approver.requests and not h.sandbox.commands


# --- read_file -----------------------------------------------------------------


async def test_read_whole_file_and_ranges(h: Harness) -> None:
    (h.root / "f.txt").write_text("".join(f"line{i}\n" for i in range(1, 11)))
    whole = await h.call("read_file", path="f.txt")
    assert whole.splitlines()[0] == "     1\tline1"
    assert len(whole.splitlines()) == 10
    part = await h.call("read_file", path=str(h.root / "f.txt"), offset=3, limit=2)
    assert part == "     3\tline3\n     4\tline4\n"
    assert h.last().locations[0].line == 3
    tail = await h.call("read_file", path="f.txt", offset=10)
    assert tail == "    10\tline10\n"
    past = await h.call("read_file", path="f.txt", offset=11)
    assert "past the end" in past and h.last().status is ToolStatus.FAILED


async def test_read_refuses_binary_and_missing(h: Harness) -> None:
    (h.root / "img.bin").write_bytes(b"\x89PNG\x00\x00data")
    text = await h.call("read_file", path="img.bin")
    assert "binary" in text and h.statuses()[-3:] == FAILED_RUN
    missing = await h.call("read_file", path="nope.txt")
    assert "not found" in missing and h.last().status is ToolStatus.FAILED
    (h.root / "d").mkdir()
    folder = await h.call("read_file", path="d")
    assert "is a directory" in folder and h.last().status is ToolStatus.FAILED


async def test_read_size_cap_is_marked(h: Harness) -> None:
    (h.root / "big.txt").write_text("".join(f"{'x' * 90} {i}\n" for i in range(5000)))
    h.toolbox = WorkspaceToolbox([ReadFile(limit_tokens=1024)])
    text = await h.call("read_file", path="big.txt")
    assert len(text.encode()) < 4096 + 200
    assert "[truncated at about 1,024 tokens (4.0 KiB); continue with offset=" in text
    next_offset = int(text.rsplit("offset=", 1)[1].split(",")[0])
    more = await h.call("read_file", path="big.txt", offset=next_offset, limit=1)
    assert more.startswith(f"{next_offset:>6}\t")


async def test_read_empty_file(h: Harness) -> None:
    (h.root / "e.txt").write_text("")
    assert await h.call("read_file", path="e.txt") == "(empty file)\n"


# --- list_dir and glob -----------------------------------------------------------


async def test_list_dir_skips_git(h: Harness) -> None:
    (h.root / ".git").mkdir()
    (h.root / "src").mkdir()
    (h.root / "README").write_text("r")
    os.symlink(h.root / "README", h.root / "link")
    text = await h.call("list_dir")
    assert text.splitlines() == ["README", f"link -> {h.root / 'README'}", "src/"]
    assert h.statuses() == DONE


async def test_list_dir_caps_entries(h: Harness) -> None:
    for i in range(1005):
        (h.root / f"f{i:04}").write_text("")
    text = await h.call("list_dir", path=".")
    assert "[truncated: showing 1000 of 1005 entries]" in text


async def test_glob_recursive_and_skips_git(h: Harness) -> None:
    (h.root / "src" / "pkg").mkdir(parents=True)
    (h.root / ".git" / "objects").mkdir(parents=True)
    (h.root / ".git" / "objects" / "x.py").write_text("")
    (h.root / "top.py").write_text("")
    (h.root / "src" / "a.py").write_text("")
    (h.root / "src" / "pkg" / "b.py").write_text("")
    (h.root / "src" / "c.txt").write_text("")
    os.symlink(h.outside, h.root / "src" / "out")
    (h.outside / "evil.py").write_text("")
    text = await h.call("glob", pattern="**/*.py")
    assert text.splitlines() == ["src/a.py", "src/pkg/b.py", "top.py"]
    # As `rg -g` reads globs (issue 20): a name glob matches at any depth, a path glob below 'path'.
    anywhere = await h.call("glob", pattern="*.py")
    assert anywhere.splitlines() == ["src/a.py", "src/pkg/b.py", "top.py"]
    top_only = await h.call("glob", pattern="/*.py")
    assert top_only.splitlines() == ["top.py"]
    # Files only, folder by folder; the link to outside is neither listed nor followed.
    in_src = await h.call("glob", pattern="*", path="src")
    assert in_src.splitlines() == ["src/a.py", "src/c.txt", "src/pkg/b.py"]
    none = await h.call("glob", pattern="*.rs")
    assert none.startswith("No files match")


# --- grep --------------------------------------------------------------------------


async def test_grep_reports_path_line_text(h: Harness) -> None:
    (h.root / "src").mkdir()
    (h.root / "src" / "a.py").write_text("import os\nTODO: fix\nx = 1\n")
    (h.root / "b.txt").write_text("nothing\ntodo later\n")
    text = await h.call("grep", pattern="TODO")
    assert text == "src/a.py:2:TODO: fix\n"
    both = await h.call("grep", pattern="todo", ignore_case=True)
    assert both.splitlines() == ["b.txt:2:todo later", "src/a.py:2:TODO: fix"]
    only_py = await h.call("grep", pattern="todo", ignore_case=True, include="*.py")
    assert only_py.splitlines() == ["src/a.py:2:TODO: fix"]
    one_file = await h.call("grep", pattern="^x", path="src/a.py")
    assert one_file.splitlines() == ["src/a.py:3:x = 1"]


async def test_grep_skips_git_binary_and_gitignored(h: Harness) -> None:
    (h.root / ".git").mkdir()
    (h.root / ".git" / "config").write_text("needle\n")
    (h.root / "bin.dat").write_bytes(b"needle\x00\x01")
    (h.root / "node_modules" / "lib").mkdir(parents=True)
    (h.root / "node_modules" / "lib" / "x.js").write_text("needle\n")
    (h.root / "build").mkdir()
    (h.root / "build" / "out.txt").write_text("needle\n")
    (h.root / "app.log").write_text("needle\n")
    (h.root / "docs").mkdir()
    (h.root / "docs" / "gen.md").write_text("needle\n")
    (h.root / "keep.txt").write_text("needle\n")
    (h.root / ".gitignore").write_text("# comment\nnode_modules/\n/build\n*.log\ndocs/gen.md\n!keep.txt\n")
    text = await h.call("grep", pattern="needle")
    assert text.splitlines()[0] == "keep.txt:1:needle"
    assert "bin.dat" not in text  # binary files are skipped silently, as rg skips them (issue 20)
    assert "node_modules" not in text and "build" not in text and ".git/" not in text
    assert "app.log" not in text and "gen.md" not in text


async def test_grep_caps_matches(h: Harness) -> None:
    (h.root / "many.txt").write_text("hit\n" * 500)
    text = await h.call("grep", pattern="hit")
    lines = text.splitlines()
    assert len(lines) == 201
    assert lines[-1].startswith("[truncated: the first 200 matches in path order")
    assert "matches after many.txt:200 were left out" in lines[-1]


async def test_grep_missing_path_fails(h: Harness) -> None:
    text = await h.call("grep", pattern="x", path="missing")
    assert "not found" in text and h.last().status is ToolStatus.FAILED


# --- write_file and edit_file -----------------------------------------------------------


async def test_write_creates_and_overwrites(h: Harness) -> None:
    text = await h.call("write_file", path="new/dir/f.txt", content="one\n")
    target = h.root / "new" / "dir" / "f.txt"
    assert target.read_text() == "one\n"
    assert text.startswith(f"Created {target} (+1 -0)")
    assert h.last().content == (DiffOutput(str(target), None, "one\n", patch=git_patch(str(target), None, "one\n")),)
    assert h.last().kind is ToolKind.EDIT
    await h.call("write_file", path="new/dir/f.txt", content="two\n")
    assert target.read_text() == "two\n"
    patch = git_patch(str(target), "one\n", "two\n")
    assert h.last().content == (DiffOutput(str(target), "one\n", "two\n", patch=patch),)
    assert h.statuses() == DONE + DONE
    assert not h.approver.requests


async def test_write_keeps_exact_bytes(h: Harness) -> None:
    await h.call("write_file", path="crlf.txt", content="a\r\nb")
    assert (h.root / "crlf.txt").read_bytes() == b"a\r\nb"
    await h.call("write_file", path="empty.txt", content="")
    assert (h.root / "empty.txt").read_bytes() == b""


async def test_edit_exactly_once(h: Harness) -> None:
    target = h.root / "code.py"
    target.write_text("def f():\n    return 1\n\ndef g():\n    return 2\n")
    text = await h.call("edit_file", path="code.py", old_string="return 2", new_string="return 3")
    assert target.read_text().endswith("return 3\n")
    assert "-    return 2\n+    return 3\n" in text
    call = h.last()
    assert call.status is ToolStatus.COMPLETED
    assert call.locations[0].line == 5
    assert isinstance(call.content[0], DiffOutput)
    assert call.content[0].old_text is not None and "return 2" in call.content[0].old_text


async def test_edit_not_found_and_multiple_matches_change_nothing(h: Harness) -> None:
    target = h.root / "code.py"
    original = "x = 1\nx = 1\n"
    target.write_text(original)
    missing = await h.call("edit_file", path="code.py", old_string="y = 2", new_string="y = 3")
    assert "was not found" in missing and h.last().status is ToolStatus.FAILED
    many = await h.call("edit_file", path="code.py", old_string="x = 1", new_string="x = 2")
    assert "matches 2 times" in many and "replace_all" in many
    assert h.last().status is ToolStatus.FAILED
    assert target.read_text() == original
    same = await h.call("edit_file", path="code.py", old_string="x", new_string="x")
    assert "identical" in same


async def test_edit_replace_all(h: Harness) -> None:
    target = h.root / "code.py"
    target.write_text("a a a\n")
    text = await h.call("edit_file", path="code.py", old_string="a", new_string="b", replace_all=True)
    assert target.read_text() == "b b b\n"
    assert "3 replacements" in text


async def test_edit_missing_and_non_text_files(h: Harness) -> None:
    text = await h.call("edit_file", path="nope.py", old_string="a", new_string="b")
    assert "use write_file" in text and h.last().status is ToolStatus.FAILED
    assert not (h.root / "nope.py").exists()
    (h.root / "latin1.txt").write_bytes(b"caf\xe9\n")
    latin = await h.call("edit_file", path="latin1.txt", old_string="caf", new_string="bar")
    assert "not valid UTF-8" in latin
    assert (h.root / "latin1.txt").read_bytes() == b"caf\xe9\n"


# --- approvals ---------------------------------------------------------------------


async def test_inside_root_needs_no_approval(h: Harness) -> None:
    (h.root / "a.txt").write_text("a\n")
    await h.call("read_file", path="a.txt")
    await h.call("edit_file", path="a.txt", old_string="a", new_string="b")
    await h.call("grep", pattern="b")
    await h.call("list_dir")
    assert not h.approver.requests


async def test_read_outside_asks_with_read_options(h: Harness) -> None:
    (h.outside / "s.txt").write_text("secret\n")
    text = await h.call("read_file", path=str(h.outside / "s.txt"))
    assert "secret" in text
    (request,) = h.approver.requests
    assert request.title == f"Allow reading {h.outside / 's.txt'}?"
    assert request.session_id == "sess-1"
    assert request.tool_call.status is ToolStatus.PENDING
    assert request.command is None
    assert [o.choice for o in request.options] == [
        Choice.ALLOW_ONCE,
        Choice.ALLOW_FOLDER_SESSION,
        Choice.REJECT,
    ]


async def test_read_folder_grant_covers_later_reads_and_listings(h: Harness) -> None:
    (h.outside / "s.txt").write_text("secret\n")
    h.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)
    await h.call("read_file", path=str(h.outside / "s.txt"))
    await h.call("list_dir", path=str(h.outside))
    await h.call("grep", pattern="secret", path=str(h.outside))
    assert len(h.approver.requests) == 1
    assert h.access.workspace.grants.read_folders == frozenset({str(h.outside)})
    assert h.access.workspace.grants.run_folders == frozenset()
    # A read grant is not an edit grant.
    await h.call("write_file", path=str(h.outside / "s.txt"), content="x")
    assert len(h.approver.requests) == 2


async def test_symlink_out_of_root_asks(h: Harness) -> None:
    (h.outside / "s.txt").write_text("secret\n")
    os.symlink(h.outside, h.root / "out")
    h.approver.answer = ApprovalDecision(None, "rejected")
    text = await h.call("read_file", path="out/s.txt")
    assert "secret" not in text
    assert h.approver.requests[0].title == f"Allow reading {h.outside / 's.txt'}?"


async def test_edit_outside_asks_and_folder_grant_sticks(h: Harness) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_EDIT_FOLDER_SESSION)
    target = h.outside / "sub" / "new.txt"
    await h.call("write_file", path=str(target), content="x")
    (request,) = h.approver.requests
    assert request.title == f"Allow editing {target}?"
    assert [o.choice for o in request.options] == [
        Choice.ALLOW_ONCE,
        Choice.ALLOW_EDIT_FILE_SESSION,
        Choice.ALLOW_EDIT_FOLDER_SESSION,
        Choice.REJECT,
    ]
    assert target.read_text() == "x"
    # Later writes in the granted folder (even through a fresh context) do not ask.
    await h.call("write_file", path=str(h.outside / "sub" / "other.txt"), content="y")
    assert len(h.approver.requests) == 1
    # An edit_file there is covered too: the user's answer was about edits, and edit_file is one (issue 30.10).
    h.approver.answer = ApprovalDecision(Choice.REJECT)
    await h.call("edit_file", path=str(target), old_string="x", new_string="z")
    await h.call("edit_file", path=str(target), old_string="z", new_string="w")
    assert target.read_text() == "w"
    assert len(h.approver.requests) == 1, "the folder is granted for edits, edit_file's included"
    # ... but the parent folder is not covered.
    await h.call("write_file", path=str(h.outside / "top.txt"), content="t")
    assert len(h.approver.requests) == 2


async def test_file_grant_covers_only_that_file(h: Harness) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_EDIT_FILE_SESSION)
    await h.call("write_file", path=str(h.outside / "a.txt"), content="a")
    await h.call("write_file", path=str(h.outside / "a.txt"), content="b")
    assert len(h.approver.requests) == 1
    await h.call("write_file", path=str(h.outside / "b.txt"), content="b")
    assert len(h.approver.requests) == 2


async def test_allow_once_records_no_grant(h: Harness) -> None:
    await h.call("write_file", path=str(h.outside / "a.txt"), content="a")
    await h.call("write_file", path=str(h.outside / "a.txt"), content="b")
    assert len(h.approver.requests) == 2


@pytest.mark.parametrize("reason", DENIALS)
async def test_every_denial_leaves_files_untouched(h: Harness, reason: DenialReason) -> None:
    h.approver.answer = ApprovalDecision(None, reason)
    target = h.outside / "t.txt"
    target.write_text("before\n")
    text = await h.call("edit_file", path=str(target), old_string="before", new_string="after")
    await h.call("write_file", path=str(h.outside / "new.txt"), content="x")
    assert target.read_text() == "before\n"
    assert not (h.outside / "new.txt").exists()
    assert f"({reason}); the tool did not run." in text
    assert h.statuses() == [ToolStatus.PENDING, ToolStatus.FAILED] * 2
    assert h.recorded_statuses() == [ToolStatus.PENDING, ToolStatus.FAILED] * 2
    (content,) = h.last().content
    assert isinstance(content, TextOutput) and "did not run" in content.text


@pytest.mark.parametrize("reason", DENIALS)
async def test_every_denial_runs_no_command(h: Harness, reason: DenialReason) -> None:
    h.approver.answer = ApprovalDecision(None, reason)
    text = await h.call("run_shell", command="rm -rf /")
    assert not h.sandbox.commands
    assert "did not run" in text
    assert not any(isinstance(e, TerminalChunk) for e in h.events)


@pytest.mark.parametrize(
    "answer",
    [
        ApprovalDecision(Choice.ALLOW_EDIT_FILE_SESSION),  # not offered for execute
        ApprovalDecision(Choice.ALLOW_EDIT_FOLDER_SESSION),  # not offered for execute
        ApprovalDecision(Choice.REJECT),  # a reject passed as a "choice"
        ApprovalDecision(None),  # no choice, no reason
        RuntimeError("transport broke"),
    ],
)
async def test_anything_but_an_offered_allow_is_a_denial(h: Harness, answer: ApprovalDecision | Exception) -> None:
    h.approver.answer = answer
    text = await h.call("run_shell", command="echo hi")
    assert not h.sandbox.commands
    assert "did not run" in text
    assert h.last().status is ToolStatus.FAILED
    assert h.access.workspace.grants.run_folders == frozenset()


# --- run_shell -----------------------------------------------------------------------


async def test_shell_asks_every_time_without_a_grant(h: Harness) -> None:
    await h.call("run_shell", command="ls")
    await h.call("run_shell", command="ls")
    assert len(h.approver.requests) == 2
    request = h.approver.requests[0]
    assert request.title == f"Allow running `ls` in {h.root}?"
    assert request.command is not None
    assert (request.command.command, request.command.cwd) == ("ls", str(h.root))
    assert [o.choice for o in request.options] == [Choice.ALLOW_ONCE, Choice.ALLOW_FOLDER_SESSION, Choice.REJECT]


async def test_shell_folder_grant_sticks(h: Harness) -> None:
    (h.root / "sub").mkdir()
    h.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)
    await h.call("run_shell", command="ls")
    await h.call("run_shell", command="make", cwd="sub")
    assert len(h.approver.requests) == 1
    assert [c.cwd for c in h.sandbox.commands] == [str(h.root), str(h.root / "sub")]


async def test_shell_runs_through_sandbox_and_streams(h: Harness) -> None:
    h.sandbox.chunks = (b"hel", b"lo\n")
    h.sandbox.result = CommandResult(0, None, b"hello\n", False, False)
    text = await h.call("run_shell", command="echo hello", timeout=5, sandbox="unsandboxed")
    (request,) = h.sandbox.commands
    assert request == CommandRequest("echo hello", str(h.root), str(h.root), 5.0, 256 * 1024)
    chunks = [e for e in h.events if isinstance(e, TerminalChunk)]
    assert [c.data for c in chunks] == [b"hel", b"lo\n"]
    assert {c.tool_call_id for c in chunks} == {"call-1"}
    assert text == "Exit code: 0\nhello\n"
    calls = h.calls()
    assert [c.status for c in calls] == DONE
    started = calls[1].content[0]
    assert isinstance(started, TerminalOutput) and started.exit_code is None
    assert chunks[0].terminal_id == started.terminal_id
    final = calls[-1].content[0]
    assert isinstance(final, TerminalOutput)
    assert (final.output, final.exit_code, final.command) == (
        "hello\n",
        0,
        "echo hello",
    )
    assert calls[-1].kind is ToolKind.EXECUTE
    # Recorded as the model asked, but never honoured: the command ran sandboxed.
    assert calls[-1].raw_input["sandbox"] == "unsandboxed"


async def test_shell_nonzero_exit_and_timeouts(h: Harness) -> None:
    h.sandbox.result = CommandResult(2, None, b"boom\n", False, False)
    text = await h.call("run_shell", command="false")
    assert text.startswith("Exit code: 2\n") and h.last().status is ToolStatus.FAILED
    h.sandbox.result = CommandResult(None, 9, b"", False, True)
    text = await h.call("run_shell", command="sleep 999", timeout=9999)
    assert h.sandbox.commands[-1].timeout_s == 600.0
    assert text.startswith("Timed out after 600 s") and h.last().status is ToolStatus.FAILED
    h.sandbox.result = CommandResult(None, 15, b"", False, False)
    text = await h.call("run_shell", command="x")
    assert text.startswith("Killed by signal SIGTERM")
    final = h.last().content[0]
    assert isinstance(final, TerminalOutput) and final.signal == "SIGTERM"


async def test_shell_output_keeps_all_the_sandbox_kept_with_the_cap_marker(h: Harness) -> None:
    big = b"a" * 50_000 + b"END"
    h.sandbox.result = CommandResult(0, None, big, True, False)
    text = await h.call("run_shell", command="yes")
    assert "[output truncated by the sandbox after 262144 bytes]" in text
    assert "a" * 50_000 + "END" in text  # the transcript bounds it later, keeping the whole (app/results.py)


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (SandboxUnavailable("bwrap not found"), "sandbox is unavailable"),
        (SandboxFailed("namespace setup failed"), "sandbox failed to start"),
    ],
)
async def test_shell_fails_closed_without_a_sandbox(h: Harness, error: Exception, needle: str) -> None:
    h.sandbox.error = error
    text = await h.call("run_shell", command="ls", sandbox="unsandboxed")
    assert needle in text and str(error) in text
    assert "did not run" in text
    assert h.statuses() == FAILED_RUN
    assert not h.sandbox.commands


async def test_shell_cwd_must_exist_inside_the_root(h: Harness) -> None:
    missing = await h.call("run_shell", command="ls", cwd="missing")
    assert "not an existing folder" in missing
    outside = await h.call("run_shell", command="ls", cwd=str(h.outside))
    assert "must be inside the workspace root" in outside
    os.symlink(h.outside, h.root / "out")
    via_link = await h.call("run_shell", command="ls", cwd="out")
    assert "must be inside the workspace root" in via_link
    assert not h.sandbox.commands and not h.approver.requests
    assert h.statuses() == [ToolStatus.PENDING, ToolStatus.FAILED] * 3


# --- cancellation ------------------------------------------------------------------------


async def _cancel_when(h: Harness, ready: Callable[[], bool], name: str, **args: object) -> None:
    """Call `name` and cancel it once `ready()` holds: where the call is, not how long it took to get there."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(partial(h.call, name, raw=json.dumps(args)))
        while not ready():
            await anyio.sleep(0.01)
        tasks.cancel_scope.cancel()


async def test_cancel_mid_command_records_cancelled(h: Harness) -> None:
    h.sandbox.hang = True
    h.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)
    await _cancel_when(h, lambda: bool(h.sandbox.commands), "run_shell", command="sleep 100")
    assert h.statuses() == [
        ToolStatus.PENDING,
        ToolStatus.IN_PROGRESS,
        ToolStatus.CANCELLED,
    ]
    assert h.recorded_statuses()[-1] is ToolStatus.CANCELLED


async def test_a_cancel_while_a_finished_edit_is_reported_keeps_it_reported_as_done(h: Harness) -> None:
    """The file was written: the client and the history must say so, not "cancelled"."""
    h.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)
    ctx = h.ctx()
    scope = anyio.CancelScope()

    async def emit(event: SessionEvent) -> None:
        h.events.append(event)
        if isinstance(event, ToolCallChanged) and event.call.status is ToolStatus.COMPLETED:
            scope.cancel()  # the cancel lands while the finished call is being reported
            await anyio.sleep(0)

    ctx = dataclasses.replace(ctx, emit=emit)
    result = None
    with scope:
        result = await h.toolbox.execute(
            ToolCallRequest("call-1", "write_file", json.dumps({"path": "new.txt", "content": "hello"})), ctx
        )
    assert (h.root / "new.txt").read_text() == "hello"
    assert result is not None and "Error" not in result
    assert h.statuses()[-1] is ToolStatus.COMPLETED and ToolStatus.CANCELLED not in h.statuses()
    assert h.recorded_statuses()[-1] is ToolStatus.COMPLETED


async def test_cancel_while_approval_pending_runs_nothing(h: Harness) -> None:
    h.approver.hang = True
    await _cancel_when(h, lambda: bool(h.approver.requests), "run_shell", command="rm -rf build")
    assert not h.sandbox.commands
    assert h.statuses() == [ToolStatus.PENDING, ToolStatus.CANCELLED]
    assert h.recorded_statuses() == [ToolStatus.PENDING, ToolStatus.CANCELLED]
    assert len(h.approver.requests) == 1
