"""`term2 exec "prompt"` started with a pipe on stdin that is never written or closed (ADR 0029).

An agent's shell tool or a CI step often hands its children such a pipe.
Reading what is piped beside a prompt until its end would then wait
forever, silently (as `codex exec` does in that case, where every caller
learns to add `< /dev/null`); term2 goes on with the prompt alone after a
short wait and says so on stderr.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.exec_process import exec_env

HANG_GUARD_S = 90.0  # far past the wait term2 allows itself: only a hang reaches it


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with start_fake_llm() as server:
        yield server


def test_a_pipe_never_written_or_closed_does_not_hold_the_turn(tmp_path: Path, llm: FakeLLMServer) -> None:
    root = tmp_path / "project"
    root.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "term2", "exec", "review this"],
        stdin=subprocess.PIPE,  # held open by this test and never written
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=exec_env(tmp_path / "term2-home", llm_env(llm)),
        cwd=root,
        start_new_session=True,
    )
    try:
        status = proc.wait(timeout=HANG_GUARD_S)
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout.read().decode(), proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()
    assert status == 0, stderr
    assert stdout == "echo: review this\n"
    assert "stdin is a pipe that gave nothing within" in stderr and "< /dev/null" in stderr
