"""Every approval question is text an editor's JSON parser and a terminal accept (ADR 0034's net).

A lone surrogate reaches a question two ways: the workspace root's own name
is not UTF-8 (`term2 exec` run in `caf\\xe9/`), or a run_code program passes a
name from `os.listdir` inside a command (its `json.dumps` writes `\\udce9`).
The ACP encoder writes such a character as a `\\udce9` escape that a strict
client (serde_json) refuses, so the question never reaches the user; these
tests hold the question to the form the tools show names in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from term2.adapters.acp.approval_bridge import v1_params, v2_params
from term2.app.tools.gate import ESCAPED_NOTE
from term2.domain.workspace import SessionAccess
from term2.ports.approval import ApprovalRequest
from tests.fakes.approvers import REJECTED, FixedApprover
from tests.fakes.sandboxes import CannedSandbox
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio


def _strict_json(request: ApprovalRequest) -> None:
    """What a strict client parses: no lone surrogate anywhere in either protocol version's question."""
    for params in (v1_params(request), v2_params(request)):
        json.dumps(params, ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize(("tool", "args"), [("run_code", {"code": "print(1)"}), ("run_shell", {"command": "ls"})])
async def test_a_command_question_in_a_root_whose_name_is_not_utf8_is_text(
    tmp_path: Path, tool: str, args: dict[str, object]
) -> None:
    base = os.path.realpath(tmp_path)
    root = os.path.join(base, "caf\udce9")
    os.mkdir(root)
    h = Harness(Path(root), Path(base), FixedApprover(REJECTED), CannedSandbox(), SessionAccess(root))

    await h.call(tool, **args)

    (request,) = h.approver.requests
    _strict_json(request)
    assert request.command is not None
    assert request.command.cwd == f"{base}/caf\\xe9"  # the root as the tools show it
    assert "caf\\xe9" in request.title


async def test_a_command_holding_a_name_from_os_listdir_is_asked_about_as_text(tmp_path: Path) -> None:
    h = new_harness(tmp_path)
    h.approver.answer = REJECTED
    # What the bridge hands the toolbox for a run_code program's run_shell call naming os.listdir's name.
    await h.call("run_shell", raw=json.dumps({"command": "cat caf\udce9.txt"}))

    (request,) = h.approver.requests
    _strict_json(request)
    assert request.command is not None
    assert request.command.command == "cat caf\\xe9.txt"
    assert "cat caf\\xe9.txt" in request.title


async def test_a_question_naming_an_escaped_name_says_it_is_escaped(tmp_path: Path) -> None:
    """`a\\\\b/.env` is how the tools show the folder `a\\b`; read literally it is another folder, which a
    repository may hold too, so a question using the escaped form says how to read it."""
    h = new_harness(tmp_path)
    h.approver.answer = REJECTED
    for folder in ("a\\b", "a\\\\b"):  # the real folder, and one named as the first is shown
        (h.root / folder).mkdir()
        (h.root / folder / ".env").write_text("KEY=1\n")
    (h.root / ".env").write_text("KEY=2\n")

    await h.call("read_file", path="a\\\\b/.env")
    await h.call("read_file", path=".env")

    escaped, plain = h.approver.requests
    assert escaped.title == f"Allow reading {h.root}/a\\\\b/.env?"
    assert escaped.description is not None and escaped.description.endswith(ESCAPED_NOTE)
    assert plain.description is not None and "escaped" not in plain.description


async def test_a_command_that_would_lay_out_its_own_question_is_asked_about_visibly(tmp_path: Path) -> None:
    """In an editor that follows Unicode's bidi rules, U+202E … U+2069 make `rm -rf ~` read as something
    else; a terminal obeys ESC. The question writes them out; the command that runs is the model's own."""
    h = new_harness(tmp_path)
    h.approver.answer = REJECTED
    command = "echo ok #\u202e\u2066 ~ fr- mr\u2069\x1b[2K\x9b1A"
    await h.call("run_shell", command=command)

    (request,) = h.approver.requests
    assert request.command is not None
    asked = (request.title, request.description or "", request.command.command, request.tool_call.title)
    for text in asked:
        assert not any(char in text for char in "\u202e\u2066\u2069\x1b\x9b"), text
    assert request.command.command == "echo ok #\\u202e\\u2066 ~ fr- mr\\u2069\\x1b[2K\\x9b1A"
    assert [call.raw_input for call in h.calls()][-1] == {"command": command}  # what was asked to run
