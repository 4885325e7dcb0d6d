"""What the pre- and post-command walk of the workspace costs (ADR 0005, ADR 0010).

Usage: python benchmarks/bench_sandbox_scan.py [--sizes 1000,10000,100000,300000] [--runs 5] [--owner UID]

For each size, a tree of that many entries (folders of 100 files, 10 folders
per level, a few .env files and one nested repository) is made under /tmp;
then the walk alone (scan_tree) and a whole `true` through BubblewrapSandbox
(walk, bwrap, walk again) are timed, median of --runs warm runs, and compared
with the same `true` in an empty workspace. Run as root, the tree is root-owned
(the sandbox maps to host root, and the post-run walk also stats every file
for setid bits) unless --owner gives it to another uid (bwrap then runs as it).
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
from term2.ports.sandbox import CommandRequest


def make_tree(root: Path, entries: int) -> None:
    made = 0
    folder_index = 0
    while made < entries:
        folder = root / f"pkg{folder_index // 10}" / f"mod{folder_index % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(min(100, entries - made)):
            (folder / f"f{i}.py").touch()
        made += 100 + 1
        folder_index += 1
    (root / ".env").write_text("KEY=x\n")
    (root / "pkg0" / ".env.local").write_text("KEY=y\n")
    subprocess.run(["git", "init", "-q", str(root / "pkg0" / "vendored")], check=True)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def time_command(sandbox: BubblewrapSandbox, root: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await sandbox.run(CommandRequest(command="true", root=root, cwd=root))
        samples.append(time.perf_counter() - start)
    return median_ms(samples)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000,300000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--owner", type=int, default=None)
    args = parser.parse_args()
    sandbox = BubblewrapSandbox()
    await sandbox.status()
    print("| entries | walk alone (ms) | `true` through the sandbox (ms) |")
    print("|---:|---:|---:|")
    for size in [0, *(int(s) for s in args.sizes.split(","))]:
        base = Path(tempfile.mkdtemp(prefix="term2-bench-scan-"))
        try:
            if size:
                make_tree(base, size)
            if args.owner is not None:
                os.chmod(base, 0o755)
                subprocess.run(["chown", "-R", f"{args.owner}:{args.owner}", str(base)], check=True)
            root = os.path.realpath(base)
            walks = []
            for _ in range(args.runs):
                start = time.perf_counter()
                scan = scan_tree(root)
                walks.append(time.perf_counter() - start)
            command = await time_command(sandbox, root, args.runs)
            print(f"| {scan.entries:,} | {median_ms(walks):.1f} | {command:.1f} |")
        finally:
            shutil.rmtree(base)


if __name__ == "__main__":
    anyio.run(main)
