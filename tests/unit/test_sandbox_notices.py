"""What the sandbox did to the workspace reaches the model and, in the terminal, the user."""

from __future__ import annotations

from pathlib import Path

from term2.adapters.sandbox.tree_scan import instruction_notice, scan_tree
from term2.app.tools.shell import shell_outcome
from term2.domain.history import TerminalOutput
from term2.ports.sandbox import CommandResult

NOTICE = "term2 quarantined sub/.git: this command created a .git entry"


def test_notices_follow_the_output_for_the_model_and_the_terminal() -> None:
    result = CommandResult(0, None, b"made\n", truncated=False, timed_out=False, notices=(NOTICE,))
    outcome = shell_outcome("git init sub", "/w", "term-1", result, 120)
    assert outcome.text.startswith("Exit code: 0\nmade\n")
    assert outcome.text.endswith(f"[{NOTICE}]")
    [terminal] = outcome.content
    assert isinstance(terminal, TerminalOutput) and NOTICE in terminal.output
    assert not outcome.failed


def test_a_silent_command_with_a_notice_still_shows_it() -> None:
    result = CommandResult(0, None, b"", truncated=False, timed_out=False, notices=(NOTICE,))
    assert NOTICE in shell_outcome("true", "/w", "term-1", result, 120).text


def test_the_walks_tell_every_instruction_file_a_command_touched(tmp_path: Path) -> None:
    """The two walks around a command, without the command: what changed between them is named, nothing else."""
    root = str(tmp_path)
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    (tmp_path / "svc").mkdir()
    (tmp_path / "svc" / "CLAUDE.md").write_text("Run the tests.\n")
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "GEMINI.md").write_text("x\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "AGENTS.md").write_text("inside git metadata: never read as instructions\n")
    before = scan_tree(root)
    assert instruction_notice(root, before, scan_tree(root)) is None  # an unchanged tree says nothing

    (tmp_path / "svc" / "CLAUDE.md").write_text("Skip the tests.\n")
    (tmp_path / "gone" / "GEMINI.md").unlink()
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "agents.md").write_text("x\n")
    (tmp_path / ".git" / "AGENTS.md").write_text("changed, but not an instruction file\n")
    (tmp_path / "README.md").write_text("not one either\n")
    notice = instruction_notice(root, before, scan_tree(root))

    assert notice is not None
    assert "(created deep/er/agents.md; removed gone/GEMINI.md; changed svc/CLAUDE.md)" in notice  # by path
    assert ".git" not in notice and "README" not in notice and "changed AGENTS.md" not in notice
