"""The system prompt, pinned: any change to its text shows up as a diff of a committed snapshot.

The prompt is prose the model acts on; a change to it changes term2's
behaviour, so it must be a reviewed change. To accept an intended one, run
`TERM2_UPDATE_SNAPSHOTS=1 uv run --frozen pytest tests/unit/test_system_prompt.py`
and commit the rewritten snapshot with the change.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path

from term2.app.conversation import render_system_prompt, system_prompt
from term2.app.instructions import ProjectInstructions
from term2.app.tools import WorkspaceToolbox
from term2.domain.instructions import InstructionFile, render_instructions

SNAPSHOT = Path(__file__).parent / "snapshots" / "system_prompt.md"
UPDATE = "TERM2_UPDATE_SNAPSHOTS=1 uv run --frozen pytest tests/unit/test_system_prompt.py"


def pinned_prompt() -> str:
    instructions = render_instructions(
        [
            InstructionFile("AGENTS.md", b"# Conventions\n\nRun `make test` before you finish.\n"),
            InstructionFile("services/api/AGENTS.md", b"This service uses tabs.\n"),
        ]
    )
    return render_system_prompt(
        root="/home/dev/project/services/api",
        platform_name="Linux x86_64",
        today="2026-01-02",
        tools=WorkspaceToolbox().specs(),
        instructions=instructions,
    )


def test_the_rendered_prompt_matches_its_snapshot() -> None:
    rendered = pinned_prompt()
    if os.environ.get("TERM2_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(rendered, encoding="utf-8")
    expected = SNAPSHOT.read_text(encoding="utf-8")
    assert rendered == expected, (
        f"the rendered system prompt differs from {SNAPSHOT.relative_to(Path(__file__).parents[2])}. "
        f"If the change is intended, run `{UPDATE}`, review `git diff` and commit the snapshot."
    )


def test_the_live_prompt_fills_in_this_machine_and_today() -> None:
    specs = WorkspaceToolbox().specs()
    prompt = system_prompt("/work/p", specs)
    assert "- Workspace root: /work/p\n" in prompt
    assert f"- Platform: {platform.system()} {platform.machine()}\n" in prompt
    assert f"- Today's date: {date.today().isoformat()}\n" in prompt
    assert f"- Tools in this session: {', '.join(s.name for s in specs)}\n" in prompt
    assert "Project instructions" not in prompt  # no section at all without files


def test_the_prompt_explains_every_tool() -> None:
    """The prompt teaches each tool by name: a renamed or new tool must be taught too."""
    prompt = SNAPSHOT.read_text(encoding="utf-8")
    names = {s.name for s in WorkspaceToolbox().specs()}
    for name in names:
        assert f"`{name}`" in prompt, f"the prompt never explains {name}"


def term2_prompt(folder: Path, config: Path, level: str = "debug") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
    env.update(TERM2_LOG_LEVEL=level, XDG_CONFIG_HOME=str(config))
    result = subprocess.run(
        [sys.executable, "-m", "term2", "prompt", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_term2_prompt_prints_what_a_session_there_would_start_with(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("root rule\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "AGENTS.md").write_text("sub rule\n")
    result = term2_prompt(tmp_path / "sub", tmp_path / "config")
    root = os.path.realpath(tmp_path / "sub")
    assert result.stdout == system_prompt(root, WorkspaceToolbox().specs(), ProjectInstructions(root).current())
    assert '<project_instructions path="sub/AGENTS.md">\nsub rule\n' in result.stdout
    assert "instructions read" in result.stderr  # the log goes to stderr, never into the printed prompt


def test_term2_prompt_names_what_it_ignored_and_why(tmp_path: Path) -> None:
    """A repository in a folder every user may write to (as /tmp) is not the user's: left out, and said so."""
    shared = tmp_path / "shared"
    (shared / ".git").mkdir(parents=True)
    (shared / "AGENTS.md").write_text("PLANTED rule\n")
    (shared / "project").mkdir()
    (shared / "project" / "AGENTS.md").write_text("project rule\n")
    shared.chmod(0o1777)
    result = term2_prompt(shared / "project", tmp_path / "config", level="error")
    assert "PLANTED" not in result.stdout
    assert '<project_instructions path="AGENTS.md">\nproject rule\n' in result.stdout
    marker = os.path.realpath(shared / ".git")
    expected = (
        f"term2: project instructions: ignored {marker} (repository marker): its folder is writable by every user"
    )
    assert expected in result.stderr.splitlines()


def test_run_shell_and_run_code_tell_the_model_a_env_written_while_they_run_is_readable() -> None:
    """Issue 30, item 5: the masks are fixed when bwrap starts; the window is named where the model reads it."""
    specs = {s.name: s.description for s in WorkspaceToolbox().specs()}
    for name in ("run_shell", "run_code"):
        assert "one written while it runs (by the user or another program) is readable by it" in specs[name]
