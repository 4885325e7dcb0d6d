"""The pure foothold rules: git-directory shapes, git plants and unsafe roots."""

from __future__ import annotations

import pytest

from term2.domain.approval import Choice
from term2.domain.footholds import is_git_dir_shape, is_git_plant, unsafe_root_reason
from term2.domain.workspace import Access, Workspace


def test_a_git_directory_needs_head_objects_and_refs() -> None:
    assert is_git_dir_shape(["HEAD", "objects", "refs", "config"])
    assert not is_git_dir_shape(["objects", "refs", "config"])
    assert not is_git_dir_shape(["HEAD", "refs"])


@pytest.mark.parametrize(
    ("parts", "entries"),
    [
        ((".git", "config"), [set()]),  # .git at the top
        (["a", "b", ".git"], [set(), set(), set()]),  # a gitdir: pointer file anywhere
        (("sub", "HEAD"), [{"sub"}, {"objects", "refs"}]),  # completes the shape
        (("sub", "refs", "heads", "main"), [{"sub"}, {"HEAD", "objects"}]),  # completes it from below
        (("sub", "config"), [{"sub"}, {"HEAD", "objects", "refs"}]),  # writes inside one
        (("HEAD",), [{"objects", "refs", "src"}]),  # the root itself
    ],
)
def test_git_plants(parts: tuple[str, ...], entries: list[set[str]]) -> None:
    assert is_git_plant(parts, entries)


@pytest.mark.parametrize(
    ("parts", "entries"),
    [
        (("src", "main.py"), [{"src"}, set()]),
        (("sub", "HEAD"), [{"sub"}, {"objects"}]),  # no refs: not a repository
        (("config", "app.toml"), [{"config"}, set()]),
        (("docs", "refs", "index.md"), [{"docs", "HEAD"}, set()]),  # HEAD and refs in different folders
    ],
)
def test_ordinary_writes_are_not_plants(parts: tuple[str, ...], entries: list[set[str]]) -> None:
    assert not is_git_plant(parts, entries)


def test_a_git_plant_needs_approval_unless_granted() -> None:
    ws = Workspace("/w")
    assert ws.needs_approval(Access.EDIT, "/w/sub/HEAD", git_plant=True)
    assert not ws.needs_approval(Access.EDIT, "/w/sub/HEAD")


@pytest.mark.parametrize("path", ["/w/AGENTS.md", "/w/a/b/c/CLAUDE.md", "/w/GEMINI.md", "/w/x/agents.MD"])
def test_editing_an_instruction_file_needs_approval_unless_granted(path: str) -> None:
    ws = Workspace("/w")
    assert ws.needs_approval(Access.EDIT, path)
    assert not ws.needs_approval(Access.READ, path)  # reading one is harmless
    granted = ws.granted(Choice.ALLOW_EDIT_FILE_SESSION, path, "/w", Access.EDIT)
    assert not granted.needs_approval(Access.EDIT, path)
    assert not ws.needs_approval(Access.EDIT, path + ".bak")


@pytest.mark.parametrize(
    "root",
    ["/", "/etc", "/etc/nixos", "/usr", "/usr/local/lib", "/proc/1", "/home", "/root", "/tmp", "/var", "/opt"],
)
def test_system_and_wide_roots_are_refused(root: str) -> None:
    assert unsafe_root_reason(root, home="/home/ada") is not None


def test_homes_and_their_parents_are_refused_but_projects_inside_are_not() -> None:
    assert "home" in (unsafe_root_reason("/home/ada", home="/home/ada") or "")
    assert "above your home" in (unsafe_root_reason("/work", home="/work/ada") or "")
    assert unsafe_root_reason("/home/ada/proj", home="/home/ada") is None
    assert unsafe_root_reason("/tmp/pytest-1/project", home="/home/ada") is None
    assert unsafe_root_reason("/var/www/site", home="/home/ada") is None


def test_term2_data_may_neither_hold_nor_sit_in_a_root() -> None:
    private = ["/home/ada/.local/share/term2"]
    assert unsafe_root_reason("/home/ada/.local/share/term2/x", home="/home/ada", private=private)
    assert unsafe_root_reason("/home/ada/.local", home="/home/ada", private=private)
    assert unsafe_root_reason("/home/ada/proj", home="/home/ada", private=private) is None
