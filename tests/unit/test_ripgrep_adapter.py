"""The ripgrep adapter's own guarantees, beyond the port's contract: the view confines rg, and failures are the port's.

The contract suite (tests/contract/test_workspace_search_contract.py) holds it
to the port's answers; these tests check what only the real adapter has: a
read-only view in which even rg told to follow links sees nothing of the host
(ADR 0026), and every way rg can fail to run (no rg, no bwrap, a view bwrap
could not make) reaching the caller as WorkspaceSearchFailed (ADR 0032).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from term2.adapters.workspace import RipgrepWorkspaceSearch, ripgrep
from term2.ports.workspace_search import LineMatch, LineQuery, Walk, WorkspaceSearchFailed

pytestmark = pytest.mark.anyio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A root holding `a.txt`, beside a folder `outside/` holding `victim.txt`."""
    base = Path(os.path.realpath(tmp_path))
    (base / "root").mkdir()
    (base / "outside").mkdir()
    (base / "outside" / "victim.txt").write_text("precious outside\n")
    (base / "root" / "a.txt").write_text("precious inside\n")
    return base / "root"


async def test_the_view_holds_nothing_outside_the_root_even_for_a_followed_link(root: Path) -> None:
    """rg walks by path: a folder swapped for a link mid-walk is confined by the view, not by rg."""
    os.symlink(root.parent / "outside", root / "out")
    place = ripgrep.Place.of(str(root), str(root))
    out = bytearray()

    def feed(chunk: bytes) -> bool:
        out.extend(chunk)
        return True

    finished = await ripgrep.run(["--files", "--follow", *ripgrep.BASE_ARGS], place, str(root), feed)
    assert not finished.stderr.startswith("bwrap") and b"victim" not in out and b"out" not in out
    assert b"a.txt" in out


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


async def test_every_way_rg_cannot_run_is_the_ports_error(root: Path, tmp_path: Path) -> None:
    walk = Walk(str(root), str(root))
    refusing_bwrap = _script(tmp_path / "bwrap", "echo 'bwrap: Creating new namespace failed' >&2\nexit 1\n")
    engines = {
        "is missing": RipgrepWorkspaceSearch(bwrap=str(tmp_path / "no-bwrap")),
        "ripgrep is not installed": RipgrepWorkspaceSearch(rg=str(tmp_path / "no-rg")),
        "bwrap: Creating new namespace failed": RipgrepWorkspaceSearch(bwrap=refusing_bwrap),
    }
    for said, engine in engines.items():
        with pytest.raises(WorkspaceSearchFailed, match=said):
            await engine.files(walk, lambda _: True)
        with pytest.raises(WorkspaceSearchFailed, match=said):
            await engine.lines(walk, LineQuery("precious"), lambda _: True)


async def test_rg_s_own_complaint_is_reported_not_raised(root: Path) -> None:
    taken: list[LineMatch] = []

    def take(match: LineMatch) -> bool:
        taken.append(match)
        return True

    end = await RipgrepWorkspaceSearch().lines(Walk(str(root), str(root)), LineQuery("("), take)
    assert end.complaint is not None and "regex" in end.complaint and not taken


async def test_a_killed_view_takes_the_process_bwrap_was_still_setting_up(root: Path, tmp_path: Path) -> None:
    """A search stopped at once (its time spent, the caller gone) kills bwrap while its child may still be
    setting the view up, before that child has its parent-death signal: killed alone, bwrap left it waiting
    for a parent that would never answer (seen: such children of cancelled searches, asleep under pid 1 for
    over an hour). The stand-in bwrap here forks such a child and waits; the kill must take both."""
    import anyio

    from tests.support.procs import processes_with

    marker = f"{os.getpid()}4242.{int(stat.S_IMODE(os.stat(root).st_mode))}"
    # the child first, then a line: the search has what it needs at that line and kills the view, child born
    stand_in = _script(tmp_path / "bwrap", f"sleep {marker} &\necho ready\nexec sleep {marker}\n")
    place = ripgrep.Place.of(str(root), str(root))
    finished = await ripgrep.run(["--files", *ripgrep.BASE_ARGS], place, str(root), lambda chunk: False, bwrap=stand_in)
    assert finished.stopped == "enough"
    with anyio.fail_after(60):  # the sleeps last 1,000+ s: gone within the guard means they were killed
        while processes_with(marker):
            await anyio.sleep(0.05)
