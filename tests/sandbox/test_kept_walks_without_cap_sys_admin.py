"""The kept walks (ADR 0033) for a term2 without CAP_SYS_ADMIN, as most users run it.

fanotify_init succeeds unprivileged (a group reporting file handles needs no
capability since Linux 5.13); only the filesystem mark is refused. The walks
then fall to inotify, and the fanotify group, which can never serve, must hold
no reader thread (one a sandbox, for the life of the process) and must not be
made again for each root. Run in a child process with CAP_SYS_ADMIN dropped
from its bounding set, through the real TreeWatches and the real kernel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dropping a capability from a child takes root to have it")

_CHILD = """
import json, sys, threading
from term2.adapters.sandbox.tree_watches import TreeWatches
from term2.adapters.sandbox import fanotify
made = []
real_init = fanotify.FanotifyGroup.__init__
def init(self):
    made.append(1)
    real_init(self)
fanotify.FanotifyGroup.__init__ = init
trees = TreeWatches()
for root in sys.argv[1:]:
    trees.scan(root)
    trees.scan(root)
print("RESULT " + json.dumps({
    "watchers": [trees.tree(root).watcher for root in sys.argv[1:]],
    "listed": [list(trees.tree(root).history) for root in sys.argv[1:]],
    "threads": sorted(t.name for t in threading.enumerate()),
    "groups": len(made),
}))
"""


def test_unprivileged_kept_walks_use_inotify_and_leave_no_fanotify_reader(tmp_path: Path) -> None:
    roots = []
    for name in ("one", "two", "three"):
        root = tmp_path / name
        for i in range(20):
            (root / f"d{i}" / "sub").mkdir(parents=True)
        roots.append(str(root))
    src = Path(__file__).resolve().parents[2] / "src"
    child = subprocess.run(
        ["setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--",
         sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(src)!r}); exec({_CHILD!r})", *roots],
        capture_output=True, text=True, timeout=100, check=False, env={"PATH": "/usr/bin:/bin", "HOME": "/"},
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    [said] = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    result = json.loads(said.removeprefix("RESULT "))
    assert result["watchers"] == ["inotify"] * 3, result
    assert all(listed[0] >= 41 and listed[1] <= 1 for listed in result["listed"]), result
    assert "term2-fanotify" not in result["threads"], result  # a group no file system could be marked for
    assert result["groups"] == 1, result  # refused once for the process's sandbox, not tried again per root
