"""What the walks of the workspace before and after each command cost, by tree size (ADR 0005, 0010, 0031, 0033).

Usage: python benchmarks/bench_sandbox_scan.py [--sizes 10000,100000,500000,1500000] [--runs 9]
                                               [--dir /var/cache] [--owner UID] [--wide]
                                               [--watchers fanotify,inotify]

For each size, a monorepo-shaped tree of about that many entries is made under
--dir with bare os.mkdir/os.open calls (9 packages whose node_modules hold
nearly all of it, ~7 entries a folder as npm leaves them, two `.env` files, a
nested repository, an AGENTS.md; ~280 MB of inodes per 500,000 entries; --wide: folders of 100
files instead, as bench_search.py's monorepo), then
timed, median of --runs warm runs:
- the full walk alone (`scan_tree`, what every command paid before ADR 0031);
- the first command (`true` through BubblewrapSandbox: the full walk that sets up the watches);
- a warm `true` command, and the same in an empty workspace: the difference is what the walks
  cost a command now; and the walks alone (the scan before and after, as the sandbox makes them).
The first command and the warm ones are measured once per watcher of --watchers (fanotify, one
mark per file system, takes root; inotify, a watch per folder, spills to a fanotify inode mark per
folder past fs.inotify.max_user_watches, and falls back to full walks past fs.fanotify.max_user_marks
too), each with a sandbox of its own: the "watcher" column says which one the tree was kept with
("inotify+fanotify": spilled; "none": walked in full every time). Past the fallback the warm runs are
cut to 2 (each costs two full walks).
The tree is removed before the next size is made. Run as root, the tree is
root-owned (the sandbox maps to host root and the walks also look for setid
files) unless --owner gives it to another uid (bwrap then runs as it). term2
itself unprivileged, as most users run it (the per-user limits are then that
uid's): run the script as the owner, e.g. `setpriv --reuid=65534 --regid=65534
--clear-groups -- python benchmarks/bench_sandbox_scan.py --owner 65534 --dir
<a folder of 65534's> --watchers inotify`.
Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from term2.adapters.sandbox import BubblewrapSandbox
from term2.adapters.sandbox.tree_scan import scan_tree
from term2.adapters.sandbox.watched_folders import WATCHERS
from term2.ports.sandbox import CommandRequest


def touch(path: bytes, data: bytes = b"") -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if data:
        os.write(fd, data)
    os.close(fd)


def make_tree(root: Path, entries: int, wide: bool = False) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    base = os.fsencode(root)
    touch(base + b"/.gitignore", b"node_modules/\n")
    touch(base + b"/AGENTS.md", b"Run the tests.\n")
    made = 0
    for p in range(9):
        src = base + b"/packages/p%d/src" % p
        os.makedirs(src)
        os.mkdir(base + b"/packages/p%d/node_modules" % p)
        for i in range(35):
            touch(src + b"/f%d.ts" % i, b"export const v = %d;\n" % i)
        made += 38
    dep = 0
    while wide and made < entries:
        folder = base + b"/packages/p%d/node_modules/m%d" % (dep % 9, dep)
        os.mkdir(folder)
        for i in range(100):
            touch(folder + b"/i%d.js" % i)
        made += 101
        dep += 1
    while made < entries:
        folder = base + b"/packages/p%d/node_modules/d%d" % (dep % 9, dep)
        os.mkdir(folder)
        for name in (b"package.json", b"index.js", b"README.md", b"LICENSE"):
            touch(folder + b"/" + name)
        for sub, count in ((b"lib", 8), (b"dist", 6)):
            os.mkdir(folder + b"/" + sub)
            for i in range(count):
                touch(folder + b"/" + sub + b"/m%d.js" % i)
        made += 21
        dep += 1
    touch(base + b"/.env", b"KEY=x\n")
    touch(base + b"/packages/p0/.env.local", b"KEY=y\n")
    subprocess.run(["git", "init", "-q", str(root / "packages" / "p1" / "vendored")], check=True)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def time_true(sandbox: BubblewrapSandbox, root: str) -> float:
    start = time.perf_counter()
    result = await sandbox.run(CommandRequest(command="true", root=root, cwd=root))
    elapsed = time.perf_counter() - start
    assert result.exit_code == 0, result
    return elapsed


async def measure(base: Path, size: int, args: argparse.Namespace, empty: dict[str, float]) -> list[str]:
    owner = args.owner
    if size:
        made = time.perf_counter()
        make_tree(base, size, args.wide)
        print(f"  made {size:,} entries in {time.perf_counter() - made:.0f} s", file=sys.stderr)
    if owner is not None:
        os.chmod(base, 0o755)
        subprocess.run(["chown", "-R", f"{owner}:{owner}", str(base)], check=True)
    root = os.path.realpath(base)
    host_root = os.stat(root).st_uid == 0 and os.geteuid() == 0
    start = time.perf_counter()
    full = scan_tree(root, limit=10_000_000, setid=host_root)
    full_ms = (time.perf_counter() - start) * 1000
    rows = []
    for kind in args.watchers.split(","):
        sandbox = BubblewrapSandbox()
        sandbox.trees.watchers = (kind,)
        first_ms = await time_true(sandbox, root) * 1000
        trees = sandbox.trees
        watcher = trees.tree(root).watcher or "none"
        runs = args.runs if watcher != "none" else min(args.runs, 2)
        warm = [await time_true(sandbox, root) for _ in range(runs)]
        walks = []
        for _ in range(runs):
            start = time.perf_counter()
            trees.scan(root, setid=host_root)
            trees.scan(root, setid=host_root)
            walks.append(time.perf_counter() - start)
        listed = max(list(trees.tree(root).history)[1:])
        trees.close()
        warm_ms = median_ms(warm)
        if size == 0:
            empty[kind] = warm_ms
        over = warm_ms - empty.get(kind, warm_ms)
        rows.append(
            f"| {full.entries:,} | {full.listed:,} | {watcher} | {full_ms:,.0f} | {first_ms:,.0f} | {warm_ms:.1f} | "
            f"{over:+.1f} | {median_ms(walks):.2f} | {listed:,} |"
        )
    return rows


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000,500000,1500000")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--dir", default="/var/cache" if os.access("/var/cache", os.W_OK) else None)
    parser.add_argument("--owner", type=int, default=None)
    parser.add_argument("--wide", action="store_true")
    parser.add_argument("--watchers", default=",".join(WATCHERS))
    args = parser.parse_args()
    status = await BubblewrapSandbox().status()
    assert status.available, status.detail
    print(
        "| entries | folders | watcher | full walk (ms) | first command (ms) | warm `true` (ms) "
        "| over an empty workspace (ms) | both walks of a warm command (ms) | most folders listed by a warm walk |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    empty: dict[str, float] = {}
    for size in [0, *(int(s) for s in args.sizes.split(","))]:
        base = Path(tempfile.mkdtemp(prefix="term2-bench-scan-", dir=args.dir))
        try:
            for row in await measure(base, size, args, empty):
                print(row, flush=True)
        finally:
            shutil.rmtree(base)


if __name__ == "__main__":
    anyio.run(main)
