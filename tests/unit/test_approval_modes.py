"""The approval modes' rule (ADR 0044), as a table: every kind of call × every mode.

Two tables: the domain rule (`verdict`) over every call kind and both answers of
the workspace rule, and the gate's judgement of real tools' prepared calls
(read, search, edits inside and on every foothold, commands with and without
network, a program, an MCP call). What they show: `auto` skips no question but a
no-network sandboxed command's or program's, and `read-only` refuses whatever
could change something, before anyone is asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from term2.app.tools.base import Invocation, Outcome, RemoteCall
from term2.app.tools.edit import EditFile, WriteFile
from term2.app.tools.gate import call_kind, judged, needs_approval
from term2.app.tools.paths import canonical_root
from term2.app.tools.plan import UpdatePlan
from term2.app.tools.read import ReadFile
from term2.app.tools.run_code import RunCode
from term2.app.tools.shell import RunShell
from term2.domain.approval import ApprovalMode, CallKind, Verdict, approval_mode, verdict
from term2.domain.workspace import Access, Workspace
from term2.ports.tools import ToolContext
from tests.support.toolboxes import workspace_toolbox

ASK, AUTO, RO = ApprovalMode.ASK, ApprovalMode.AUTO, ApprovalMode.READ_ONLY
RUN, Q, NO = Verdict.RUN, Verdict.ASK, Verdict.REFUSE

# kind, asked by the workspace rule -> verdict in ask, auto, read-only
DOMAIN_TABLE: list[tuple[CallKind, bool, tuple[Verdict, Verdict, Verdict]]] = [
    (CallKind.READ, False, (RUN, RUN, RUN)),
    (CallKind.READ, True, (Q, Q, Q)),  # outside the root, .env: asked in every mode
    (CallKind.EDIT, False, (RUN, RUN, NO)),
    (CallKind.EDIT, True, (Q, Q, NO)),  # .git, AGENTS.md, .env, outside: auto still asks
    (CallKind.SANDBOXED, False, (RUN, RUN, NO)),  # a folder granted for commands
    (CallKind.SANDBOXED, True, (Q, RUN, NO)),  # the one question auto skips
    (CallKind.NETWORK, False, (RUN, RUN, NO)),  # (the rule always asks a network command: never False)
    (CallKind.NETWORK, True, (Q, Q, NO)),
    (CallKind.REMOTE, False, (RUN, RUN, NO)),  # (likewise, an MCP call is always asked)
    (CallKind.REMOTE, True, (Q, Q, NO)),
    (CallKind.OTHER, False, (RUN, RUN, NO)),
    (CallKind.OTHER, True, (Q, Q, NO)),
]


@pytest.mark.parametrize(("kind", "asked", "expected"), DOMAIN_TABLE)
def test_domain_rule_table(kind: CallKind, asked: bool, expected: tuple[Verdict, Verdict, Verdict]) -> None:
    assert tuple(verdict(mode, kind, asked=asked) for mode in (ASK, AUTO, RO)) == expected


def test_the_table_covers_every_kind_and_auto_skips_only_a_sandboxed_question() -> None:
    assert {(k, a) for k, a, _ in DOMAIN_TABLE} == {(k, a) for k in CallKind for a in (False, True)}
    skipped = [(k, a) for k in CallKind for a in (False, True) if verdict(AUTO, k, asked=a) != verdict(ASK, k, asked=a)]
    assert skipped == [(CallKind.SANDBOXED, True)]
    # read-only never turns a question or a refusal into a run
    for kind in CallKind:
        for asked in (False, True):
            if verdict(ASK, kind, asked=asked) is not RUN:
                assert verdict(RO, kind, asked=asked) is not RUN


def test_stored_modes_and_unknown_ones() -> None:
    assert [approval_mode(v) for v in ("ask", "auto", "read-only")] == [ASK, AUTO, RO]
    assert approval_mode(None) is ASK and approval_mode("full-access") is ASK  # unknown: the one that asks


async def _never(_ctx: ToolContext, _call_id: str) -> Outcome:
    raise AssertionError("judging a call must not run it")


def _mcp_call(root: str) -> Invocation:
    remote = RemoteCall("files", "delete_everything", "{}")
    return Invocation("MCP", Access.CALL, root, root, (), _never, remote=remote)


# name, how to prepare it -> (kind, verdict in ask, auto, read-only)
def _tool_table(root: str) -> list[tuple[str, Invocation, CallKind, tuple[Verdict, Verdict, Verdict]]]:
    def prep(tool: Any, **args: Any) -> Invocation:
        invocation: Invocation = tool.prepare(args, root)
        return invocation

    run_code = RunCode(workspace_toolbox())
    return [
        ("read a file", prep(ReadFile(), path="notes.txt"), CallKind.READ, (RUN, RUN, RUN)),
        ("read .env", prep(ReadFile(), path=".env"), CallKind.READ, (Q, Q, Q)),
        ("read outside", prep(ReadFile(), path="/etc/hostname"), CallKind.READ, (Q, Q, Q)),
        ("update the plan", prep(UpdatePlan(), entries=[]), CallKind.READ, (RUN, RUN, RUN)),
        ("write inside", prep(WriteFile(), path="new.txt", content="x"), CallKind.EDIT, (RUN, RUN, NO)),
        (
            "edit inside",
            prep(EditFile(), path="notes.txt", old_string="a", new_string="b"),
            CallKind.EDIT,
            (RUN, RUN, NO),
        ),
        ("write .env", prep(WriteFile(), path=".env", content="x"), CallKind.EDIT, (Q, Q, NO)),
        ("write .git", prep(WriteFile(), path=".git/hooks/pre-commit", content="x"), CallKind.EDIT, (Q, Q, NO)),
        ("write AGENTS.md", prep(WriteFile(), path="AGENTS.md", content="x"), CallKind.EDIT, (Q, Q, NO)),
        ("write outside", prep(WriteFile(), path="/tmp/t2-outside.txt", content="x"), CallKind.EDIT, (Q, Q, NO)),
        ("command", prep(RunShell(), command="pytest"), CallKind.SANDBOXED, (Q, RUN, NO)),
        ("program", prep(run_code, code="print(1)"), CallKind.SANDBOXED, (Q, RUN, NO)),
        (
            "command with network",
            prep(RunShell(), command="pip download x", network=["pypi.org"]),
            CallKind.NETWORK,
            (Q, Q, NO),
        ),
        ("program with network", prep(run_code, code="1", network=["example.com"]), CallKind.NETWORK, (Q, Q, NO)),
        ("MCP call", _mcp_call(root), CallKind.REMOTE, (Q, Q, NO)),
    ]


def test_gate_table_over_real_tools(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("a\n")
    (tmp_path / ".git").mkdir()
    root = canonical_root(str(tmp_path))
    workspace = Workspace(root)
    for name, invocation, kind, expected in _tool_table(root):
        assert call_kind(invocation, (root,)) is kind, name
        got = tuple(judged(invocation, workspace, mode)[0] for mode in (ASK, AUTO, RO))
        assert got == expected, name
        asked = [needs_approval(invocation, workspace, mode) for mode in (ASK, AUTO, RO)]
        assert asked == [v is Q for v in expected], name
