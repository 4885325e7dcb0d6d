"""git_patch renders whole-file changes as patches a client (and git) can use."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from term2.domain.diff import change_summary, git_patch


def test_unchanged_text_has_no_patch() -> None:
    assert git_patch("/w/a.txt", "same\n", "same\n") == ""


def test_modification_uses_absolute_paths_and_hunks() -> None:
    patch = git_patch("/w/src/a.py", "one\ntwo\nthree\n", "one\n2\nthree\n")
    assert patch == (
        "diff --git a/w/src/a.py b/w/src/a.py\n"
        "--- a/w/src/a.py\n"
        "+++ b/w/src/a.py\n"
        "@@ -1,3 +1,3 @@\n"
        " one\n"
        "-two\n"
        "+2\n"
        " three\n"
    )


def test_new_file_patch() -> None:
    patch = git_patch("/w/new.txt", None, "a\nb\n")
    assert patch == (
        "diff --git a/w/new.txt b/w/new.txt\n"
        "new file mode 100644\n"
        "--- /dev/null\n"
        "+++ b/w/new.txt\n"
        "@@ -0,0 +1,2 @@\n"
        "+a\n"
        "+b\n"
    )


def test_deleted_file_patch() -> None:
    patch = git_patch("/w/old.txt", "x\n", None)
    assert "deleted file mode 100644\n" in patch
    assert "--- a/w/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" in patch


def test_empty_new_file_has_header_only() -> None:
    assert git_patch("/w/e", None, "") == "diff --git a/w/e b/w/e\nnew file mode 100644\n"


def test_missing_final_newline_is_marked() -> None:
    patch = git_patch("/w/a", "a\nb", "a\nc")
    assert "-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n" in patch


def test_distant_changes_make_separate_hunks() -> None:
    old = "".join(f"line {i}\n" for i in range(1, 31))
    new = old.replace("line 2\n", "LINE 2\n").replace("line 28\n", "LINE 28\n")
    patch = git_patch("/w/f", old, new)
    assert patch.count("@@ -") == 2
    assert "@@ -1,5 +1,5 @@\n" in patch
    assert "@@ -25,6 +25,6 @@\n" in patch


def test_awkward_names_are_quoted_like_git() -> None:
    patch = git_patch('/w/we"ird\tname', "a\n", "b\n")
    assert patch.startswith('diff --git "a/w/we\\"ird\\tname" "b/w/we\\"ird\\tname"\n')


def test_change_summary_counts_lines() -> None:
    assert change_summary("a\nb\nc\n", "a\nB\nc\nd\n") == (2, 1)
    assert change_summary(None, "x\ny\n") == (2, 0)


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("one\ntwo\nthree\n", "one\nTWO\nthree\nfour\n"),
        ("a\nb", "a\nb\nc"),
        (
            "".join(f"{i}\n" for i in range(40)),
            "".join(f"{i}\n" for i in range(40) if i % 7),
        ),
    ],
)
def test_patch_applies_with_git(tmp_path: Path, old: str, new: str) -> None:
    target = tmp_path / "file.txt"
    target.write_text(old)
    patch = git_patch(str(target), old, new)
    # Paths are absolute: apply from "/" so that a/<abs> strips to the real file.
    subprocess.run(
        ["git", "apply", "--unsafe-paths", "-"],
        input=patch.encode(),
        cwd="/",
        check=True,
        capture_output=True,
    )
    assert target.read_text() == new
