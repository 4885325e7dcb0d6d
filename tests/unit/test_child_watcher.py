"""The entrypoints' loop waits for children through pidfds, not a thread per child (Python 3.11)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator

import anyio
import pytest

from term2.app.entrypoints.child_watcher import use_pidfds

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio uses pidfds itself from 3.12")


@pytest.fixture(autouse=True)
def _default_watcher_afterwards() -> Iterator[None]:
    yield
    asyncio.get_event_loop_policy().set_child_watcher(None)  # the next loop gets the default again


def _threads_while_a_child_runs(pidfds: bool) -> tuple[int, int, int | None]:
    async def main() -> tuple[int, int, int | None]:
        if pidfds:
            assert use_pidfds()
        before = threading.active_count()
        # `cat` runs until its stdin closes: counted while it surely runs, however slow the machine.
        async with await anyio.open_process(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL) as process:
            await anyio.sleep(0)
            during = threading.active_count()
            assert process.stdin is not None
            await process.stdin.aclose()
            await process.wait()
        return before, during, process.returncode

    return anyio.run(main, backend="asyncio")


def test_a_child_costs_no_thread_and_its_exit_is_still_reported() -> None:
    before, during, returncode = _threads_while_a_child_runs(pidfds=True)
    assert during == before
    assert returncode == 0


def test_without_it_asyncio_starts_a_thread_per_child() -> None:
    """What use_pidfds removes: the check above would see this thread."""
    before, during, returncode = _threads_while_a_child_runs(pidfds=False)
    assert during == before + 1
    assert returncode == 0
