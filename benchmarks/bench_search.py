"""grep, glob and list_dir beside ripgrep on the trees of issue 20 (ADR 0026).

Usage: python benchmarks/bench_search.py [--runs 5] [--big 500000] [--keep DIR] [--only LABEL]

Builds two git repositories under /tmp (or --keep DIR, reused when present):
- `project`: 3,200 source files with nested .gitignore files (negations,
  anchored, directory-only and `**` patterns), `.git/info/exclude` entries, a
  25,600-file `node_modules/`, a 5,000-file `.venv/` and a `build/` folder;
- `monorepo`: about --big entries (313 tracked files; gitignored node_modules
  in 9 packages holding nearly all of them, a `.venv/`, two `.env` files and a
  nested repository), made with bare `os.open` calls so it takes seconds.
Then times, median of --runs warm runs: `rg` as a user runs it (default flags,
output to a pipe), and term2's tools called through the real toolbox in this
process (tool call → result text, the gate and the bubblewrap view included),
once with a view made per call and once with the kept views term2 runs with
(ADR 0037). Timing lives here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from term2.adapters.workspace import RipgrepWorkspaceSearch  # noqa: E402
from term2.app.edit_tools import EDIT_TOOL_SETS  # noqa: E402
from term2.app.entrypoints.child_watcher import use_pidfds  # noqa: E402
from term2.app.tools.toolbox import WorkspaceToolbox, default_tools  # noqa: E402
from term2.domain.workspace import SessionAccess  # noqa: E402
from term2.ports.llm import ToolCallRequest  # noqa: E402
from term2.ports.tools import ToolContext  # noqa: E402
from tests.fakes.approvers import FixedApprover  # noqa: E402
from tests.fakes.sandboxes import CannedSandbox  # noqa: E402
from tests.fakes.turns import live_turn  # noqa: E402

RG = os.path.join(sysconfig.get_path("scripts"), "rg")
SOURCE = "import os\n\n\ndef handle_{n}_request(value):\n    return value + {n}  # TODO tune\n"


def touch(path: bytes, data: bytes = b"") -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if data:
        os.write(fd, data)
    os.close(fd)


def make_project(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(3200):
        folder = root / "src" / f"pkg{i // 100}" / f"mod{(i // 10) % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        touch(os.fsencode(folder / f"m{i}.py"), SOURCE.format(n=i).encode())
    for i in range(25600):
        folder = root / "node_modules" / f"lib{i // 200}" / "dist"
        folder.mkdir(parents=True, exist_ok=True)
        touch(os.fsencode(folder / f"i{i}.js"), b"module.exports = function handle_request() { /* TODO */ };\n")
    for i in range(5000):
        folder = root / ".venv" / "lib" / f"site{i // 250}"
        folder.mkdir(parents=True, exist_ok=True)
        touch(os.fsencode(folder / f"v{i}.py"), SOURCE.format(n=i).encode())
    (root / "build").mkdir(exist_ok=True)
    touch(os.fsencode(root / "build" / "out.log"), b"TODO\n")
    (root / ".gitignore").write_text("node_modules/\n.venv/\n/build\n*.log\n!keep.log\n**/gen/**\n")
    (root / "src" / ".gitignore").write_text("pkg3/\n!pkg3/mod0/\n*.tmp\n")
    (root / ".git" / "info" / "exclude").write_text("scratch/\n")


def make_monorepo(root: Path, entries: int) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("node_modules/\n.venv/\n")
    made = 0
    for p in range(9):
        pkg = root / "packages" / f"p{p}"
        (pkg / "src").mkdir(parents=True, exist_ok=True)
        for i in range(35):
            touch(os.fsencode(pkg / "src" / f"f{i}.ts"), f"export const v{i} = 'TODO {i}';\n".encode())
            made += 1
    per_package = max(0, entries - made - 20_000) // 9
    for p in range(9):
        base = os.fsencode(root / "packages" / f"p{p}" / "node_modules")
        os.mkdir(base)
        for d in range(per_package // 101):
            folder = base + b"/m%d" % d
            os.mkdir(folder)
            for i in range(100):
                touch(folder + b"/i%d.js" % i)
    venv = os.fsencode(root / ".venv")
    os.mkdir(venv)
    for d in range(20_000 // 101):
        folder = venv + b"/s%d" % d
        os.mkdir(folder)
        for i in range(100):
            touch(folder + b"/v%d.py" % i)
    touch(os.fsencode(root / ".env"), b"KEY=x\n")
    touch(os.fsencode(root / "packages" / "p0" / ".env.local"), b"KEY=y\n")
    subprocess.run(["git", "init", "-q", str(root / "packages" / "p1" / "vendored")], check=True)


def count_entries(root: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(root))


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def time_rg(root: Path, args: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run([RG, *args], cwd=root, stdout=subprocess.PIPE, check=False)
        samples.append(time.perf_counter() - start)
    return median_ms(samples[1:])


def tool_call(root: Path, search: RipgrepWorkspaceSearch) -> Callable[[str, str], Awaitable[str]]:
    toolbox = WorkspaceToolbox(default_tools(EDIT_TOOL_SETS["edit_file"], search))
    ctx = ToolContext(
        "bench", SessionAccess(str(root)), FixedApprover(), CannedSandbox(), _ignore, _ignore, live_turn("bench")
    )
    counter = iter(range(1_000_000))

    async def call(name: str, arguments: str) -> str:
        return await toolbox.execute(ToolCallRequest(f"call-{next(counter)}", name, arguments), ctx)

    return call


async def _ignore(_event: object) -> None:
    return None


async def time_tool(root: Path, name: str, arguments: str, runs: int, kept: bool) -> tuple[float, str]:
    search = RipgrepWorkspaceSearch(kept=kept)  # kept: as the composition root builds it
    call = tool_call(root, search)
    text = await call(name, arguments)  # warm (and, kept, the view's server started)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        text = await call(name, arguments)
        samples.append(time.perf_counter() - start)
    await search.aclose()
    return median_ms(samples), text


CASES = [
    ("literal grep", ["-e", "handle_7_request"], "grep", '{"pattern": "handle_7_request"}'),
    ("regex grep", ["-e", r"def handle_\d+7_request\("], "grep", r'{"pattern": "def handle_\\d+7_request\\("}'),
    ("glob `*.py`", ["--files", "-g", "*.py"], "glob", '{"pattern": "*.py"}'),
    ("whole-tree walk", ["--files"], "glob", '{"pattern": "**"}'),
    ("list_dir of the root (marks) vs rg listing it", ["--files", "--max-depth", "1"], "list_dir", "{}"),
    # The marks need what rg knows only after walking: whether each folder holds a file git could track.
    ("list_dir of the root (marks) vs rg's walk", ["--files"], "list_dir", "{}"),
    # term2 opens the file itself and hands rg the descriptor (ADR 0039); rg opens the path.
    ("grep of one file", ["-e", "TODO", "FILE"], "grep", '{"pattern": "TODO", "path": "FILE"}'),
]
ONE_FILE = {"project": "src/pkg0/mod0/m7.py", "monorepo": "packages/p0/src/f7.ts"}


async def bench(root: Path, runs: int, only: str | None) -> None:
    print(f"\n{root.name}: {count_entries(root):,} entries\n")
    print("| case | rg (ms) | term2, view per call (ms) | ratio | term2, kept view (ms) | ratio | term2 result |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, rg_args, name, arguments in CASES:
        if only is not None and only not in label:
            continue
        rg_args = [ONE_FILE[root.name] if arg == "FILE" else arg for arg in rg_args]
        arguments = arguments.replace("FILE", ONE_FILE[root.name])
        rg_ms = time_rg(root, rg_args, runs)
        per_call_ms, _ = await time_tool(root, name, arguments, runs, kept=False)
        kept_ms, text = await time_tool(root, name, arguments, runs, kept=True)
        summary = f"{len(text.splitlines())} lines"
        if "[truncated" in text:
            summary += ", capped"
        print(
            f"| {label} | {rg_ms:.1f} | {per_call_ms:.1f} | {per_call_ms / rg_ms:.2f}× "
            f"| {kept_ms:.1f} | {kept_ms / rg_ms:.2f}× | {summary} |"
        )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--big", type=int, default=500_000)
    parser.add_argument("--keep", default=None, help="build the trees here and reuse them")
    parser.add_argument("--only", default=None, help="only the cases whose label holds this")
    args = parser.parse_args()
    use_pidfds()  # as `term2 acp` and `term2 exec` do once their loop runs
    base = Path(args.keep or tempfile.mkdtemp(prefix="term2-bench-search-"))
    base.mkdir(parents=True, exist_ok=True)
    project, monorepo = base / "project", base / "monorepo"
    for root, make in ((project, make_project), (monorepo, lambda r: make_monorepo(r, args.big))):
        if not root.exists():
            start = time.perf_counter()
            root.mkdir()
            make(root)
            print(f"built {root} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    for root in (project, monorepo):
        await bench(root, args.runs, args.only)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(base)], check=True)


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
