"""A new user's machine for issue 31's end-to-end tests: a fresh HOME (no TERM2_HOME, no config, the XDG
defaults), the fake model server, and `term2` run there as a real process."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.llm_server import FakeLLMServer, start_fake_llm

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")


@dataclass
class Fresh:
    """A new user's machine: HOME and nothing else of term2's."""

    home: Path
    root: Path
    llm: FakeLLMServer

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TERM2_", "XDG_", "OPENAI_", "ANTHROPIC_", "HOSTED_VLLM_")) and k not in KEYS
        }
        # Empty counts as unset: the XDG defaults under HOME, even where a helper copies os.environ first.
        env.update(HOME=str(self.home), PYTHONUNBUFFERED="1", XDG_STATE_HOME="", XDG_CONFIG_HOME="", XDG_DATA_HOME="")
        env.update(extra)
        return env

    def keyed(self, **extra: str) -> dict[str, str]:
        """The README's one key, with the OpenAI base URL pointed at the fake server."""
        keys = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": self.llm.base_url + "/v1", **extra}
        return self.env(**keys)

    def term2(
        self, *args: str, env: dict[str, str], stdin: str = "", timeout: float = 90
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "term2", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=self.root,
            timeout=timeout,
            check=False,
            start_new_session=True,
        )

    @property
    def log_file(self) -> Path:
        return self.home / ".local" / "state" / "term2" / "term2.log"

    def stored_sessions(self) -> int:
        db = self.home / ".local" / "share" / "term2" / "sessions.sqlite3"
        if not db.exists():
            return 0
        with sqlite3.connect(db) as conn:
            return int(conn.execute("select count(*) from sessions").fetchone()[0])


def free_port() -> int:
    """A port nobody listens on: bound, then released (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def fresh_home(tmp_path: Path) -> Iterator[Fresh]:
    """HOME and a project under `tmp_path`, with the fake model server running (each module's `fresh` fixture)."""
    home, root = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    with start_fake_llm() as llm:
        yield Fresh(home, root, llm)


def one_error_line(stderr: str, needle: str) -> None:
    """stderr is exactly one line, saying `needle` once, and no traceback."""
    assert "Traceback" not in stderr, stderr
    assert stderr.count(needle) == 1, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def quiet(stderr: str) -> str:
    """stderr less exec's progress lines, which a machine slow enough to keep the fake model waiting 5 s may
    print (ADR 0045, part 3): what is asserted is that nothing else is said."""
    return "".join(line for line in stderr.splitlines(keepends=True) if not line.startswith("term2: waiting for"))
