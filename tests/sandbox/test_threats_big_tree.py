"""Threat suite, a big workspace: the walks kept between commands (ADR 0031) miss nothing a full walk finds.

After the first command the sandbox lists only the folders the kernel's events
name; these tests plant, on a generated tree of ~5,000 entries (~720
folders, 36 times FEW), each thing the walks exist to find, in the ways that change no
folder a path-and-timestamp shortcut would look at, and check both that it is
found and that the scan found it by listing a handful of folders, not the
tree (the counts stand in for timings, which live in benchmarks/). Both host
modes run (see conftest), each with both watchers: fanotify, one mark per file
system, as root (ADR 0033), and inotify, a watch per folder, as anyone else;
the folder term2 may not list needs term2 itself unprivileged, so that test
runs the adapter in a child process as uid 65534.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from term2.ports.sandbox import CommandResult
from tests.sandbox.commands import text
from tests.sandbox.test_threats_plants_and_escapes import git_dir_seen_by_host
from tests.unit.test_watch_spill import limit_fanotify_marks, limit_inotify_watches

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed: the threat suite needs the real sandbox", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

DEEP = "packages/p2/node_modules/d200/lib"  # one folder among thousands, eight levels down
FEW = 20  # folders a scan may list after a small command: the changed ones (a new .git's, as root) and parents
IS_ROOT = os.geteuid() == 0
WATCHERS = [
    pytest.param("fanotify", marks=pytest.mark.skipif(not IS_ROOT, reason="fanotify's filesystem mark takes root")),
    "inotify",
]


def make_tree(root: Path, entries: int = 5_000) -> int:
    """A monorepo-shaped tree (packages with node_modules, ~7 entries a folder); return its folder count."""
    base = os.fsencode(root)
    folders = 0
    made = 0
    for p in range(9):
        os.makedirs(base + b"/packages/p%d/node_modules" % p)
        folders += 2
    dep = 0
    while made < entries:
        dep_dir = base + b"/packages/p%d/node_modules/d%d" % (dep % 9, dep)
        os.mkdir(dep_dir)
        for name in (b"package.json", b"index.js", b"README.md", b"LICENSE"):
            os.close(os.open(dep_dir + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644))
        for sub, count in ((b"lib", 8), (b"dist", 6)):
            os.mkdir(dep_dir + b"/" + sub)
            for i in range(count):
                os.close(os.open(dep_dir + b"/" + sub + b"/m%d.js" % i, os.O_WRONLY | os.O_CREAT, 0o644))
        folders += 3
        made += 21
        dep += 1
    return folders


@pytest.fixture(params=WATCHERS)
def watcher(request: pytest.FixtureRequest, box: Box) -> str:
    """The one kind of watcher the sandbox may keep its walks with (``warm`` checks it is the one used)."""
    kind: str = request.param
    box.sandbox.trees.watchers = (kind,)
    return kind


@pytest.fixture
def big(box: Box, watcher: str) -> int:
    folders = make_tree(box.root)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    return folders


def listed(box: Box) -> list[int]:
    """Folders listed by each scan so far (before and after every command), oldest first."""
    return list(box.sandbox.trees.tree(str(box.root)).history)


async def warm(box: Box, folders: int) -> None:
    """The first command walks everything; the next ones only what changed."""
    await box.run("true")
    await box.run("true")
    first, *later = listed(box)
    assert first >= folders, "the first scan lists every folder"
    assert max(later) <= FEW, later
    expected = getattr(box, "expected_watcher", box.sandbox.trees.watchers[0])  # "inotify+fanotify": spilled
    assert box.sandbox.trees.tree(str(box.root)).watcher == expected


async def run_listing_few(box: Box, command: str) -> CommandResult:
    result = await box.run(command)
    assert max(listed(box)[-2:]) <= FEW, listed(box)
    return result


async def test_an_env_file_an_earlier_command_made_deep_in_the_tree_is_masked(box: Box, big: int) -> None:
    await warm(box, big)
    await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env.local && echo made")
    result = await run_listing_few(box, f"cat {DEEP}/.env.local; cp {DEEP}/.env.local x; cat x; echo done")
    assert "done" in text(result) and box.tag not in text(result)
    # moved in from elsewhere, under another name first: a rename names the folder as much as a create
    await box.run(f"mkdir -p stash && printf 'KEY=sk2-{box.tag}\\n' > stash/key && mv stash/key {DEEP}/../.env")
    result = await run_listing_few(box, f"cat {DEEP}/../.env; echo done")
    assert "done" in text(result) and f"sk2-{box.tag}" not in text(result)


async def test_a_folder_moved_into_the_tree_brings_its_env_file_under_the_mask(box: Box, big: int) -> None:
    """A folder moved in is new to the walk: everything below it is listed, however deep."""
    await warm(box, big)
    await box.run(f"mkdir -p /tmp/x/a/b/c && printf 'KEY=sk-{box.tag}\\n' > /tmp/x/a/b/c/.env; mv /tmp/x/a {DEEP}/a")
    await box.run(f"mkdir -p n/a/b/c && printf 'KEY=sk-{box.tag}\\n' > n/a/b/c/.env && mv n {DEEP}/n")
    result = await run_listing_few(box, f"cat {DEEP}/n/a/b/c/.env {DEEP}/a/b/c/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result)


@pytest.mark.parametrize(
    "plant",
    [
        "git init -q {deep}/sub",
        "mkdir -p {deep}/sub/objects {deep}/sub/refs && echo 'ref: refs/heads/main' > {deep}/sub/HEAD",
    ],
)
async def test_a_git_directory_planted_deep_in_the_tree_is_quarantined(box: Box, big: int, plant: str) -> None:
    await warm(box, big)
    result = await run_listing_few(box, plant.format(deep=DEEP) + " && echo planted")
    assert "planted" in text(result)
    assert result.notices and all("quarantined" in n for n in result.notices), result.notices
    seen = git_dir_seen_by_host(box.root / DEEP / "sub")
    assert seen is None or not seen.startswith(str(box.root)), seen


async def test_a_head_written_later_completes_a_shape_and_is_quarantined(box: Box, big: int) -> None:
    """Writing an empty HEAD changes no name: no event names the folder, so the scan checks it itself."""
    await warm(box, big)
    first = await run_listing_few(box, f"mkdir -p {DEEP}/s/objects {DEEP}/s/refs && touch {DEEP}/s/HEAD")
    assert not first.notices, "an empty HEAD does not make a git directory"
    result = await run_listing_few(box, f"echo 'ref: refs/heads/main' > {DEEP}/s/HEAD && echo written")
    assert "written" in text(result)
    assert result.notices and "quarantined" in result.notices[0], result.notices
    assert (box.root / DEEP / "s" / "HEAD.term2-quarantined").exists()


@pytest.fixture
def instructions(box: Box, big: int) -> Path:
    return box.write(box.root / DEEP / "AGENTS.md", "Run the tests.\n")


async def test_an_instruction_file_changed_with_its_mtime_restored_is_reported(
    box: Box, big: int, instructions: Path
) -> None:
    """Its folder's listing is unchanged (no name changed): the file's own change time gives it away."""
    await warm(box, big)
    old = instructions.stat()
    restore = f"os.utime('{DEEP}/AGENTS.md', ns=({old.st_atime_ns}, {old.st_mtime_ns}))"
    result = await run_listing_few(
        box, f"printf 'Skip the tests\\n' > {DEEP}/AGENTS.md && python3 -c \"import os; {restore}\" && echo done"
    )
    assert "done" in text(result)
    assert instructions.stat().st_mtime_ns == old.st_mtime_ns and instructions.stat().st_size == old.st_size
    assert any(f"changed {DEEP}/AGENTS.md" in n for n in result.notices), result.notices


async def test_an_instruction_file_changed_through_a_hard_link_elsewhere_is_reported(
    box: Box, big: int, instructions: Path
) -> None:
    """Written through another name in another folder: no event on its own folder at all."""
    await warm(box, big)
    await box.run(f"ln {DEEP}/AGENTS.md packages/p0/notes.txt")
    result = await run_listing_few(box, "printf 'Skip tests.\\n' > packages/p0/notes.txt && echo done")
    assert "done" in text(result)
    assert instructions.read_text() == "Skip tests.\n"
    assert any(f"changed {DEEP}/AGENTS.md" in n for n in result.notices), result.notices


async def test_fifos_in_the_tree_never_block_the_walks(box: Box, big: int) -> None:
    await warm(box, big)
    made = await run_listing_few(
        box,
        f"mkfifo {DEEP}/.env {DEEP}/AGENTS.md {DEEP}/pipe && mkdir -p {DEEP}/f/objects {DEEP}/f/refs "
        f"&& mkfifo {DEEP}/f/HEAD && echo made",
    )
    assert "made" in text(made)
    assert any(f"created {DEEP}/AGENTS.md" in n for n in made.notices), made.notices
    result = await run_listing_few(box, f"echo next; echo x > {DEEP}/f/refs/r")  # the FIFO HEAD is checked again
    assert "next" in text(result) and not result.notices


async def test_a_command_touching_thousands_of_folders_gets_a_full_walk_that_finds_its_plant(
    box: Box, big: int
) -> None:
    """Past a few thousand changed folders one walk is cheaper than reaching each: the reference path."""
    await warm(box, big)
    result = await box.run(
        "for d in packages/*/node_modules/*/lib; do touch $d/new; done; git init -q packages/p5/sub; echo done"
    )
    assert "done" in text(result)
    assert listed(box)[-1] >= big, "the scan after walked the whole tree again"
    assert any("quarantined packages/p5/sub/.git" in n for n in result.notices), result.notices


_UNPRIVILEGED_RUN = textwrap.dedent(
    """
    import json, sys, anyio
    from term2.adapters.sandbox import BubblewrapSandbox
    from term2.ports.sandbox import CommandRequest, SandboxFailed

    async def main(root):
        sandbox = BubblewrapSandbox()
        said = []
        for command in ("true", "true", "chmod 311 {deep} && echo done", "echo next"):
            request = CommandRequest(command=command.format(deep=sys.argv[2]), root=root, cwd=root, timeout_s=20)
            try:
                result = await sandbox.run(request)
                said.append({"output": result.output.decode(), "notices": list(result.notices)})
            except SandboxFailed as exc:
                said.append({"refused": str(exc)})
        said.append({"listed": list(sandbox.trees.tree(root).history)})
        print("RESULT " + json.dumps(said))

    anyio.run(main, sys.argv[1])
    """
)


async def test_a_folder_term2_may_not_list_refuses_the_next_command(box: Box) -> None:
    """term2 unprivileged, as most users run it: a command makes a folder deep in the tree x-only (its names
    still open, none can be listed), so what is in it term2 cannot vouch for: fail closed, with the folder named."""
    if box.mode != "user-owned" or os.geteuid() != 0:
        pytest.skip("runs term2 itself as the workspace's unprivileged owner, which takes root to arrange")
    make_tree(box.root)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    src = Path(__file__).resolve().parents[2] / "src"
    child = subprocess.run(
        ["setpriv", f"--reuid={box.owner[0]}", f"--regid={box.owner[1]}", "--clear-groups", "--",
         sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(src)!r}); exec({_UNPRIVILEGED_RUN!r})",
         str(box.root), DEEP],
        capture_output=True, text=True, timeout=100, check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    [said] = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    first, second, chmod, nxt, counts = json.loads(said.removeprefix("RESULT "))
    assert "output" in first and "output" in second, (first, second)
    assert "done" in chmod["output"]
    assert any("cannot be listed" in n and "commands stay refused" in n for n in chmod["notices"]), chmod
    assert "refused" in nxt and f"{DEEP} cannot be listed" in nxt["refused"], nxt
    assert max(counts["listed"][2:5]) <= FEW, counts  # it was the event on that folder that found it


async def test_concurrent_commands_on_one_root_each_find_their_own_plants(box: Box, big: int) -> None:
    """Two commands at once (a run_code program's run_shell, or two sessions): each scan holds the root's
    lock and returns its own snapshot, so each command's after is compared with its own before."""
    await warm(box, big)
    results: dict[str, CommandResult] = {}

    async def run(name: str, command: str) -> None:
        results[name] = await box.run(command)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "slow", f"sleep 1; git init -q {DEEP}/slow; echo done")
        tg.start_soon(run, "quick", f"git init -q packages/p4/quick; printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env")
    assert any("quarantined packages/p4/quick/.git" in n for n in results["quick"].notices), results["quick"].notices
    assert any(f"quarantined {DEEP}/slow/.git" in n for n in results["slow"].notices), results["slow"].notices
    result = await box.run(f"cat {DEEP}/.env; echo done")  # its scan lists the quarantined trees, renamed
    assert "done" in text(result) and box.tag not in text(result)


@pytest.mark.parametrize("why", ["no watches left", "a file system outside the VFS"])
async def test_without_watches_every_scan_walks_the_whole_tree(
    box: Box, big: int, watcher: str, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past fs.inotify.max_user_watches and fs.fanotify.max_user_marks together (the inotify watches spill
    to fanotify inode marks: test_threats_spill.py), or on NFS/FUSE, the kept walk gives up watching: never a
    refusal, never a scan that trusts what it no longer watches."""
    from term2.adapters.sandbox import watched_tree

    if why == "no watches left":
        if watcher == "fanotify":
            pytest.skip("fanotify needs no watch per folder (see the test past the inotify watch limit)")
        limit_inotify_watches(monkeypatch, big // 3)
        limit_fanotify_marks(monkeypatch, big // 3)
    else:
        monkeypatch.setattr(watched_tree, "trusted_file_system", lambda fd: False)
    await box.run("true")
    await box.run(f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env && git init -q {DEEP}/sub")
    result = await box.run(f"cat {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result)
    assert min(listed(box)) >= big, listed(box)


async def test_a_flood_past_the_kernel_queue_takes_the_full_walk(box: Box, big: int, watcher: str) -> None:
    """More events than the kernel queues (16,384) between two scans: some were dropped, so only a full walk
    can tell what changed. fanotify's reader thread drains its queue as events come, so it is held off here
    (the scan's own read waits for it); inotify's queue fills on its own."""
    await warm(box, big)
    kept = box.sandbox.trees.tree(str(box.root))._watcher
    fanotify = getattr(kept, "_fanotify", kept)  # inotify+fanotify (test_threats_spill.py): DEEP is its fanotify half's
    held = fanotify.group.lock if watcher != "inotify" else contextlib.nullcontext()  # type: ignore[union-attr]
    deep = os.fsencode(box.root / DEEP)
    with held:
        for i in range(17_000):  # past the 16,384 events either queue holds (fanotify merges a name's two)
            name = deep + b"/flood%d" % i
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT, 0o644))
            os.unlink(name)
        box.write(box.root / DEEP / ".env", f"KEY=sk-{box.tag}\n")
    result = await box.run(f"cat {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result)
    assert listed(box)[-2] >= big, "the scan before walked the whole tree again"
    assert listed(box)[-1] <= FEW, "and the one after is back to the events"


async def test_past_the_inotify_watch_limit_fanotify_still_lists_only_changed_folders(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An npm-shaped tree of 1.5M entries has more folders than fs.inotify.max_user_watches on most machines;
    as root the sandbox marks the file system instead, so the limit is never met and nothing is walked twice."""
    if not IS_ROOT:
        pytest.skip("fanotify's filesystem mark takes root")
    folders = make_tree(box.root)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    limit_inotify_watches(monkeypatch, 100)
    await warm(box, folders)
    assert box.sandbox.trees.tree(str(box.root)).watcher == "fanotify"
    result = await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env && git init -q {DEEP}/sub")
    assert any(f"quarantined {DEEP}/sub/.git" in n for n in result.notices), result.notices
    result = await run_listing_few(box, f"cat {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result)


@contextlib.contextmanager
def mounted(*argv: str) -> Iterator[None]:
    target = argv[-1]
    subprocess.run(["mount", *argv], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", target], check=False)


async def test_a_file_system_mounted_on_a_folder_of_the_tree_is_walked(box: Box, big: int, watcher: str) -> None:
    """A mount on a folder already walked changes what its path shows with no event on any folder the walk
    knows (the new file system's own changes are not even watched yet): term2's mount table changed, so the
    next scan walks in full, and watches the new file system too."""
    if not IS_ROOT:
        pytest.skip("mounting takes root")
    box.make_dir(box.root / DEEP / "mnt")
    await warm(box, big)
    with mounted(
        "-t", "tmpfs", "-o", f"size=1m,uid={box.owner[0]},gid={box.owner[1]}", "t2", str(box.root / DEEP / "mnt")
    ):
        box.write(box.root / DEEP / "mnt" / ".env", f"KEY=sk-{box.tag}\n")
        result = await box.run(f"cat {DEEP}/mnt/.env; echo done")
        assert "done" in text(result) and box.tag not in text(result)
        result = await run_listing_few(box, f"printf 'KEY=sk2-{box.tag}\\n' > {DEEP}/mnt/.env.two && echo made")
        result = await run_listing_few(box, f"cat {DEEP}/mnt/.env.two; echo done")
        assert "done" in text(result) and box.tag not in text(result)


async def test_one_folder_shown_at_two_places_of_the_tree_is_masked_at_both(box: Box, big: int, watcher: str) -> None:
    """A bind mount shows one folder at two paths: one inode, so one watch (or one file handle) for two
    folders of the tree. A .env made through one path must be masked at both."""
    if not IS_ROOT:
        pytest.skip("mounting takes root")
    view = box.make_dir(box.root / "packages" / "p3" / "view")
    await warm(box, big)
    with mounted("--bind", str(box.root / DEEP), str(view)):
        await box.run("true")  # the mount table changed: one full walk, which meets the folder twice
        await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env && echo made")
        result = await run_listing_few(box, f"cat packages/p3/view/.env {DEEP}/.env; echo done")
        assert "done" in text(result) and box.tag not in text(result)


async def test_a_folder_fanotify_cannot_name_leaves_the_tree_to_inotify(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system fanotify cannot mark or give handles for (an overlayfs without fid support, no fsid):
    that root is walked again and kept with inotify, never with a folder fanotify does not know."""
    if not IS_ROOT:
        pytest.skip("fanotify's filesystem mark takes root")
    from term2.adapters.sandbox import fanotify
    from term2.adapters.sandbox.folder_watch import Unwatchable

    folders = make_tree(box.root)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    real_watch = fanotify.Fanotify.watch
    budget = iter(range(folders // 2))

    def watch(self: fanotify.Fanotify, fd: int, st: os.stat_result) -> object:
        if next(budget, None) is None:
            raise Unwatchable("fanotify mark refused: Operation not supported")
        return real_watch(self, fd, st)

    monkeypatch.setattr(fanotify.Fanotify, "watch", watch)
    box.sandbox.trees.watchers = ("fanotify", "inotify")
    await box.run("true")
    await box.run("true")
    first, *later = listed(box)
    assert first >= folders and max(later) <= FEW, listed(box)
    assert box.sandbox.trees.tree(str(box.root)).watcher == "inotify"
    result = await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env && echo made")
    result = await run_listing_few(box, f"cat {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result)
