"""grep, glob and list_dir see what git sees: checked against `git ls-files --others --exclude-standard`.

Each case writes random ignore files (the root's, nested ones, `.git/info/exclude`
and a global excludes file found through a temporary XDG_CONFIG_HOME) over one
fixed tree whose names exercise negation, anchoring, directory-only patterns,
`**`, character classes and escapes, and compares every tool's view with git's,
from the repository's top and from a session folder below it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from term2.adapters.workspace import RipgrepWorkspaceSearch
from term2.app.tools.globbing import Include
from term2.app.tools.listing import glob_paths, list_entries
from term2.app.tools.search import SearchQuery, grep

SEARCH = RipgrepWorkspaceSearch()
FILES = (
    "a.txt", "keep.log", "x.log", "#hash", "!bang", "x1.md", "a.js", "b.js",
    "a/a.txt", "a/x.log", "a/keep.log", "a/b/x.txt", "a/b/c.py", "a/b/deep/x.txt", "a/tmp/t.txt",
    "build/out.o", "build/keep/k.txt", "a/build/o.txt", "node_modules/p/i.js", "doc/keep/d.md",
    "doc/other/d.md", "tmp/t.txt", "src/tmp/deep/t.py",
)  # fmt: skip
PATTERNS = (
    "*.log", "!keep.log", "/build", "build/", "build", "!build/keep/", "a/**/x.txt", "**/tmp", "**/tmp/",
    "node_modules/", "*.txt", "!a/*.txt", "b/", "\\#hash", "\\!bang", "x?.md", "[ab].js", "/a/b/*.py",
    "doc/**", "!doc/keep/", "!doc/keep/**", "deep", "!*.py", "a/", "/x.log", "**/keep/**", "*.o", "!/a.txt",
)  # fmt: skip
IGNORE_FILES = (".gitignore", "a/.gitignore", "a/b/.gitignore", ".git/info/exclude", "GLOBAL")

ignore_sets = st.fixed_dictionaries({where: st.lists(st.sampled_from(PATTERNS), max_size=5) for where in IGNORE_FILES})


def _git(repo: Path, *args: str, env: dict[str, str]) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@contextmanager
def _environment(home: Path) -> Iterator[dict[str, str]]:
    """HOME and XDG_CONFIG_HOME pointing at `home`, for term2 (os.environ) and for git alike."""
    saved = {k: os.environ.get(k) for k in ("HOME", "XDG_CONFIG_HOME")}
    os.environ["HOME"] = str(home)
    os.environ["XDG_CONFIG_HOME"] = str(home / "config")
    try:
        yield {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _build(base: Path, ignores: dict[str, list[str]]) -> tuple[Path, Path]:
    repo = base / "repo"
    home = base / "home"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name in FILES:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("line\n")
    for where, patterns in ignores.items():
        target = home / "config" / "git" / "ignore" if where == "GLOBAL" else repo / where
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(p + "\n" for p in patterns))
    return repo, home


def _views(repo: Path, top: Path) -> tuple[set[str], set[str], set[str]]:
    """The files glob and grep show under `top`, and the root entries list_dir marks ignored."""

    async def run() -> tuple[str, str, str]:
        root = str(top)
        found = await glob_paths(SEARCH, root, Include.parse("**"), root, 10_000)
        matched = await grep(SEARCH, root, SearchQuery("line"), root, 10_000)
        listed = await list_entries(SEARCH, root, root, 10_000)
        return found, matched, listed

    found, matched, listed = anyio.run(run)
    globbed = set(found.splitlines()) - {line for line in found.splitlines() if line.startswith(("[", "No files"))}
    grepped = {line.rsplit(":", 2)[0] for line in matched.splitlines() if line.endswith(":line")}
    marked = {line.split(" [ignored]")[0].rstrip("/") for line in listed.splitlines() if "[ignored]" in line}
    return globbed, grepped, marked


def _expected_marks(top: Path, visible: set[str]) -> set[str]:
    marks = set()
    for entry in top.iterdir():
        if entry.name == ".git" or entry.is_symlink():
            continue
        if entry.is_dir():
            if any(entry.iterdir()) and not any(v.startswith(entry.name + "/") for v in visible):
                marks.add(entry.name)
        elif entry.name not in visible:
            marks.add(entry.name)
    return marks


def _check(tmp: Path, ignores: dict[str, list[str]]) -> None:
    repo, home = _build(tmp, ignores)
    with _environment(home) as env:
        truth = set(_git(repo, "ls-files", "--others", "--exclude-standard", env=env).splitlines())
        globbed, grepped, marked = _views(repo, repo)
        assert globbed == truth, ignores
        assert grepped == {p for p in truth if not p.endswith(".gitignore")}, ignores  # those hold no "line"
        assert marked == _expected_marks(repo, truth), ignores
        ignored_a = subprocess.run(["git", "check-ignore", "-q", "a/"], cwd=repo, env=env, check=False).returncode == 0
        if ignored_a:
            return  # a session opened inside an ignored folder searches it on purpose (test_search_tools_rg)
        below = {p[len("a/") :] for p in truth if p.startswith("a/")}  # a session opened in repo/a
        globbed, grepped, marked = _views(repo, repo / "a")
        assert globbed == below, ignores
        assert grepped == {p for p in below if not p.endswith(".gitignore")}, ignores
        assert marked == _expected_marks(repo / "a", below), ignores


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(ignores=ignore_sets)
def test_the_tools_agree_with_git_on_random_ignore_files(
    ignores: dict[str, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _check(tmp_path_factory.mktemp("case"), ignores)


@pytest.mark.parametrize(
    "ignores",
    [
        {".gitignore": ["*.log", "!keep.log", "/build", "node_modules/", "a/**/x.txt"]},
        {".gitignore": ["build/", "!build/keep/"], "a/.gitignore": ["*.txt", "!a.txt"]},
        {".gitignore": ["doc/**", "!doc/keep/", "!doc/keep/**"], "a/b/.gitignore": ["deep"]},
        {".gitignore": ["\\#hash", "\\!bang", "x?.md", "[ab].js", "**/tmp/"]},
        {".git/info/exclude": ["*.js", "a/"], ".gitignore": ["!a.js"]},
        {"GLOBAL": ["*.md", "*.o"], ".gitignore": ["!doc/keep/d.md"]},
        {"GLOBAL": ["tmp"], ".gitignore": ["x.log"], "a/.gitignore": ["/x.log", "!keep.log", "b/"]},
    ],
    ids=["negation-anchor-dir", "reinclude", "doublestar", "escapes-classes", "info-exclude", "global", "nested"],
)
def test_the_tools_agree_with_git_on_named_cases(ignores: dict[str, list[str]], tmp_path: Path) -> None:
    _check(tmp_path, {where: ignores.get(where, []) for where in IGNORE_FILES})


def test_a_nested_repository_is_seen_as_its_own_git_sees_it(tmp_path: Path) -> None:
    """The outer git lists an inner repository as one entry (`inner/`) and never looks inside; the
    tools search it, with the inner repository's own rules only (`git -C inner ls-files`): the outer
    `*.log` does not reach `inner/a.log`, the inner `secret.txt` rule does (ADR 0026)."""
    repo, home = _build(tmp_path, {".gitignore": ["*.log", "build/"]})
    inner = repo / "inner"
    subprocess.run(["git", "init", "-q", str(inner)], check=True)
    for name, text in {
        ".gitignore": "secret.txt\n",
        "a.log": "line\n",
        "b.py": "line\n",
        "secret.txt": "line\n",
    }.items():
        (inner / name).write_text(text)
    (inner / "build").mkdir()
    (inner / "build" / "x.txt").write_text("line\n")  # the outer `build/` stops at the inner repository too
    with _environment(home) as env:
        outer = set(_git(repo, "ls-files", "--others", "--exclude-standard", env=env).splitlines())
        own = {"inner/" + p for p in _git(inner, "ls-files", "--others", "--exclude-standard", env=env).splitlines()}
        assert "inner/" in outer and "inner/a.log" in own and "inner/build/x.txt" in own
        truth = (outer - {"inner/"}) | own
        globbed, grepped, _marked = _views(repo, repo)
        assert globbed == truth
        assert grepped == {p for p in truth if not p.endswith(".gitignore")}
        globbed, _grepped, _marked = _views(repo, inner)  # a session opened in the inner repository
        assert globbed == {p[len("inner/") :] for p in own}
