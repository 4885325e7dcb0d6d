"""Threat suite, the kept walks (ADR 0031, 0033): a folder deleted and made again at the same path.

ext4 hands a freed inode number straight back, so ``rm -rf d && mkdir d`` gives
the same (st_dev, st_ino) at the same path, and the parent's listing looks the
same. The new folder is another inode all the same (another generation, so
another file handle for fanotify, another watch for inotify): a kept walk that
went on naming it by the old one's key would drop every later event inside it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from tests.sandbox import test_threats_big_tree as big_tree
from tests.sandbox.commands import text
from tests.sandbox.test_threats_big_tree import DEEP, listed, run_listing_few, warm

if TYPE_CHECKING:
    from tests.sandbox.conftest import Box

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed: the threat suite needs the real sandbox", allow_module_level=True)

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

# the big tree's fixtures: a generated ~5,000-entry tree, with each watcher in turn
big = big_tree.big
watcher = big_tree.watcher


async def test_an_env_file_in_a_folder_made_again_at_the_same_inode_is_masked(box: Box, big: int) -> None:
    await warm(box, big)
    before = os.stat(box.root / DEEP).st_ino
    # inode numbers are handed back often, not always: try until this one is (a few times at most)
    await box.run(
        f"rm -rf {DEEP} && mkdir {DEEP} && for i in $(seq 60); do"
        f" [ $(stat -c %i {DEEP}) = {before} ] && break; rmdir {DEEP} && sleep 0.2 && mkdir {DEEP}; done; echo made",
        timeout_s=60.0,
    )
    if os.stat(box.root / DEEP).st_ino != before:
        pytest.skip("this file system did not give the folder its old inode number back")
    await run_listing_few(box, "true")
    await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/.env && echo made")
    result = await run_listing_few(box, f"cat {DEEP}/.env; echo done")
    assert "done" in text(result) and box.tag not in text(result), listed(box)


async def test_an_env_file_on_a_file_system_mounted_again_under_an_old_device_number_is_masked(
    box: Box, big: int, watcher: str
) -> None:
    """A tmpfs unmounted and another mounted at its place gets the same st_dev: fanotify must mark the new
    one (a mark is per file system), not take it for the one already marked."""
    if os.geteuid() != 0:
        pytest.skip("mounting takes root")
    mnt = box.make_dir(box.root / DEEP / "mnt")
    options = ["-t", "tmpfs", "-o", f"size=1m,uid={box.owner[0]},gid={box.owner[1]}"]
    await warm(box, big)
    with big_tree.mounted(*options, "t1", str(mnt)):
        await box.run("true")  # the full walk (the mount table changed) meets, and marks, the first tmpfs
        first = os.stat(mnt).st_dev
    with big_tree.mounted(*options, "t2", str(mnt)):
        if os.stat(mnt).st_dev != first:
            pytest.skip("the second tmpfs did not get the first one's device number")
        await box.run("true")
        await run_listing_few(box, f"printf 'KEY=sk-{box.tag}\\n' > {DEEP}/mnt/.env && echo made")
        result = await run_listing_few(box, f"cat {DEEP}/mnt/.env; echo done")
        assert "done" in text(result) and box.tag not in text(result), listed(box)
