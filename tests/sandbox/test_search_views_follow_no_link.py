"""A kept search view follows no symlink, so nothing can redirect rg to a secret (issue 30, item 3 (a)).

rg opens every file by a path: a file named to it, or a name it listed in a
walk. Anything running beside term2 (a command, a run_code program) can put a
link under that name just before the open, and a view made before a `.env`
appeared cannot have masked it. The server of a kept view makes every mount
of the view follow no link (MOUNT_ATTR_NOSYMFOLLOW) before it serves, then
drops the capabilities that took. These tests put the link in place before
rg runs (what the race would do at its luckiest: no timing involved), to a
`.env` made after the view, and rg is even told to follow links. On the code
before, both returned the secret.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from term2.adapters.workspace import RipgrepWorkspaceSearch, ripgrep, ripgrep_search, view_server_process
from term2.ports.workspace_search import Walk, WalkEnd, WorkspaceSearchFailed
from tests.sandbox.test_kept_search_views import _blocking_tree, _rg_running, _servers

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not os.path.exists(ripgrep.BWRAP), reason="needs bubblewrap")]

SECRET = b"sk-late-secret"


@pytest.fixture
async def search() -> AsyncIterator[RipgrepWorkspaceSearch]:
    adapter = RipgrepWorkspaceSearch(kept=True)
    yield adapter
    await adapter.aclose()


@pytest.fixture(params=["kept", "per-call"])
async def either(request: pytest.FixtureRequest) -> AsyncIterator[RipgrepWorkspaceSearch]:
    adapter = RipgrepWorkspaceSearch(kept=request.param == "kept")
    yield adapter
    await adapter.aclose()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    base = Path(os.path.realpath(tmp_path))
    monkeypatch.setenv("HOME", str(base / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "xdg"))
    (base / "ws" / "src").mkdir(parents=True)
    (base / "ws" / "src" / "x.txt").write_text("TOKEN=public\n")
    return base / "ws"


async def _rg(search: RipgrepWorkspaceSearch, root: Path, top: Path, *args: str) -> bytes:
    """rg as the adapter runs it: through the kept view, or in a per-call view when it keeps none."""
    out = bytearray()
    place = ripgrep.Place.of(str(top), str(root))
    run = ripgrep.run if search.views is None else search.views.run
    finished = await run([*args, *ripgrep.BASE_ARGS], place, str(root), lambda chunk: out.extend(chunk) or True)
    assert finished.view_failure() is None, finished.stderr
    return bytes(out)


async def test_a_view_shows_no_env_made_after_it_through_any_link(either: RipgrepWorkspaceSearch, root: Path) -> None:
    """Kept: the view was made before the .env. Per-call (the fall-back a run_code program can force,
    with a pattern past the kept view's request limit): made after it, but as unmasked."""
    search = either
    found: list[bytes] = []
    assert await search.files(Walk(str(root), str(root)), lambda p: found.append(p) or True) == WalkEnd()
    made = _servers(search) if search.views is not None else None
    assert made != [] and found == [b"src/x.txt"], "the view was not kept"
    (root / "late").mkdir()
    (root / "late" / ".env").write_bytes(b"TOKEN=" + SECRET + b"\n")  # after the view was made
    os.replace(root / "src" / "x.txt", root / "src" / "x.old")
    os.symlink("../late/.env", root / "src" / "x.txt")  # a swap, landed just before rg's open
    os.symlink("late", root / "dir-link")

    skip = [*ripgrep_search.SECRET_TYPE, "--type-not", "secret"]  # as the adapter walks: secrets by name
    line_args = [*ripgrep_search.LINE_ARGS, "-e", "TOKEN"]
    named = await _rg(search, root, root / "src" / "x.txt", *line_args)
    walked = await _rg(search, root, root, "--follow", "--no-ignore", *skip, *line_args)
    listed = await _rg(search, root, root, "--files", "--follow", "--no-ignore", *skip)

    if made is not None:
        assert _servers(search) == made, "the calls did not go through the view made before the .env"
    assert SECRET not in named + walked
    assert b".env" not in listed and b"dir-link" not in listed


async def test_rg_in_a_kept_view_holds_no_capability_to_mount(search: RipgrepWorkspaceSearch, root: Path) -> None:
    """The server needs CAP_SYS_ADMIN (and CAP_SETPCAP) for a moment; rg must never have them."""
    _blocking_tree(root)  # rg blocks on a FIFO: it is there to be looked at
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(search.files, Walk(str(root), str(root)), lambda _: True)
        with anyio.fail_after(10):
            while not (_servers(search) and _rg_running(_servers(search)[0])):
                await anyio.sleep(0.02)
        [rg] = _rg_running(_servers(search)[0])
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{rg}/status").read_text().splitlines())
        tasks.cancel_scope.cancel()
    for field in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"):
        held = int(status[field], 16)
        assert not held & (1 << 21) and not held & (1 << 8), (field, status[field])


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "per-call"])
async def test_a_view_that_cannot_be_made_linkless_fails_the_search_closed(
    kept: bool, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old kernel (no mount_setattr), a refused capability: the server says `E`, the per-call view
    `term2 view: ...`, and the search fails with the port's error; rg never runs in a view that
    follows links. So does a view program that dies before rg (a traceback, not "no match")."""
    real = ripgrep.VIEW_PROGRAM.read_text()
    stand_in = 'def no_link_followed() -> None:\n    raise OSError(1, "mount_setattr: refused here")\n\n\n'
    refused = real.replace('if __name__ == "__main__":', stand_in + 'if __name__ == "__main__":')
    assert refused != real
    for source, said in ((refused, "refused here"), ("import no_such_module\n", "no_such_module")):
        program = tmp_path / "view.py"
        program.write_text(source)
        monkeypatch.setattr(ripgrep, "VIEW_PROGRAM", program)
        monkeypatch.setattr(view_server_process, "SERVER_SOURCE", program)
        search = RipgrepWorkspaceSearch(kept=kept)
        try:
            with pytest.raises(WorkspaceSearchFailed, match=said):
                await search.files(Walk(str(root), str(root)), lambda _: True)
            assert not _servers(search) if kept else search.views is None
        finally:
            await search.aclose()
