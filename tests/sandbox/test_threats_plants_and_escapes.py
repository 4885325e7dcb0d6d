"""Threat suite, second part: git plants, secret masks that give up, term2's own data, host sockets.

Each attack is what a prompt-injected model would do with an approved command.
What decides is the host afterwards: the host's git must not take any folder
of the workspace for a repository the command made, and no secret, store or
socket outside the root may be reached. Both host modes run (see conftest).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from term2.adapters.sandbox import BubblewrapSandbox
from term2.ports.sandbox import SandboxFailed
from tests.sandbox.commands import git_repo, py, text

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed: the threat suite needs the real sandbox", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
IS_ROOT = os.geteuid() == 0


def host_git(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The developer's (or the editor's) git, run on the host in ``folder``, never above the test's base."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent.parent.parent)}
    env.pop("GIT_DIR", None)
    return subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(folder), *args], capture_output=True, text=True, env=env
    )


def git_dir_seen_by_host(folder: Path) -> str | None:
    found = host_git(folder, "rev-parse", "--absolute-git-dir")
    return found.stdout.strip() if found.returncode == 0 else None


# --- 1. git metadata the host runs ---------------------------------------------------------


async def test_the_whole_git_directory_is_read_only(box: Box) -> None:
    git = git_repo(box)
    before = {p.relative_to(git): p.read_bytes() for p in git.rglob("*") if p.is_file()}
    result = await box.run(
        f"echo {box.outside} > .git/commondir; mkdir -p .git/worktrees/w; echo {box.outside} > .git/worktrees/w/gitdir;"
        "echo evil > .git/info/exclude; echo evil > .git/description; rm -f .git/HEAD; touch .git/new; "
        "git config core.fsmonitor 'touch /tmp/owned'; echo done"
    )
    assert "done" in text(result)
    after = {p.relative_to(git): p.read_bytes() for p in git.rglob("*") if p.is_file()}
    assert after == before
    assert git_dir_seen_by_host(box.root) == str(git)


async def test_nested_repositories_submodules_and_worktrees_are_read_only(box: Box) -> None:
    git_repo(box)
    subprocess.run(["git", "init", "-q", str(box.root / "vendor" / "lib")], check=True)
    modules = box.root / ".git" / "modules" / "sub"
    subprocess.run(["git", "init", "-q", "--bare", str(modules)], check=True)
    (box.root / "sub").mkdir()
    (box.root / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    bare = box.root / "fixtures" / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    watched = [box.root / "vendor/lib/.git/config", modules / "config", box.root / "sub/.git", bare / "config"]
    before = [p.read_bytes() for p in watched]
    result = await box.run(
        "git -C vendor/lib config core.fsmonitor 'touch /tmp/a';"
        "echo '[core] fsmonitor = x' >> .git/modules/sub/config;"
        f"echo 'gitdir: {box.outside}' > sub/.git; echo '[core] pager = x' >> fixtures/repo.git/config;"
        "mkdir vendor/lib/.git/hooks/x; mv vendor/lib/.git vendor/lib/.g; mv fixtures/repo.git fixtures/r; echo done"
    )
    assert "done" in text(result)
    assert [p.read_bytes() for p in watched] == before
    assert (box.root / "vendor/lib/.git").is_dir() and bare.is_dir()
    assert not result.notices, result.notices  # nothing new was planted: nothing quarantined


@pytest.mark.parametrize(
    ("plant", "folder"),
    [
        ("git init -q sub && git -C sub config core.fsmonitor 'touch /tmp/x'", "sub"),
        ("mkdir -p sub/objects sub/refs && echo 'ref: refs/heads/main' > sub/HEAD && "
         "printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' > sub/config", "sub"),  # a bare-repository shape
        ("mkdir -p deep/a/b/c/d/e && git init -q --bare deep/a/b/c/d/e", "deep/a/b/c/d/e"),
        ("git init -q --bare ../evil 2>/dev/null; mkdir -p w && echo 'gitdir: /proc/self/cwd' > w/.git", "w"),
        ("mkdir -p x/objects x/refs && ln -s /etc/hostname x/HEAD", "x"),
    ],
)  # fmt: skip
async def test_planted_git_directories_are_quarantined(box: Box, plant: str, folder: str) -> None:
    result = await box.run(f"{plant}; echo planted")
    assert "planted" in text(result)
    target = box.root / folder
    seen = git_dir_seen_by_host(target)
    assert seen is None or not seen.startswith(str(box.root)), seen
    assert result.notices and all("quarantined" in n for n in result.notices), result.notices
    assert folder.split("/")[0] in " ".join(result.notices)


async def test_the_root_cannot_become_a_bare_repository(box: Box) -> None:
    result = await box.run(
        "mkdir -p objects refs; echo 'ref: refs/heads/main' > HEAD; printf '[core]\\n\\tfsmonitor = x\\n' > config;"
        "git init -q --bare . ; echo done"
    )
    assert "done" in text(result)
    assert git_dir_seen_by_host(box.root) is None
    assert not (box.root / "HEAD").exists(), "the HEAD mask is a ghost: gone after the run"
    assert not (box.root / ".git").exists()


async def test_git_still_reads_inside_the_sandbox(box: Box) -> None:
    git = git_repo(box)
    box.write(box.root / "a.txt", "hello\n")
    result = await box.run("git status --short; git log --oneline -1 2>&1 | head -1; git diff --stat; echo rc=$?")
    assert "?? a.txt" in text(result) and "rc=0" in text(result), text(result)
    assert git_dir_seen_by_host(box.root) == str(git)


# --- 2. secrets: a scan that gives up fails closed -------------------------------------------


async def test_env_files_at_any_depth_are_masked(box: Box) -> None:
    deep = box.make_dir(box.root / "a" / "b" / "c" / "d" / "e" / "f")
    for part in ("a", "a/b", "a/b/c", "a/b/c/d", "a/b/c/d/e"):
        box.own(box.root / part)
    box.write(deep / ".env.production", f"KEY=deep-{box.tag}\n")
    result = await box.run("cat a/b/c/d/e/f/.env.production; mv a/b/c/d/e/f/.env.production x; cat x")
    assert box.tag not in text(result)


async def test_a_walk_that_cannot_finish_refuses_the_command(box: Box) -> None:
    box.write(box.root / ".env", f"KEY=sk-{box.tag}\n")
    crowd = box.make_dir(box.root / "crowd")
    for i in range(300):
        (crowd / f"f{i}").touch()
    small = BubblewrapSandbox(limits=replace(box.limits, scan_entries=200))
    with pytest.raises(SandboxFailed) as refused:
        await box.run("cat .env", sandbox=small)
    message = str(refused.value)
    assert "refusing to run" in message and "200" in message and ".env" in message
    deep = box.root
    for _ in range(300):
        deep = deep / "d"
    os.makedirs(deep)
    with pytest.raises(SandboxFailed, match="nested more than"):
        await box.run("cat .env")


# --- 3. term2's own data ------------------------------------------------------------------------


@pytest.fixture
def own_data(box: Box) -> Iterator[list[Path]]:
    """A store and a config in folders commands can otherwise see (TERM2_HOME / XDG_* set by the user)."""
    if not IS_ROOT:
        pytest.skip("a visible system folder to put the store in needs root")
    store = Path(f"/opt/term2-home-{box.tag}")
    config = Path(f"/etc/term2-config-{box.tag}.toml")
    store.mkdir()
    for name in ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"):
        (store / name).write_text(f"transcript-{box.tag[::-1]}")
        os.chown(store / name, *box.owner)
    os.chown(store, *box.owner)
    config.write_text(f"api_key = 'cfg-{box.tag[::-1]}'\n")
    os.chown(config, *box.owner)
    try:
        yield [store, config]
    finally:
        shutil.rmtree(store, ignore_errors=True)
        config.unlink(missing_ok=True)


async def test_term2_store_and_config_are_hidden(box: Box, own_data: list[Path]) -> None:
    store, config = own_data
    hiding = BubblewrapSandbox(limits=box.limits, hidden=[str(store), str(config)])
    result = await box.run(f"ls -la {store}; cat {store}/* {config}; echo end", sandbox=hiding)
    assert box.tag[::-1] not in text(result), text(result)
    assert "end" in text(result)
    unhidden = await box.run(f"cat {store}/sessions.sqlite3")  # the same file, without term2 knowing it is its own
    assert box.tag[::-1] in text(unhidden), "the test must put the store where commands could otherwise read it"


# --- 4. host Unix sockets ---------------------------------------------------------------------


@pytest.fixture(params=["tmp", "beside-the-root", "var", "srv", "opt"])
def host_socket(box: Box, request: pytest.FixtureRequest) -> Iterator[tuple[Path, socket.socket]]:
    if request.param == "tmp":  # where agents and IDEs usually put theirs: private to the sandbox
        directory = Path(os.path.realpath("/tmp")) / f"term2-sock-{box.tag}"
    elif request.param == "beside-the-root":
        directory = box.base / f"sock-{box.tag}"
    elif request.param == "var":
        directory = Path("/var/lib") / f"term2-sock-{box.tag}"
    elif request.param == "srv":
        directory = Path("/srv") / f"term2-sock-{box.tag}"
    else:  # a system folder the sandbox shows: the socket itself is masked
        directory = Path("/opt") / f"term2-sock-{box.tag}"
    try:
        directory.mkdir(mode=0o755, parents=True)
    except PermissionError:
        pytest.skip(f"cannot create {directory}")
    path = directory / "agent.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)  # permissions would allow it: only the sandbox may stop it
    server.listen(4)
    server.setblocking(False)
    try:
        yield path, server
    finally:
        server.close()
        shutil.rmtree(directory, ignore_errors=True)


async def test_host_unix_sockets_outside_the_root_are_unreachable(
    box: Box, host_socket: tuple[Path, socket.socket]
) -> None:
    path, server = host_socket
    result = await box.run(
        py(f"""
        import socket
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect({str(path)!r}); print("CONNECTED")
        except OSError as e:
            print("refused", e)
        """)
    )
    assert "CONNECTED" not in text(result) and "refused" in text(result), text(result)
    try:
        server.accept()
        raise AssertionError("the sandbox reached the host socket")
    except BlockingIOError:
        pass


async def test_ordinary_work_still_runs(box: Box) -> None:
    """What the narrower host view must not break: a C build, make, and a test runner using sockets in the root."""
    box.write(box.root / "main.c", '#include <stdio.h>\nint main(void){puts("built");return 0;}\n')
    box.write(box.root / "Makefile", "all:\n\tcc -o main main.c\n")
    box.write(
        box.root / "test_sock.py",
        textwrap.dedent("""
            import os, socket, unittest
            class T(unittest.TestCase):
                def test_socket_in_root(self):
                    path = os.path.join(os.getcwd(), "t.sock")
                    server = socket.socket(socket.AF_UNIX); server.bind(path); server.listen(1)
                    client = socket.socket(socket.AF_UNIX); client.connect(path)
                    conn, _ = server.accept(); client.sendall(b"ping"); self.assertEqual(conn.recv(4), b"ping")
                    os.unlink(path)
                def test_socketpair(self):
                    a, b = socket.socketpair(); a.sendall(b"x"); self.assertEqual(b.recv(1), b"x")
        """),
    )
    result = await box.run("make -s && ./main && python3 -m unittest -q test_sock 2>&1 | tail -1", timeout_s=60)
    assert "built" in text(result) and "OK" in text(result), text(result)
