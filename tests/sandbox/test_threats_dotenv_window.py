"""The residual of issue 30, item 5, stated as a test: masks are fixed when a command starts.

A `.env` present when bwrap starts is masked (test_threats.test_read_dotenv);
one the user or another program writes while the command runs is readable by
that command until it ends. ADR 0039 says why the window stays open and
docs/security.md and the run_shell/run_code descriptions name it; this test
fails the day it is closed, so the docs are changed with it.
"""

from __future__ import annotations

import anyio
import pytest

from tests.sandbox.commands import text
from tests.sandbox.conftest import Box

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


async def test_a_env_written_while_a_command_runs_is_readable_by_it(box: Box) -> None:
    box.write(box.root / ".env", f"EARLY=sk-early-{box.tag}\n")
    command = "touch started; while [ ! -e written ]; do sleep 0.01; done; cat .env late.env/.env 2>&1; true"
    box.make_dir(box.root / "late.env")
    results = []

    async def run() -> None:
        results.append(await box.run(command, timeout_s=30))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        while not (box.root / "started").exists():
            await anyio.sleep(0.01)
        box.write(box.root / "late.env" / ".env", f"LATE=sk-late-{box.tag}\n")
        box.write(box.root / "written", "")
    output = text(results[0])
    assert f"sk-early-{box.tag}" not in output  # masked: it was there when bwrap started
    assert f"sk-late-{box.tag}" in output  # the window: made after, not masked
