"""grep, glob and list_dir on the workspace search port: what the tools decide, over the in-memory adapter.

The walk is the adapter's (its contract suite holds both adapters to git's
answers); what is checked here is the tools' side of ADR 0032: a walk that
cannot run fails the call plainly (never an internal error, never a walk
without its confinement), a toolbox built without an engine fails closed,
results past what is sorted here are asked for in order, and secrets are
skipped, counted by a walk of secrets alone, or searched only under a grant.
The folders exist on disk too: the workspace rule and the descriptor check
of the top act on the disk, the walk on the tree.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.tools import WorkspaceToolbox, search_walks
from term2.app.tools.listing import Glob, ListDir
from term2.app.tools.search import Grep
from term2.domain.approval import Choice
from term2.domain.history import ToolStatus
from term2.domain.workspace import Access, SessionAccess
from term2.ports.workspace_search import Secrets
from tests.fakes.approvers import FixedApprover
from tests.fakes.sandboxes import CannedSandbox
from tests.fakes.workspace_search import MemoryTree, MemoryWorkspaceSearch
from tests.unit.test_tools import Harness

pytestmark = pytest.mark.anyio


def _harness(tmp_path: Path, search: MemoryWorkspaceSearch | None, **limits: int) -> Harness:
    root = Path(os.path.realpath(tmp_path)) / "root"
    (root / "sub").mkdir(parents=True)
    tools = (ListDir(search), Glob(search, **limits), Grep(search, **limits))
    h = Harness(root, root.parent, FixedApprover(), CannedSandbox(), SessionAccess(str(root)))
    h.toolbox = WorkspaceToolbox(tools)
    return h


def _memory(root: str, files: dict[str, bytes], **kw: bool) -> MemoryWorkspaceSearch:
    entries: dict[str, bytes | None] = {os.path.join(root, ".git"): None, os.path.join(root, "sub"): None}
    entries |= {os.path.join(root, rel): data for rel, data in files.items()}
    return MemoryWorkspaceSearch(MemoryTree.of(entries), **kw)


@pytest.mark.parametrize(
    ("tool", "args", "said"),
    [
        ("grep", {"pattern": "needle"}, "the search of . could not run"),
        ("grep", {"pattern": "needle", "path": "sub/a.txt"}, "the search of sub/a.txt could not run"),
        ("glob", {"pattern": "*.txt"}, "glob could not run"),
        ("list_dir", {}, "the entries of . git ignores could not be found"),
    ],
)
async def test_a_walk_that_cannot_run_fails_the_call_plainly(
    tmp_path: Path, tool: str, args: dict[str, str], said: str
) -> None:
    h = _harness(tmp_path, None)
    (h.root / "sub" / "a.txt").write_text("needle\n")
    h.toolbox = WorkspaceToolbox(
        (ListDir(broken := _memory(str(h.root), {}, available=False)), Glob(broken), Grep(broken))
    )
    text = await h.call(tool, **args)
    assert said in text and "unexpectedly" not in text
    assert h.last().status is ToolStatus.FAILED


async def test_a_toolbox_built_without_a_search_engine_fails_closed(tmp_path: Path) -> None:
    h = _harness(tmp_path, None)
    h.toolbox = WorkspaceToolbox()
    for tool, args in (("grep", {"pattern": "x"}), ("glob", {"pattern": "*"}), ("list_dir", {})):
        (h.root / "a.txt").write_text("x\n")
        text = await h.call(tool, **args)
        assert "built without a workspace search" in text and h.last().status is ToolStatus.FAILED


async def test_past_what_is_sorted_here_the_tools_ask_for_the_walk_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_walks, "SORT_HERE", 1)
    h = _harness(tmp_path, None)
    files = {name: b"needle\n" for name in ("e.txt", "d.txt", "c.txt", "b.txt", "a.txt")}
    search = _memory(str(h.root), files)
    h.toolbox = WorkspaceToolbox((Glob(search, limit=2), Grep(search, limit=2)))
    text = await h.call("glob", pattern="*.txt")
    assert text.splitlines()[:2] == ["a.txt", "b.txt"] and "files after b.txt were left out" in text
    assert [w.ordered for w in search.walks] == [False, True]
    text = await h.call("grep", pattern="needle")
    assert text.splitlines()[:2] == ["a.txt:1:needle", "b.txt:1:needle"]
    assert "matches after b.txt:1 were left out" in text
    ordered = [w.ordered for w in search.walks[2:] if w.secrets is not Secrets.ONLY]
    assert ordered == [False, True]


async def test_secrets_are_skipped_and_counted_or_searched_under_a_grant(tmp_path: Path) -> None:
    h = _harness(tmp_path, None)
    files = {"a.py": b"KEY\n", ".env": b"KEY=1\n", "sub/.env": b"KEY=2\n", "sub/.env.local": b"KEY=3\n"}
    search = _memory(str(h.root), files)
    h.toolbox = WorkspaceToolbox((Grep(search),))
    text = await h.call("grep", pattern="KEY")
    assert text == "a.py:1:KEY\n[3 secret files (.env) skipped; read_file asks before reading them]\n"
    assert sorted(w.secrets.value for w in search.walks) == ["only", "skip"]  # never read, only counted
    search.walks.clear()
    h.access.grant(Choice.ALLOW_FOLDER_SESSION, str(h.root / "sub" / "x"), str(h.root / "sub"), Access.READ)
    text = await h.call("grep", pattern="KEY")
    assert text.splitlines() == [
        "a.py:1:KEY",
        "sub/.env:1:KEY=2",
        "sub/.env.local:1:KEY=3",
        "[1 secret files (.env) skipped; read_file asks before reading them]",
    ]
    assert sorted(w.secrets.value for w in search.walks) == ["include", "only"]
