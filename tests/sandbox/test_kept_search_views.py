"""Kept search views (ADR 0037): a server in the workspace's view starts rg for each search.

What only the kept view has, beyond the port's contract (which the contract
suite runs through it too): its jail hides the interpreter's files even from
rg told to follow a link; what the view was made of changing ends its server;
every bound and cancel kills the rg it started, and nothing is left running;
a server that dies or cannot start sends the call to a per-call view; two
searches share one server at once.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from term2.adapters.workspace import RipgrepWorkspaceSearch, ripgrep, view_server_process
from term2.ports.workspace_search import LineMatch, LineQuery, Walk, WalkEnd

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(not os.path.exists(ripgrep.BWRAP), reason="needs bubblewrap")]


@pytest.fixture
async def search() -> AsyncIterator[RipgrepWorkspaceSearch]:
    adapter = RipgrepWorkspaceSearch(kept=True)
    yield adapter
    await adapter.aclose()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose session folder `app/sess` lies below its top, with a `.gitignore` above it."""
    base = Path(os.path.realpath(tmp_path))
    monkeypatch.setenv("HOME", str(base / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "xdg"))
    top = base / "repo"
    (top / ".git" / "info").mkdir(parents=True)
    (top / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (top / "app" / "sess").mkdir(parents=True)
    (top / ".gitignore").write_text("*.log\n")
    for name in ("a.py", "b.log", "c.tmp"):
        (top / "app" / "sess" / name).write_text("needle\n")
    return top / "app" / "sess"


def _all(found: list[bytes]) -> Callable[[bytes], bool]:
    def take(path: bytes) -> bool:
        found.append(path)
        return True

    return take


async def _files(search: RipgrepWorkspaceSearch, root: Path, **kw: object) -> set[bytes]:
    found: list[bytes] = []
    end = await search.files(Walk(str(root), str(root), **kw), _all(found))  # type: ignore[arg-type]
    assert end == WalkEnd()
    return set(found)


GUARD = 120  # seconds: a guard against a hang only; every wait ends on what it waits for


def _servers(search: RipgrepWorkspaceSearch) -> list[int]:
    assert search.views is not None
    return [server.pid for server in search.views.servers]


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (zombies left out: they run nothing)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _rg_running(pid: int) -> list[int]:
    running = []
    for child in _descendants(pid):
        try:
            argv0 = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            continue
        if argv0 == b"/.term2/rg":
            running.append(child)
    return running


async def _no_rg_left(pid: int) -> None:
    with anyio.fail_after(GUARD):
        while _rg_running(pid):
            await anyio.sleep(0.02)


def _blocking_tree(root: Path) -> None:
    """Enough names that rg's output reaches us, and a FIFO as an ignore file that rg then blocks on."""
    for n in range(400):
        (root / f"file-with-a-rather-long-name-{n:04}.txt").write_text("needle\n")
    (root / "zz").mkdir()
    os.mkfifo(root / "zz" / ".gitignore")


@pytest.fixture
def per_call(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tops of the searches that ran in a per-call view."""
    calls: list[str] = []
    real = ripgrep.run

    async def run(args: list[str], place: ripgrep.Place, *rest: object, **kw: object) -> ripgrep.Finished:
        calls.append(place.top)
        return await real(args, place, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ripgrep, "run", run)
    return calls


# --- the jail -------------------------------------------------------------------------------


async def test_the_jail_hides_the_interpreters_files_even_from_a_followed_link(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str]
) -> None:
    """The server needs /usr and the interpreter's prefix; rg, chrooted, must reach neither."""
    for name, target in (("usr", "/usr"), ("prefix", os.path.realpath(sys.base_prefix))):
        os.symlink(target, repo / name)
    assert search.views is not None
    place = ripgrep.Place.of(str(repo), str(repo))
    out = bytearray()
    args = ["--files", "--follow", "--no-ignore", *ripgrep.BASE_ARGS]
    finished = await search.views.run(args, place, str(repo), lambda chunk: out.extend(chunk) or True)
    assert _servers(search) and per_call == [], "the call did not go through a kept view"
    assert sorted(out.split(b"\0")[:-1]) == [b"app/sess/a.py", b"app/sess/b.log", b"app/sess/c.tmp"]
    assert finished.stopped is None


_UNPRIVILEGED = 65534
_UNPRIVILEGED_SEARCH = textwrap.dedent(
    """
    import json, os, sys, anyio
    from term2.adapters.workspace import RipgrepWorkspaceSearch, ripgrep
    from term2.ports.workspace_search import Walk

    async def main(root, rg):
        per_call = []
        real = ripgrep.run

        async def counted(args, place, *rest, **kw):
            per_call.append(place.top)
            return await real(args, place, *rest, **kw)

        ripgrep.run = counted
        search = RipgrepWorkspaceSearch(rg=rg, kept=True)
        try:
            found = []
            await search.files(Walk(root, root), lambda path: found.append(os.fsdecode(path)) or True)
            out = bytearray()
            args = ["--files", "--follow", "--no-ignore", *ripgrep.BASE_ARGS]
            place = ripgrep.Place.of(root, root)
            finished = await search.views.run(args, place, root, lambda chunk: out.extend(chunk) or True, rg=rg)
            alone = bytearray()  # a per-call view, as this user makes it (ADR 0039)
            single = await real(args, place, root, lambda chunk: alone.extend(chunk) or True, rg=rg)
            roots = {}
            for server in search.views.servers:
                for pid in os.listdir("/proc"):
                    try:
                        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
                        if argv[1:4] == [b"-I", b"-S", b"-c"] and b"/.term2/jail" in argv:
                            roots[pid] = os.readlink(f"/proc/{pid}/root")
                    except (OSError, IndexError):
                        continue
            said = {
                "uid": os.geteuid(), "servers": len(search.views.servers), "per_call": per_call, "found": found,
                "followed": sorted(os.fsdecode(p) for p in bytes(out).split(b"\\0")[:-1]),
                "stopped": finished.stopped, "roots": roots,
                "alone": sorted(os.fsdecode(p) for p in bytes(alone).split(b"\\0")[:-1]),
                "alone_failed": single.view_failure(),
            }
            print("RESULT " + json.dumps(said))
        finally:
            await search.aclose()

    anyio.run(main, *sys.argv[1:])
    """
)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder another user can reach (pytest's own are root's alone)."""
    folder = Path(os.path.realpath(tempfile.mkdtemp(prefix="term2-kept-")))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def _reachable_by_others(path: str) -> bool:
    """Whether a user other than root can reach `path` (every folder above it searchable by others)."""
    folder = os.path.dirname(path)
    while folder != "/":
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return False
        folder = os.path.dirname(folder)
    return bool(os.stat(path).st_mode & stat.S_IXOTH)


def _unprivileged_interpreter() -> str | None:
    """This interpreter when another user can run it by its real path, else the system's of the same version."""
    for python in (os.path.realpath(sys.executable), f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        if os.path.exists(python) and _reachable_by_others(python):
            return python
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="runs term2 as another, unprivileged, user, which takes root to arrange")
async def test_unprivileged_the_server_chroots_in_its_user_namespace_and_serves(outside: Path) -> None:
    """Most users run term2 unprivileged: bwrap then gives CAP_SYS_CHROOT only inside a user namespace.
    The kept server must still chroot and serve (not leave every call to a per-call view), and rg, told
    to follow links, must not reach the /usr the server's view holds."""
    python = _unprivileged_interpreter()
    if python is None:
        pytest.skip("no interpreter of this version that an unprivileged user can run")
    root = outside / "ws"
    (root / ".git").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / ".gitignore").write_text("*.log\n")
    (root / "a.py").write_text("needle\n")
    (root / "b.log").write_text("needle\n")
    (root / "sub" / "c.txt").write_text("needle\n")
    os.symlink("/usr", root / "usr")
    os.symlink("a.py", root / "ln.py")  # a link to a file in the workspace: the views follow none (ADR 0039)
    subprocess.run(["chown", "-R", f"{_UNPRIVILEGED}:{_UNPRIVILEGED}", str(root)], check=True)
    paths = [str(Path(__file__).resolve().parents[2] / "src"), sysconfig.get_path("purelib")]
    child = subprocess.run(
        ["setpriv", f"--reuid={_UNPRIVILEGED}", f"--regid={_UNPRIVILEGED}", "--clear-groups", "--",
         python, "-I", "-c", f"import sys; sys.path[:0] = {paths!r}; exec({_UNPRIVILEGED_SEARCH!r})",
         str(root), ripgrep.rg_binary()],
        capture_output=True, text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    [said] = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(said.removeprefix("RESULT "))
    assert result["uid"] == _UNPRIVILEGED
    assert result["per_call"] == [] and result["servers"] == 1, result  # served by the kept server
    assert sorted(result["found"]) == [".gitignore", "a.py", "sub/c.txt"], result
    assert list(result["roots"].values()) == ["/.term2/jail"], result  # the server chrooted
    assert result["followed"] == ["./.gitignore", "./a.py", "./b.log", "./sub/c.txt"], result  # no link followed
    assert result["alone"] == result["followed"] and result["alone_failed"] is None, result
    assert result["stopped"] is None


# --- what the view was made of ----------------------------------------------------------------


async def test_an_ignore_file_above_the_scope_replaced_or_made_starts_a_fresh_server(
    search: RipgrepWorkspaceSearch, repo: Path
) -> None:
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    first = _servers(search)
    # Replaced as editors save (a new inode): the old view still holds the old file.
    above = repo.parent.parent / ".gitignore"
    (repo.parent.parent / ".gitignore.new").write_text("*.tmp\n")
    os.rename(repo.parent.parent / ".gitignore.new", above)
    assert await _files(search, repo) == {b"a.py", b"b.log"}
    second = _servers(search)
    assert second != first and len(second) == 1
    assert not _descendants(first[0]) and not os.path.exists(f"/proc/{first[0]}")
    # Made where there was none: the old view has no file there at all.
    (repo.parent / ".gitignore").write_text("*.py\n")
    assert await _files(search, repo) == {b"b.log"}
    assert _servers(search) != second


async def test_the_global_excludes_file_made_later_starts_a_fresh_server(
    search: RipgrepWorkspaceSearch, repo: Path
) -> None:
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    first = _servers(search)
    xdg = Path(os.environ["XDG_CONFIG_HOME"]) / "git"
    xdg.mkdir(parents=True)
    (xdg / "ignore").write_text("*.tmp\n")
    assert await _files(search, repo) == {b"a.py"}
    assert _servers(search) != first


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
async def test_a_file_system_mounted_in_the_workspace_later_is_seen(search: RipgrepWorkspaceSearch, repo: Path) -> None:
    """A kept view holds the mounts below the workspace as they were; term2's mount table changing ends it."""
    (repo / "mnt").mkdir()
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    first = _servers(search)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "keptview", str(repo / "mnt")], check=True)
    try:
        (repo / "mnt" / "x.py").write_text("needle\n")
        assert await _files(search, repo) == {b"a.py", b"c.tmp", b"mnt/x.py"}
        assert _servers(search) != first
    finally:
        subprocess.run(["umount", str(repo / "mnt")], check=True)
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}


# --- bounds, cancel and what is left running ----------------------------------------------------


async def test_enough_kills_the_rg_the_server_started(search: RipgrepWorkspaceSearch, repo: Path) -> None:
    _blocking_tree(repo)
    end = await search.files(Walk(str(repo), str(repo)), lambda path: False)
    assert end == WalkEnd(enough=True)
    [server] = _servers(search)
    await _no_rg_left(server)


async def test_a_cancelled_search_kills_its_rg(search: RipgrepWorkspaceSearch, repo: Path) -> None:
    _blocking_tree(repo)
    with anyio.CancelScope() as scope:  # cancelled at rg's first path: rg runs, and then blocks on the FIFO

        def cancel(path: bytes) -> bool:
            scope.cancel()
            return True

        await search.files(Walk(str(repo), str(repo)), cancel)
    assert scope.cancelled_caught
    [server] = _servers(search)
    await _no_rg_left(server)
    os.unlink(repo / "zz" / ".gitignore")
    assert await _files(search, repo, name_glob="a.py") == {b"a.py"}  # the same server serves the next
    assert _servers(search) == [server]


async def test_the_time_and_output_limits_cut_a_search_short_and_kill_rg(
    search: RipgrepWorkspaceSearch, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _blocking_tree(repo)
    end = await search.files(Walk(str(repo), str(repo), time_limit=0.5), lambda path: True)
    assert end.cut_short == "stopped after 0.5 s"
    [server] = _servers(search)
    await _no_rg_left(server)
    monkeypatch.setattr(ripgrep, "OUTPUT_LIMIT", 1000)
    end = await search.files(Walk(str(repo), str(repo)), lambda path: True)
    assert end.cut_short == "stopped after 0 MiB of output"
    assert _servers(search) == [server]
    await _no_rg_left(server)


async def test_closing_ends_every_server_and_its_rg(search: RipgrepWorkspaceSearch, repo: Path) -> None:
    other = repo.parent / "other"
    other.mkdir()
    (other / "x.txt").write_text("needle\n")
    _blocking_tree(repo)
    assert await _files(search, other) == {b"x.txt"}
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(search.files, Walk(str(repo), str(repo)), lambda path: True)  # blocks on the FIFO
        with anyio.fail_after(GUARD):
            while len(_servers(search)) < 2 or not any(_rg_running(pid) for pid in _servers(search)):
                await anyio.sleep(0.02)
        servers = _servers(search)
        await search.aclose()
        tasks.cancel_scope.cancel()  # a search whose server ended before it printed runs again in a per-call view
    for pid in servers:
        assert not os.path.exists(f"/proc/{pid}"), "a server was left running (or unreaped)"
        assert not _descendants(pid)
    assert _servers(search) == []
    assert await _files(search, other) == {b"x.txt"}  # per-call views after closing


_KILLED_TERM2 = textwrap.dedent(
    """
    import os, sys, anyio
    from term2.adapters.workspace import RipgrepWorkspaceSearch
    from term2.ports.workspace_search import Walk

    async def main(root):
        search = RipgrepWorkspaceSearch(kept=True)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(search.files, Walk(root, root), lambda path: True)  # blocks on the FIFO
            while not search.views.servers:
                await anyio.sleep(0.02)
            print("SERVER", search.views.servers[0].pid, flush=True)
            await anyio.sleep_forever()

    anyio.run(main, sys.argv[1])
    """
)


def _gone(pid: int) -> bool:
    """Ended: no such process, or a zombie (its parent, term2, is gone: whoever reaps orphans will)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def test_term2_killed_takes_its_servers_and_their_rg_with_it(repo: Path) -> None:
    """SIGKILL gives term2 no shutdown: the server (`--die-with-parent`, and EOF of its socket) and every
    rg in its pid namespace must end all the same, not run on reading the workspace."""
    _blocking_tree(repo)
    src = str(Path(__file__).resolve().parents[2] / "src")
    term2 = subprocess.Popen(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {src!r}); exec({_KILLED_TERM2!r})", str(repo)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    try:
        assert term2.stdout is not None
        with anyio.fail_after(GUARD):
            line = await anyio.to_thread.run_sync(term2.stdout.readline)
        server = int(line.split()[1])
        with anyio.fail_after(GUARD):
            while not _rg_running(server):
                await anyio.sleep(0.02)
        below = _descendants(server)
        term2.kill()
    finally:
        term2.kill()
        term2.wait()
    with anyio.fail_after(GUARD):
        while not all(_gone(pid) for pid in {server, *below}):
            await anyio.sleep(0.02)


def _server_program(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str) -> None:
    """Views started from now on run ``source`` as their server: one that dies, hangs or never says hello."""
    program = tmp_path / "server.py"
    program.write_text(source)
    monkeypatch.setattr(view_server_process, "SERVER_SOURCE", program)


# --- falling back -----------------------------------------------------------------------------------


async def test_a_server_that_dies_sends_the_call_to_a_per_call_view(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _server_program(
        monkeypatch,
        tmp_path,
        "import socket, sys\ns = socket.socket(fileno=int(sys.argv[1]))\ns.send(b'H')\ns.recv(99)\n",
    )
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert per_call == [str(repo)]


async def test_an_rg_the_server_cannot_start_runs_in_a_per_call_view(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str]
) -> None:
    assert search.views is not None
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    [server] = _servers(search)
    place = ripgrep.Place(str(repo), str(repo / "gone"), "..")  # a cwd rg cannot start in
    finished = await search.views.run(["--files", *ripgrep.BASE_ARGS], place, str(repo), lambda chunk: True)
    assert per_call == [str(repo)]  # the server said so; the per-call view then says what bwrap says
    assert finished.view_failure() is not None and "gone" in finished.stderr
    assert _servers(search) == [server] and await _files(search, repo) == {b"a.py", b"c.tmp"}


async def test_a_server_that_cannot_start_sends_calls_to_per_call_views(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _server_program(monkeypatch, tmp_path, "raise SystemExit(3)\n")
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert per_call == [str(repo), str(repo)] and _servers(search) == []


def _children() -> set[tuple[int, str]]:
    """This process's children, zombies included (an unreaped one is a leak too), with their state."""
    found = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.add((int(entry.name), fields[0]))
    return found


async def test_a_search_cancelled_while_its_server_starts_leaves_no_server_or_descriptor(
    search: RipgrepWorkspaceSearch, repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The first call for a view waits for its server's hello; a caller cancelled then (the user cancels
    the turn) must not leave that server running, unreaped, or its pidfd and socket open in term2."""
    _server_program(monkeypatch, tmp_path, "import time\ntime.sleep(20)\n")  # never says hello, never reads its socket
    assert _children() == set()
    gc.collect()  # what earlier tests dropped unclosed is closed now, not counted here and missed after
    descriptors = len(os.listdir("/proc/self/fd"))
    async with anyio.create_task_group() as tasks:  # cancelled once the server runs: while it starts
        tasks.start_soon(search.files, Walk(str(repo), str(repo)), lambda path: True)
        with anyio.fail_after(GUARD):
            while not _children():
                await anyio.sleep(0.02)
        tasks.cancel_scope.cancel()
    assert _children() == set()
    assert _servers(search) == []
    await search.aclose()  # closes what the pool itself holds (the mount table)
    gc.collect()  # a socket dropped unclosed would be closed here; a pidfd never is
    assert len(os.listdir("/proc/self/fd")) == descriptors


async def test_closing_while_a_search_looks_for_its_server_keeps_nothing_after(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`aclose` while a search is between its checks and its server's start (here: asking git for the
    global excludes file): that search runs in a per-call view; no server is started after the close,
    and the mount table is not opened again (nothing would close either)."""
    asked, go = anyio.Event(), anyio.Event()
    real = ripgrep.global_excludes

    async def slow_excludes() -> str | None:
        asked.set()
        await go.wait()
        return await real()

    monkeypatch.setattr(ripgrep, "global_excludes", slow_excludes)
    found: list[bytes] = []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(search.files, Walk(str(repo), str(repo)), _all(found))
        with anyio.fail_after(GUARD):
            await asked.wait()
        await search.aclose()
        go.set()
    assert set(found) == {b"a.py", b"c.tmp"} and per_call == [str(repo)]
    assert search.views is not None and search.views.servers == [] and search.views._mounts is None
    assert _children() == set()


async def test_a_killed_server_is_replaced(search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str]) -> None:
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert search.views is not None
    [server] = search.views.servers
    server.kill()
    with anyio.fail_after(GUARD):
        await anyio.wait_readable(server.pidfd)
    server.dead = False  # as if term2 had not noticed: the next request meets a closed socket
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert per_call in ([], [str(repo)])  # sent to a per-call view when the request met the dead server


# --- concurrency ---------------------------------------------------------------------------------


async def test_an_idle_server_ends_itself_and_the_next_search_starts_another(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_server_process, "IDLE_SECONDS", 0.2)
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert search.views is not None
    [server] = search.views.servers
    with anyio.fail_after(GUARD):
        await anyio.wait_readable(server.pidfd)  # it ended by itself
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert per_call == [] and _servers(search) != [server.pid]  # not a request lost on the ended one
    assert not os.path.exists(f"/proc/{server.pid}")  # reaped


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    """term2 holding over 1,024 descriptors (kept walks, MCP servers, sessions): a server's pidfd then
    lands past what select() can take."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("the hard descriptor limit is too low to hold 1,024 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        with open(os.devnull) as null:
            while not held or held[-1] < 1030:
                held.append(os.dup(null.fileno()))
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_a_server_whose_pidfd_is_past_1024_serves(
    many_descriptors: None, search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str]
) -> None:
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}
    assert search.views is not None and search.views.servers[0].pidfd >= 1024
    assert await _files(search, repo) == {b"a.py", b"c.tmp"}  # looks at the server's pidfd first
    assert per_call == [] and len(_servers(search)) == 1


async def test_two_searches_at_once_share_one_server(search: RipgrepWorkspaceSearch, repo: Path) -> None:
    for n in range(300):
        (repo / f"m{n:03}.py").write_text(f"needle {n}\n")
    results: dict[str, list[LineMatch]] = {"a": [], "b": []}

    async def one(name: str, pattern: str) -> None:
        found = results[name]
        await search.lines(Walk(str(repo), str(repo)), LineQuery(pattern), lambda m: found.append(m) or True)

    with anyio.fail_after(GUARD):  # a reply handed to no one would leave a search waiting forever
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(one, "a", "needle")
            tasks.start_soon(one, "b", r"needle \d*7$")
    assert len(results["a"]) == 302  # 300, a.py and c.tmp
    assert {m.path for m in results["b"]} == {f"m{n:03}.py".encode() for n in range(300) if n % 10 == 7}
    assert len(_servers(search)) == 1


async def test_a_servers_start_is_spent_from_the_walks_time_limit(
    search: RipgrepWorkspaceSearch, repo: Path, per_call: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A server that never says hello is waited for (START_LIMIT), then the call runs in a per-call view with
    what is left of its time limit, not a fresh one: a walk's limit bounds the call, however it ran."""
    _server_program(monkeypatch, tmp_path, "import time\ntime.sleep(20)\n")  # never says hello
    monkeypatch.setattr(view_server_process, "START_LIMIT", 1.5)
    with anyio.fail_after(GUARD):
        end = await search.files(Walk(str(repo), str(repo), time_limit=1.0), lambda path: True)
    assert per_call == [str(repo)]  # it did fall back
    assert end.cut_short == "stopped after 1 s", end  # the start spent its whole second
    with anyio.fail_after(GUARD):  # the next call runs per-call for a while, without a start to wait for
        found: list[bytes] = []
        end = await search.files(Walk(str(repo), str(repo), time_limit=5.0), _all(found))
    assert end.complete and set(found) == {b"a.py", b"c.tmp"}
