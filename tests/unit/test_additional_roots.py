"""Additional directories (ACP v1 `additionalDirectories`, ADR 0051): each is a root with the rules of `cwd`.

Through the real tools, gate and session use cases, with the canned sandbox and the memory store; the
sandbox's side is tests/sandbox/test_additional_roots.py, the wire's tests/e2e/test_additional_roots_e2e.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.adapters.store.memory_store import InMemorySessionStore
from term2.app.conversation import system_prompt
from term2.app.instructions import ProjectInstructions
from term2.app.sessions import SessionRegistry, SessionService, additional_roots
from term2.app.tools.patch import ApplyPatch
from term2.app.tools.toolbox import WorkspaceToolbox, default_tools
from term2.domain.errors import InvalidInput
from term2.domain.history import ToolStatus
from term2.domain.roots import anchor, holding_root, overlap_reason
from term2.domain.workspace import Access, SessionAccess, Workspace
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


def two_roots(tmp_path: Path) -> tuple[Harness, Path]:
    h = new_harness(tmp_path)
    second = Path(os.path.realpath(tmp_path)) / "second"
    second.mkdir()
    (second / "lib.py").write_text("x = 1\n")
    (second / ".env").write_text("TOKEN=secret\n")
    h.access = SessionAccess(str(h.root), extra_roots=(str(second),))
    return h, second


# --- the rule -------------------------------------------------------------------


def test_each_root_is_judged_as_the_first() -> None:
    ws = Workspace("/p/app", extra_roots=("/p/lib",))
    assert not ws.needs_approval(Access.READ, "/p/lib/x.py")
    assert not ws.needs_approval(Access.EDIT, "/p/lib/x.py")
    assert ws.needs_approval(Access.READ, "/p/lib/.env")
    assert ws.needs_approval(Access.EDIT, "/p/lib/.git/hooks/pre-commit")
    assert ws.needs_approval(Access.EDIT, "/p/lib/sub/AGENTS.md")
    assert ws.needs_approval(Access.READ, "/p/other.txt")  # between the roots: outside both
    assert ws.needs_approval(Access.READ, "/p/library/x.py")  # a name that starts like a root is not in it
    assert ws.needs_approval(Access.EXECUTE, "/p/lib")  # commands ask in every root, as in the first


def test_grants_keep_the_roots() -> None:
    from term2.domain.approval import Choice

    access = SessionAccess("/p/app", extra_roots=("/p/lib",))
    access.grant(Choice.ALLOW_FOLDER_SESSION, "/x/y", "/x", Access.READ)
    assert access.workspace.extra_roots == ("/p/lib",)
    access.reset()
    assert access.workspace.extra_roots == ("/p/lib",)


def test_roots_helpers() -> None:
    assert holding_root("/a/b/c", ("/x", "/a/b")) == "/a/b"
    assert holding_root("/a/bc", ("/a/b",)) is None
    assert anchor("/z/f", "/a", ("/z",)) == "/z" and anchor("/q/f", "/a", ("/z",)) == "/a"
    assert overlap_reason("/a/b", ("/a",)) and overlap_reason("/a", ("/a/b",)) and overlap_reason("/a", ("/a",))
    assert overlap_reason("/ab", ("/a",)) is None


# --- validation -----------------------------------------------------------------


def test_directories_are_checked_as_cwd_is(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tmp_path))
    root, other, afile = base / "root", base / "other", base / "file"
    root.mkdir()
    other.mkdir()
    (root / "inner").mkdir()
    afile.write_text("")
    (base / "link").symlink_to(other)
    assert additional_roots([str(base / "link")], str(root)) == (str(other),)  # canonical, like cwd
    bad: list[tuple[list[object], str]] = [
        (["relative/path"], "must be an absolute path"),
        ([str(base / "missing")], "does not exist"),
        ([str(afile)], "is not a directory"),
        ([7], "must be a non-empty string"),
        (["/"], "cannot be a workspace"),
        ([os.path.expanduser("~")], "cannot be a workspace"),
        ([str(root / "inner")], "is inside"),
        ([str(base)], "holds"),
        ([str(root)], "already a root"),
        ([str(other), str(other)], "already a root"),
        ([str(other)] * 40, "at most"),
    ]
    for directories, message in bad:
        with pytest.raises(InvalidInput, match=message):
            additional_roots(directories, str(root))
    with pytest.raises(InvalidInput, match=r"additionalDirectories\[1\]"):
        additional_roots([str(other), "nope"], str(root))


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_directory_of_another_owner_is_refused(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tmp_path))
    root, other = base / "root", base / "other"
    root.mkdir()
    other.mkdir()
    os.chown(other, 65534, 65534)
    with pytest.raises(InvalidInput, match="belongs to another user"):
        additional_roots([str(other)], str(root))


async def test_sessions_keep_the_list_and_a_reopen_replaces_it(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tmp_path))
    root, lib, docs = base / "root", base / "lib", base / "docs"
    for folder in (root, lib, docs):
        folder.mkdir()
    store = InMemorySessionStore()
    service = SessionService(store, SessionRegistry())
    opened = await service.new(str(root), [str(lib)])
    sid = opened.session.session_id
    assert opened.access.workspace.roots == (str(root), str(lib))
    stored = await store.get(sid)
    assert stored is not None and stored.additional_directories == (str(lib),)
    again = await service.reopen(sid, str(root), [str(docs)])  # the complete list from now on
    assert again is opened and opened.access.workspace.extra_roots == (str(docs),)
    stored = await store.get(sid)
    assert stored is not None and stored.additional_directories == (str(docs),)
    await service.reopen(sid, str(root))  # none named: none active
    assert opened.access.workspace.extra_roots == ()
    with pytest.raises(InvalidInput):
        await service.reopen(sid, str(root), [str(root / "..")])  # holds the root
    assert opened.access.workspace.extra_roots == ()  # a refused reopen changes nothing


# --- tools -----------------------------------------------------------------------


async def test_files_in_a_second_root_are_read_and_edited_without_asking(tmp_path: Path) -> None:
    h, second = two_roots(tmp_path)
    text = await h.call("read_file", path=str(second / "lib.py"))
    assert "x = 1" in text
    await h.call("edit_file", path=str(second / "lib.py"), old_string="x = 1", new_string="x = 2")
    assert (second / "lib.py").read_text() == "x = 2\n"
    await h.call("write_file", path=str(second / "new" / "made.txt"), content="hi\n")
    assert (second / "new" / "made.txt").read_text() == "hi\n"
    assert h.approver.requests == []


async def test_the_second_roots_footholds_and_the_space_between_still_ask(tmp_path: Path) -> None:
    h, second = two_roots(tmp_path)
    (tmp_path / "between.txt").write_text("between\n")
    await h.call("read_file", path=str(second / ".env"))
    await h.call("write_file", path=str(second / "AGENTS.md"), content="steer\n")
    await h.call("write_file", path=str(second / ".git" / "config"), content="x\n")
    await h.call("read_file", path=str(Path(os.path.realpath(tmp_path)) / "between.txt"))
    titles = [r.title for r in h.approver.requests]
    assert len(titles) == 4, titles
    assert "is outside every workspace root" in h.approver.requests[-1].description


async def test_a_command_runs_in_a_second_root_with_every_root_bound(tmp_path: Path) -> None:
    h, second = two_roots(tmp_path)
    await h.call("run_shell", command="true", cwd=str(second))
    (request,) = h.sandbox.commands
    assert request.root == str(second) and request.cwd == str(second)
    assert request.extra_roots == (str(h.root),)
    text = await h.call("run_shell", command="true", cwd=str(h.outside))
    assert "one of the workspace roots" in text and h.last().status is ToolStatus.FAILED
    await h.call("run_code", code="print(1)")
    assert h.sandbox.commands[-1].root == str(h.root) and h.sandbox.commands[-1].extra_roots == (str(second),)


async def test_searches_take_a_second_root_as_their_path(tmp_path: Path) -> None:
    h, second = two_roots(tmp_path)
    (second / "pkg").mkdir()
    (second / "pkg" / "mod.py").write_text("needle = 1\n")
    text = await h.call("grep", pattern="needle", path=str(second))
    # named so that the model can pass the name back: relative paths are the cwd root's
    assert f"{second}/pkg/mod.py:1:needle = 1" in text and h.approver.requests == []
    found = await h.call("glob", pattern="**/*.py", path=str(second))
    assert f"{second}/pkg/mod.py" in found and f"{second}/lib.py" in found
    listed = await h.call("list_dir", path=str(second))
    assert "lib.py" in listed and h.approver.requests == []
    (h.root / "here.py").write_text("needle = 2\n")
    assert "here.py:1:needle = 2" in await h.call("grep", pattern="needle")  # the cwd root's stay relative


async def test_a_patch_changes_one_root_at_a_time(tmp_path: Path) -> None:
    h, second = two_roots(tmp_path)
    h.toolbox = WorkspaceToolbox((*default_tools(), ApplyPatch()))
    (h.root / "a.txt").write_text("a\n")
    patch = (
        f"*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** Update File: {second}/lib.py\n@@\n-x = 1\n+x = 3\n"
        "*** End Patch"
    )
    text = await h.call("apply_patch", input=patch)
    assert "one apply_patch call per root" in text and (h.root / "a.txt").read_text() == "a\n"
    alone = f"*** Begin Patch\n*** Update File: {second}/lib.py\n@@\n-x = 1\n+x = 3\n*** End Patch"
    await h.call("apply_patch", input=alone)
    assert (second / "lib.py").read_text() == "x = 3\n" and h.approver.requests == []


# --- prompt ---------------------------------------------------------------------------


def test_each_root_speaks_from_its_own_repository(tmp_path: Path) -> None:
    base = Path(os.path.realpath(tmp_path))
    root, lib = base / "root", base / "lib"
    root.mkdir()
    lib.mkdir()
    (root / "AGENTS.md").write_text("root rules\n")
    (lib / "AGENTS.md").write_text("lib rules\n")
    text = ProjectInstructions(str(root), extra_roots=(str(lib),)).current()
    assert 'path="AGENTS.md"' in text and "root rules" in text
    assert f'path="{lib}/AGENTS.md"' in text and "lib rules" in text
    instructions = ProjectInstructions(str(root))
    assert "lib rules" not in instructions.current()
    instructions.with_roots((str(lib),))
    assert "lib rules" in instructions.current()


def test_the_system_prompt_lists_the_roots() -> None:
    text = system_prompt("/p/app", (), extra_roots=("/p/lib", "/p/docs"))
    assert "- Workspace root: /p/app\n- Additional workspace roots: /p/lib, /p/docs." in text
    assert "Additional workspace roots" not in system_prompt("/p/app", ())
