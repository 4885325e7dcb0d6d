"""Helpers the threat tests share: reading a result, writing a python3 command, making a repository."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from term2.ports.sandbox import CommandResult

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box


def text(result: CommandResult) -> str:
    return result.output.decode(errors="replace")


def py(code: str) -> str:
    """A shell command running ``code`` with python3 inside the sandbox."""
    return "python3 - <<'PYEOF'\n" + textwrap.dedent(code) + "\nPYEOF\n"


def git_repo(box: Box) -> Path:
    """A repository at the workspace root, owned like the workspace."""
    subprocess.run(["git", "init", "-q", str(box.root)], check=True)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    return box.root / ".git"
