"""grep, glob and list_dir on ripgrep (issue 20): results a model can use, names Linux allows, and the old guarantees.

Each test drives the real toolbox over real files and a real rg in its
bubblewrap view; the ignore rules themselves are checked against git in
test_search_ignore_fidelity.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from term2.adapters.workspace import ripgrep
from term2.app.tools import search_walks
from term2.app.tools.names import shown, unshown
from term2.domain.history import ToolStatus
from term2.domain.workspace import SessionAccess
from tests.fakes.approvers import FixedApprover
from tests.fakes.sandboxes import CannedSandbox
from tests.unit.test_tools import Harness

pytestmark = pytest.mark.anyio


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    """A root holding `sub/`, and a folder beside it holding `victim.txt` ("precious outside")."""
    root = Path(os.path.realpath(tmp_path)) / "root"
    outside = Path(os.path.realpath(tmp_path)) / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim.txt").write_text("precious outside\n")
    return Harness(root, outside, FixedApprover(), CannedSandbox(), SessionAccess(str(root)))


def _repo(h: Harness) -> None:
    subprocess.run(["git", "init", "-q", str(h.root)], check=True)


# --- line numbers, long lines, large files, order, caps ------------------------------------


async def test_grep_numbers_lines_as_read_file_does(h: Harness) -> None:
    """Only `\\n` ends a line: a form feed, U+2028 and `\\r` inside `\\r\\n` do not (str.splitlines split them)."""
    (h.root / "f.txt").write_bytes("a\fb\nc\u2028d\r\nneedle one\r\ne\x0bf\x1cg\nlast needle two".encode())
    text = await h.call("grep", pattern="needle")
    assert text.splitlines() == ["f.txt:3:needle one", "f.txt:5:last needle two"]
    for line, needle in ((3, "needle one"), (5, "last needle two")):
        read = await h.call("read_file", path="f.txt", offset=line, limit=1)
        assert read.startswith(f"{line:6}\t") and needle in read


async def test_a_long_line_shows_the_match_cut_around_it(h: Harness) -> None:
    (h.root / "min.js").write_text("x" * 200_000 + "NEEDLE" + "y" * 200_000 + "\n")
    text = await h.call("grep", pattern="NEEDLE")
    line = text.splitlines()[0]
    assert line.startswith("min.js:1:[line cut] xxx") and line.endswith("yyy [line cut]")
    assert "NEEDLE" in line and len(line) < 400


async def test_a_large_text_file_is_searched_not_skipped(h: Harness) -> None:
    (h.root / "big.json").write_text('{"k": 1}\n' * 700_000 + '"needle"\n')  # 6.3 MB: over the old 4 MiB cap
    text = await h.call("grep", pattern="needle")
    assert text == 'big.json:700001:"needle"\n'


async def test_results_come_in_path_order_and_a_cap_says_what_was_left_out(h: Harness) -> None:
    for name in ("b.txt", "a/z.txt", "a.txt"):
        (h.root / name).parent.mkdir(exist_ok=True)
        (h.root / name).write_text("hit\n" * 80)
    text = await h.call("grep", pattern="hit")
    shown_files = [line.split(":")[0] for line in text.splitlines()[:-1]]
    assert shown_files == ["a/z.txt"] * 80 + ["a.txt"] * 80 + ["b.txt"] * 40  # name by name: "a" before "a.txt"
    assert text.splitlines()[-1] == (
        "[truncated: the first 200 matches in path order (compared folder name by folder name, in byte order); "
        "matches after b.txt:40 were left out: narrow the pattern, path or include]"
    )


async def test_past_what_is_sorted_here_rg_orders_the_results_itself(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SORT_HERE times the cap, rg reruns with `--sort path`: the same first results, the same note."""
    for name in ("b.txt", "a/z.txt", "a.txt"):
        (h.root / name).parent.mkdir(exist_ok=True)
        (h.root / name).write_text("hit\n" * 80)
    sorted_here = await h.call("grep", pattern="hit")
    files_here = await h.call("glob", pattern="*.txt")
    monkeypatch.setattr(search_walks, "SORT_HERE", 1)
    assert await h.call("grep", pattern="hit") == sorted_here
    assert await h.call("glob", pattern="*.txt") == files_here == "a/z.txt\na.txt\nb.txt\n"


async def test_include_and_glob_take_path_globs_as_rg_does(h: Harness) -> None:
    for name in ("packages/a/x.js", "packages/b/c/y.js", "other/z.js", "packages/a/n.ts"):
        (h.root / name).parent.mkdir(parents=True, exist_ok=True)
        (h.root / name).write_text("needle\n")
    text = await h.call("grep", pattern="needle", include="packages/**/*.js")
    assert text.splitlines() == ["packages/a/x.js:1:needle", "packages/b/c/y.js:1:needle"]
    found = await h.call("glob", pattern="packages/**/*.js")
    assert found.splitlines() == ["packages/a/x.js", "packages/b/c/y.js"]
    anywhere = await h.call("glob", pattern="*.js")
    assert anywhere.splitlines() == ["other/z.js", "packages/a/x.js", "packages/b/c/y.js"]


async def test_a_pattern_in_rust_syntax_and_one_needing_pcre2_both_work(h: Harness) -> None:
    (h.root / "a.py").write_text("foo(bar)\nfoobaz\n")
    assert (await h.call("grep", pattern=r"\p{L}+\(")).splitlines() == ["a.py:1:foo(bar)"]
    assert (await h.call("grep", pattern=r"foo(?!\()")).splitlines() == ["a.py:2:foobaz"]
    bad = await h.call("grep", pattern="(")
    assert "invalid regular expression" in bad and h.last().status is ToolStatus.FAILED


# --- ignored paths stay reachable, and list_dir says which are ignored -------------------


async def test_ignored_paths_are_skipped_marked_and_still_reachable(h: Harness) -> None:
    _repo(h)
    (h.root / ".gitignore").write_text("node_modules/\n*.log\n")
    (h.root / "node_modules" / "lib").mkdir(parents=True)
    (h.root / "node_modules" / "lib" / "x.js").write_text("needle\n")
    (h.root / "run.log").write_text("needle\n")
    (h.root / "src").mkdir()
    (h.root / "src" / "a.py").write_text("needle\n")
    (h.root / "empty").mkdir()
    assert (await h.call("grep", pattern="needle")).splitlines() == ["src/a.py:1:needle"]
    everything = await h.call("grep", pattern="needle", include_ignored=True)
    assert everything.splitlines() == ["node_modules/lib/x.js:1:needle", "run.log:1:needle", "src/a.py:1:needle"]
    inside = await h.call("grep", pattern="needle", path="node_modules")
    assert inside.splitlines() == ["node_modules/lib/x.js:1:needle"]
    assert (await h.call("glob", pattern="*.js")).startswith("No files match")
    assert (await h.call("glob", pattern="*.js", path="node_modules")).splitlines() == ["node_modules/lib/x.js"]
    assert (await h.call("glob", pattern="*.js", include_ignored=True)).splitlines() == ["node_modules/lib/x.js"]
    listed = await h.call("list_dir")
    assert listed.splitlines() == [
        ".gitignore",
        "empty/",
        "node_modules/ [ignored]",
        "run.log [ignored]",
        "src/",
        "sub/",
    ]


# --- every name Linux allows -------------------------------------------------------------


def test_shown_names_are_unambiguous_and_round_trip() -> None:
    names = ["plain.txt", "caf\udce9.txt", "caf\\xe9.txt", "a\\b", "line\nbreak", "tab\there", "ünï.txt"]
    shown_names = [shown(n) for n in names]
    assert shown_names[:3] == ["plain.txt", "caf\\xe9.txt", "caf\\\\xe9.txt"]
    assert shown("line\nbreak") == "line\\x0abreak" and shown("ünï.txt") == "ünï.txt"
    assert len(set(shown_names)) == len(names)
    assert [unshown(s) for s in shown_names] == names
    for text in shown_names:
        text.encode("utf-8")  # no lone surrogate left: the store and the wire can carry it


async def test_a_name_that_is_not_utf8_never_fails_a_search_tool(h: Harness) -> None:
    os.mkdir(os.path.join(os.fsencode(h.root), b"d\xe9"))
    with open(os.path.join(os.fsencode(h.root), b"d\xe9", b"caf\xe9.txt"), "wb") as f:
        f.write(b"needle\n")
    grep = await h.call("grep", pattern="needle")
    glob = await h.call("glob", pattern="*.txt")
    listed = await h.call("list_dir")
    inner = await h.call("list_dir", path="d\\xe9")  # passed back exactly as shown
    assert grep == "d\\xe9/caf\\xe9.txt:1:needle\n"
    assert glob == "d\\xe9/caf\\xe9.txt\n"
    assert listed == "d\\xe9/\nsub/\n" and inner == "caf\\xe9.txt\n"
    assert h.statuses().count(ToolStatus.FAILED) == 0
    json.dumps([grep, glob, listed, inner, [c.title for c in h.calls()]], ensure_ascii=False).encode()


# --- the file tools' guarantees, kept -----------------------------------------------------


async def test_links_to_outside_are_neither_listed_nor_searched(h: Harness) -> None:
    os.symlink(h.outside, h.root / "out")
    os.symlink(h.outside / "victim.txt", h.root / "v.txt")
    (h.root / "in.txt").write_text("precious inside\n")
    assert (await h.call("grep", pattern="precious")).splitlines() == ["in.txt:1:precious inside"]
    assert (await h.call("glob", pattern="**")).splitlines() == ["in.txt"]


async def test_secret_files_at_any_depth_are_skipped_and_counted(h: Harness) -> None:
    _repo(h)
    (h.root / "a" / "b" / "c").mkdir(parents=True)
    (h.root / "a" / "b" / "c" / ".env").write_text("KEY=needle\n")
    (h.root / "a" / ".env.production").write_text("KEY=needle\n")
    (h.root / "a" / "x.py").write_text("needle\n")
    text = await h.call("grep", pattern="needle")
    assert text == "a/x.py:1:needle\n[2 secret files (.env) skipped; read_file asks before reading them]\n"
    # The count is of files met, not of files matched: a pattern cannot probe what a secret holds.
    assert "[2 secret files (.env) skipped" in await h.call("grep", pattern="KEY=nomatch|needle")
    assert "[2 secret files (.env) skipped" in await h.call("grep", pattern="zzz")


async def test_a_planted_link_to_a_device_and_a_fifo_ignore_file_do_not_hang(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(h)
    os.symlink("/dev/zero", h.root / ".gitignore")  # no /dev in the view: it leads nowhere
    (h.root / "a.txt").write_text("needle\n")
    assert await h.call("grep", pattern="needle") == "a.txt:1:needle\n"
    (h.root / "sub" / "x.txt").write_text("needle\n")
    os.mkfifo(h.root / "sub" / ".gitignore")  # rg opens ignore files blocking: the time bound ends it
    monkeypatch.setattr(search_walks, "TIME_LIMIT", 1.0)
    with anyio.fail_after(120):  # a guard against a hang only: the FIFO never ends, the bound does
        text = await h.call("grep", pattern="needle", path="sub")
    assert "[search stopped after 1 s" in text


async def test_a_cancelled_search_kills_ripgrep(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    _repo(h)
    os.mkfifo(h.root / "sub" / ".gitignore")
    started: list[int] = []
    running = anyio.Event()
    real_open = anyio.open_process

    async def spying(*args: object, **kwargs: object) -> object:
        process = await real_open(*args, **kwargs)  # type: ignore[arg-type]
        started.append(process.pid)
        running.set()
        return process

    monkeypatch.setattr(ripgrep.anyio, "open_process", spying)
    # Cancelled once rg's process is started (it then blocks on the FIFO): not after a delay, which a busy
    # machine could spend before the process exists.
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(h.call, "grep", '{"pattern": "needle", "path": "sub"}')
        await running.wait()
        tasks.cancel_scope.cancel()
    assert started
    for pid in started:
        assert not os.path.exists(f"/proc/{pid}"), "the bwrap holding rg outlived the cancelled turn"
