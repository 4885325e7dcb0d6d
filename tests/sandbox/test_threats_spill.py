"""Threat suite, the kept walks past fs.inotify.max_user_watches: inotify spills to fanotify inode marks.

Unprivileged, each folder takes an inotify watch, and past the per-user limit
(192,536 here; an npm-shaped tree of 1.5M entries has 214,289 folders) the
folders left get a fanotify inode mark each (``watch_spill``; Linux 5.13 lets
any process mark an inode it can read), counted against
``fs.fanotify.max_user_marks``. The inotify budget is cut to ``SPILL_AT``
watches here (``limit_inotify_watches``: ENOSPC past it, as the kernel), so the
~720 folders of the generated tree are kept by both halves: ``DEEP`` and the
rest of packages p2-p8 by inode marks, the root and p0 by watches. The
threats of the big tree are run again on that tree, then what is the spill's
own: events from both halves in one command, a spilled folder moved out of the
tree (its mark stays: the events it brings are dropped) and back, deleted, a
flood past the kernel's queue, and term2 really unprivileged (a child run as the
workspace's owner: the kernel accepts the marks, and a folder it may not list
still refuses the next command).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.sandbox import test_threats_big_tree as big_tree
from tests.sandbox import test_threats_folder_recreated as recreated
from tests.sandbox.commands import text
from tests.sandbox.test_threats_big_tree import DEEP, FEW, listed, make_tree, run_listing_few, warm
from tests.unit.test_watch_spill import limit_inotify_watches

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed: the threat suite needs the real sandbox", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SPILL_AT = 100  # inotify watches: the root, packages, p0 (~80 folders) and a few of p1
SPILLED = "inotify+fanotify"
WATCHED = "packages/p0/node_modules/d0/lib"  # a folder with an inotify watch


@pytest.fixture
def watcher(box: Box, monkeypatch: pytest.MonkeyPatch) -> str:
    """inotify, with its watches spent after SPILL_AT folders: the rest of the tree spills, even as root
    (where fanotify could mark the file system: the sandbox is told to keep its walks with inotify). Run
    with the workspace owned by an unprivileged uid only: who owns it changes nothing the spill does, and
    each run costs a tree."""
    if box.mode != "user-owned":
        pytest.skip("the spill is the same whoever owns the workspace: run once, for CI's time")
    limit_inotify_watches(monkeypatch, SPILL_AT)
    box.sandbox.trees.watchers = ("inotify",)
    box.expected_watcher = SPILLED  # type: ignore[attr-defined]  # what ``warm`` checks the tree is kept with
    return SPILLED


big = big_tree.big

# The big tree's threats, again with the tree kept by both halves (their `warm` checks it is).
test_an_env_file_an_earlier_command_made_deep_in_the_tree_is_masked = (
    big_tree.test_an_env_file_an_earlier_command_made_deep_in_the_tree_is_masked
)
test_a_folder_moved_into_the_tree_brings_its_env_file_under_the_mask = (
    big_tree.test_a_folder_moved_into_the_tree_brings_its_env_file_under_the_mask
)
test_a_git_directory_planted_deep_in_the_tree_is_quarantined = (
    big_tree.test_a_git_directory_planted_deep_in_the_tree_is_quarantined
)
test_a_flood_past_the_kernel_queue_takes_the_full_walk = big_tree.test_a_flood_past_the_kernel_queue_takes_the_full_walk
test_a_file_system_mounted_on_a_folder_of_the_tree_is_walked = (
    big_tree.test_a_file_system_mounted_on_a_folder_of_the_tree_is_walked
)
test_one_folder_shown_at_two_places_of_the_tree_is_masked_at_both = (
    big_tree.test_one_folder_shown_at_two_places_of_the_tree_is_masked_at_both
)
test_an_env_file_in_a_folder_made_again_at_the_same_inode_is_masked = (
    recreated.test_an_env_file_in_a_folder_made_again_at_the_same_inode_is_masked
)


def key_of(box: Box, path: str) -> object:
    """The watcher's key for a folder of the kept tree: an int is an inotify watch, bytes a fanotify handle."""
    folder = box.sandbox.trees.tree(str(box.root))._top
    for name in path.split("/"):
        assert folder is not None
        folder = folder.children[name]
    assert folder is not None
    return folder.key


def fanotify_marks(box: Box) -> list[str]:
    """The marks of the spilled half's group, as the kernel lists them (``fanotify ino:`` an inode mark,
    ``fanotify sdev:`` a file system's)."""
    spill = box.sandbox.trees.tree(str(box.root))._watcher._fanotify  # type: ignore[union-attr]
    with open(f"/proc/self/fdinfo/{spill.group.fd}", encoding="ascii") as info:
        return [line for line in info if line.startswith(("fanotify ino:", "fanotify sdev:", "fanotify mnt_id:"))]


async def test_the_folders_past_the_watch_limit_are_kept_with_inode_marks(box: Box, big: int) -> None:
    await warm(box, big)
    assert isinstance(key_of(box, WATCHED), int) and isinstance(key_of(box, DEEP), bytes)
    marks = fanotify_marks(box)
    assert all(line.startswith("fanotify ino:") for line in marks), marks[:3]  # never the file system's
    assert big - SPILL_AT <= len(marks) <= big, (len(marks), big)


async def test_events_from_both_halves_in_one_command_are_seen(box: Box, big: int) -> None:
    await warm(box, big)
    result = await run_listing_few(
        box, f"printf 'KEY=a-{box.tag}\\n' > {WATCHED}/.env && printf 'KEY=b-{box.tag}\\n' > {DEEP}/.env && echo made"
    )
    assert "made" in text(result)
    result = await run_listing_few(box, f"cat {WATCHED}/.env {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result), listed(box)


async def test_a_spilled_folder_moved_out_changed_and_moved_back_is_walked_again(box: Box, big: int) -> None:
    """Moved out of the tree, a folder keeps its inode mark (no descriptor is left to remove it with): what
    changes in it then is dropped as naming no folder of the tree, and moved back it is new to the walk."""
    await warm(box, big)
    dep = box.root / DEEP.removesuffix("/lib")
    away = box.base / "away"
    os.rename(dep, away)  # by another process: the tree's parent folder's event says it left
    await run_listing_few(box, "true")
    (away / "lib" / "new").mkdir()
    box.write(away / "lib" / "new" / ".env", f"KEY=sk-{box.tag}\n")
    await run_listing_few(box, "true")  # its events name no folder of the tree
    os.rename(away, dep)
    result = await run_listing_few(box, f"cat {DEEP}/new/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result), listed(box)


async def test_a_spilled_folder_deleted_and_made_again_is_walked_again(box: Box, big: int) -> None:
    await warm(box, big)
    await run_listing_few(box, f"rm -rf {DEEP.removesuffix('/lib')} && echo gone")
    await run_listing_few(box, f"mkdir -p {DEEP}/x && printf 'KEY=sk-{box.tag}\\n' > {DEEP}/x/.env && echo made")
    result = await run_listing_few(box, f"cat {DEEP}/x/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result), listed(box)


_UNPRIVILEGED_RUN = textwrap.dedent(
    """
    import json, sys, anyio
    sys.path.insert(0, sys.argv[3])
    from tests.unit.test_watch_spill import limit_inotify_watches
    from term2.adapters.sandbox import BubblewrapSandbox
    from term2.ports.sandbox import CommandRequest, SandboxFailed

    class Patch:
        def setattr(self, target, name, value):
            setattr(target, name, value)

    limit_inotify_watches(Patch(), int(sys.argv[4]))

    async def main(root, deep):
        sandbox = BubblewrapSandbox()
        said = []
        for command in (
            "true",
            "true",
            "printf 'KEY=sk-{tag}\\\\n' > {deep}/.env && git init -q {deep}/sub && echo planted",
            "cat {deep}/.env; echo done",
            "chmod 311 {deep} && echo done",
            "echo next",
        ):
            command = command.format(deep=deep, tag=sys.argv[5])
            request = CommandRequest(command=command, root=root, cwd=root, timeout_s=20)
            try:
                result = await sandbox.run(request)
                said.append({"output": result.output.decode(), "notices": list(result.notices)})
            except SandboxFailed as exc:
                said.append({"refused": str(exc)})
            if len(said) == 2:
                tree = sandbox.trees.tree(root)
                folder = tree._top
                for name in deep.split("/"):
                    folder = folder.children[name]
                said.append({"watcher": tree.watcher, "deep": type(folder.key).__name__})
        said.append({"listed": list(sandbox.trees.tree(root).history)})
        print("RESULT " + json.dumps(said))

    anyio.run(main, sys.argv[1], sys.argv[2])
    """
)


async def test_unprivileged_term2_keeps_a_tree_past_the_watch_limit_with_inode_marks(box: Box, watcher: str) -> None:
    """term2 itself unprivileged, as most users run it, with its inotify watches spent: the kernel accepts
    the inode marks (no CAP_SYS_ADMIN), the walks stay kept, plants in spilled folders are found, and a
    spilled folder made unlistable refuses the next command as it does with inotify."""
    if os.geteuid() != 0:
        pytest.skip("runs term2 itself as the workspace's unprivileged owner, which takes root to arrange")
    folders = make_tree(box.root)
    subprocess.run(["chown", "-R", f"{box.owner[0]}:{box.owner[1]}", str(box.root)], check=True)
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run(
        ["setpriv", f"--reuid={box.owner[0]}", f"--regid={box.owner[1]}", "--clear-groups", "--",
         sys.executable, "-I", "-c",
         f"import sys; sys.path.insert(0, {str(repo / 'src')!r}); exec({_UNPRIVILEGED_RUN!r})",
         str(box.root), DEEP, str(repo), str(SPILL_AT), box.tag],
        capture_output=True, text=True, timeout=100, check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    [said] = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    first, second, kept, plant, cat, chmod, nxt, counts = json.loads(said.removeprefix("RESULT "))
    assert "output" in first and "output" in second, (first, second)
    assert kept == {"watcher": SPILLED, "deep": "bytes"}, kept
    assert "planted" in plant["output"]
    assert any(f"quarantined {DEEP}/sub/.git" in n for n in plant["notices"]), plant
    assert "done" in cat["output"] and box.tag not in cat["output"], cat
    assert "done" in chmod["output"]
    assert any("cannot be listed" in n and "commands stay refused" in n for n in chmod["notices"]), chmod
    assert "refused" in nxt and f"{DEEP} cannot be listed" in nxt["refused"], nxt
    history = counts["listed"]
    assert history[0] >= folders and max(history[1:9]) <= FEW, history  # kept: only what changed is listed


async def test_a_spilled_folder_on_a_cloned_file_system_is_marked_itself(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two file systems cloned from one image (a copied disk or VM image) have one f_fsid, and each folder
    the same inode and generation on both: one fanotify key for two inodes. A spilled folder whose key the
    tree already knows must still get its own mark; given back the key without one, nothing it held was
    ever reported, and a .env made in it later stayed readable."""
    if box.mode != "user-owned":
        pytest.skip("the spill is the same whoever owns the workspace")
    if not big_tree.IS_ROOT:
        pytest.skip("mounting takes root")
    limit_inotify_watches(monkeypatch, 1)  # the workspace's root: every folder of the images spills
    box.sandbox.trees.watchers = ("inotify",)
    image = box.base / "a.img"
    subprocess.run(["truncate", "-s", "4M", str(image)], check=True)
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", f"root_owner={box.owner[0]}:{box.owner[1]}", str(image)], check=True)
    if subprocess.run(["mount", "-o", "loop", str(image), str(box.make_dir(box.root / "a"))], check=False).returncode:
        pytest.skip("no loop device to mount an image with here")
    box.make_dir(box.root / "a" / "x")
    subprocess.run(["umount", str(box.root / "a")], check=True)
    clone = box.base / "b.img"
    subprocess.run(["cp", str(image), str(clone)], check=True)
    with (
        big_tree.mounted("-o", "loop", str(image), str(box.root / "a")),
        big_tree.mounted("-o", "loop", str(clone), str(box.make_dir(box.root / "b"))),
    ):
        await box.run("true")
        await box.run("true")
        assert box.sandbox.trees.tree(str(box.root)).watcher == SPILLED
        assert key_of(box, "a/x") == key_of(box, "b/x")  # the clone: one key for both
        await box.run(f"printf 'KEY=sk-{box.tag}\\n' > b/x/.env && echo made")
        result = await box.run("cat b/x/.env; echo done")
        assert "done" in text(result) and box.tag not in text(result), listed(box)
