"""The workspace rule, judged on paths canonicalized by the tools' resolver.

Real temporary folders and symlinks are used so that `..` and links are
judged where they actually land, exactly as the toolbox does it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.tools.args import ArgumentError
from term2.app.tools.paths import display, folder_of, resolve
from term2.domain.approval import (
    PERMISSION_KINDS,
    Choice,
    OptionKind,
    is_allow,
    offered_options,
)
from term2.domain.workspace import Access, SessionAccess, Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[str, str]:
    """A workspace root and a sibling folder outside it (both canonical)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "a.py").write_text("a\n")
    (outside / "secret.txt").write_text("s\n")
    return os.path.realpath(root), os.path.realpath(outside)


def test_relative_paths_are_relative_to_the_root(layout: tuple[str, str]) -> None:
    root, _ = layout
    assert resolve(root, "src/a.py") == os.path.join(root, "src", "a.py")
    assert resolve(root, ".") == root
    assert not Workspace(root).needs_approval(Access.READ, resolve(root, "src/a.py"))
    assert not Workspace(root).needs_approval(Access.EDIT, resolve(root, "src/new.py"))


def test_outside_paths_need_approval(layout: tuple[str, str]) -> None:
    root, outside = layout
    target = resolve(root, os.path.join(outside, "secret.txt"))
    ws = Workspace(root)
    assert ws.needs_approval(Access.READ, target)
    assert ws.needs_approval(Access.EDIT, target)


def test_dotdot_is_judged_where_it_lands(layout: tuple[str, str]) -> None:
    root, outside = layout
    escaped = resolve(root, "src/../../outside/secret.txt")
    assert escaped == os.path.join(outside, "secret.txt")
    assert Workspace(root).needs_approval(Access.READ, escaped)
    inside = resolve(root, "src/../src/a.py")
    assert not Workspace(root).needs_approval(Access.READ, inside)


def test_prefix_sibling_is_not_inside(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (tmp_path / "proj-evil").mkdir(parents=True)
    root.mkdir()
    real = os.path.realpath(root)
    assert Workspace(real).needs_approval(Access.READ, resolve(real, "../proj-evil/x"))


def test_symlink_inside_pointing_out_is_outside(layout: tuple[str, str]) -> None:
    root, outside = layout
    os.symlink(outside, os.path.join(root, "link-out"))
    os.symlink(os.path.join(outside, "secret.txt"), os.path.join(root, "secret-link"))
    through_dir = resolve(root, "link-out/secret.txt")
    assert through_dir == os.path.join(outside, "secret.txt")
    assert Workspace(root).needs_approval(Access.READ, through_dir)
    assert Workspace(root).needs_approval(Access.EDIT, resolve(root, "secret-link"))
    # A file that does not exist yet behind the link is still judged outside.
    assert resolve(root, "link-out/new/file.txt") == os.path.join(outside, "new", "file.txt")
    assert Workspace(root).needs_approval(Access.EDIT, resolve(root, "link-out/new/file.txt"))


def test_dangling_symlink_is_judged_by_its_target(layout: tuple[str, str]) -> None:
    root, outside = layout
    os.symlink(os.path.join(outside, "not-yet.txt"), os.path.join(root, "dangling"))
    assert resolve(root, "dangling") == os.path.join(outside, "not-yet.txt")
    assert Workspace(root).needs_approval(Access.EDIT, resolve(root, "dangling"))


def test_symlink_outside_pointing_in_is_inside(layout: tuple[str, str]) -> None:
    root, outside = layout
    os.symlink(os.path.join(root, "src"), os.path.join(outside, "link-in"))
    target = resolve(root, os.path.join(outside, "link-in", "a.py"))
    assert target == os.path.join(root, "src", "a.py")
    assert not Workspace(root).needs_approval(Access.EDIT, target)


def test_symlinked_root_is_canonicalized(layout: tuple[str, str], tmp_path: Path) -> None:
    root, _ = layout
    alias = tmp_path / "alias"
    os.symlink(root, alias)
    assert resolve(str(alias), "src/a.py") == os.path.join(root, "src", "a.py")


def test_bad_paths_are_argument_errors(layout: tuple[str, str]) -> None:
    root, _ = layout
    with pytest.raises(ArgumentError):
        resolve(root, "")
    with pytest.raises(ArgumentError):
        resolve(root, "a\x00b")


def test_folder_of_and_display(layout: tuple[str, str]) -> None:
    root, outside = layout
    assert folder_of(os.path.join(root, "src")) == os.path.join(root, "src")
    assert folder_of(os.path.join(root, "src", "a.py")) == os.path.join(root, "src")
    assert display(os.path.join(root, "src", "a.py"), root) == "src/a.py"
    assert display(root, root) == "."
    assert display(os.path.join(outside, "x"), root) == os.path.join(outside, "x")


def test_file_grant_covers_only_that_file(layout: tuple[str, str]) -> None:
    root, outside = layout
    access = SessionAccess(root)
    secret = os.path.join(outside, "secret.txt")
    access.grant(Choice.ALLOW_EDIT_FILE_SESSION, secret, outside, Access.EDIT)
    assert not access.workspace.needs_approval(Access.EDIT, secret)
    assert access.workspace.needs_approval(Access.EDIT, os.path.join(outside, "other.txt"))
    # An edit grant is not a read grant.
    assert access.workspace.needs_approval(Access.READ, secret)


def test_folder_edit_grant_covers_the_folder_tree(layout: tuple[str, str]) -> None:
    root, outside = layout
    access = SessionAccess(root)
    access.grant(Choice.ALLOW_EDIT_FOLDER_SESSION, os.path.join(outside, "secret.txt"), outside, Access.EDIT)
    assert not access.workspace.needs_approval(Access.EDIT, os.path.join(outside, "x", "y.txt"))
    assert access.workspace.needs_approval(Access.EDIT, os.path.dirname(outside) + "/elsewhere")


@pytest.mark.parametrize("where", ["root", "outside"])
def test_a_folder_edit_grant_never_covers_git_metadata_plants_or_instruction_files(
    layout: tuple[str, str], where: str
) -> None:
    """An edit grant for the folder of a `.env` at the root is not an answer for `.git/hooks` (host code on
    the next commit), a git plant or AGENTS.md (every later session's prompt): each is asked on its own."""
    root, outside = layout
    folder = root if where == "root" else outside
    access = SessionAccess(root)
    access.grant(Choice.ALLOW_EDIT_FOLDER_SESSION, os.path.join(folder, ".env"), folder, Access.EDIT)
    ws = access.workspace
    assert not ws.needs_approval(Access.EDIT, os.path.join(folder, ".env"))
    assert not ws.needs_approval(Access.EDIT, os.path.join(folder, "src", "a.py"))
    for path in (".git/hooks/pre-commit", ".git/config", "sub/.git/HEAD", "AGENTS.md", "docs/claude.md"):
        assert ws.needs_approval(Access.EDIT, os.path.join(folder, path)), path
    assert ws.needs_approval(Access.EDIT, os.path.join(folder, "x", "HEAD"), git_plant=True)
    access.grant(Choice.ALLOW_EDIT_FILE_SESSION, os.path.join(folder, "AGENTS.md"), folder, Access.EDIT)
    assert not access.workspace.needs_approval(Access.EDIT, os.path.join(folder, "AGENTS.md"))


def test_folder_session_grant_for_reads_does_not_allow_running_commands(
    layout: tuple[str, str],
) -> None:
    root, outside = layout
    access = SessionAccess(root)
    assert access.workspace.needs_approval(Access.EXECUTE, root)
    access.grant(Choice.ALLOW_FOLDER_SESSION, outside, outside, Access.READ)
    assert not access.workspace.needs_approval(Access.READ, os.path.join(outside, "secret.txt"))
    assert access.workspace.needs_approval(Access.EXECUTE, os.path.join(outside, "sub"))
    assert access.workspace.needs_approval(Access.EDIT, os.path.join(outside, "secret.txt"))


def test_folder_session_grant_for_commands_covers_only_commands(layout: tuple[str, str]) -> None:
    root, _outside = layout
    access = SessionAccess(root)
    access.grant(Choice.ALLOW_FOLDER_SESSION, root, root, Access.EXECUTE)
    assert not access.workspace.needs_approval(Access.EXECUTE, os.path.join(root, "src"))
    assert access.workspace.needs_approval(Access.READ, os.path.join(root, ".env"))


def test_footholds_inside_the_root_need_approval(layout: tuple[str, str]) -> None:
    root, _outside = layout
    workspace = SessionAccess(root).workspace
    for path in (".git/hooks/pre-commit", ".git/config", "sub/.git/HEAD", ".env", "api/.env.local"):
        assert workspace.needs_approval(Access.EDIT, os.path.join(root, path)), path
    for path in (".env", "api/.env.production"):
        assert workspace.needs_approval(Access.READ, os.path.join(root, path)), path
    assert not workspace.needs_approval(Access.READ, os.path.join(root, ".git", "HEAD"))
    assert not workspace.needs_approval(Access.EDIT, os.path.join(root, ".envrc-notes", "x"))
    assert not workspace.needs_approval(Access.EDIT, os.path.join(root, "src", "env.py"))


def test_an_edit_grant_on_a_foothold_covers_it(layout: tuple[str, str]) -> None:
    root, _outside = layout
    access = SessionAccess(root)
    hook = os.path.join(root, ".git", "hooks", "pre-commit")
    access.grant(Choice.ALLOW_EDIT_FILE_SESSION, hook, os.path.dirname(hook), Access.EDIT)
    assert not access.workspace.needs_approval(Access.EDIT, hook)
    assert access.workspace.needs_approval(Access.EDIT, os.path.join(root, ".git", "config"))


def test_allow_once_grants_nothing_and_reset_clears(layout: tuple[str, str]) -> None:
    root, outside = layout
    access = SessionAccess(root)
    access.grant(Choice.ALLOW_ONCE, outside, outside, Access.READ)
    assert access.workspace.needs_approval(Access.READ, outside)
    access.grant(Choice.ALLOW_FOLDER_SESSION, outside, outside, Access.READ)
    access.reset()
    assert access.workspace.needs_approval(Access.READ, outside)
    assert access.workspace.root == root


def test_choice_kinds_match_the_spec_table() -> None:
    assert PERMISSION_KINDS[Choice.ALLOW_ONCE] is OptionKind.ALLOW_ONCE
    for choice in (
        Choice.ALLOW_FOLDER_SESSION,
        Choice.ALLOW_EDIT_FILE_SESSION,
        Choice.ALLOW_EDIT_FOLDER_SESSION,
    ):
        assert PERMISSION_KINDS[choice] is OptionKind.ALLOW_ALWAYS
    assert PERMISSION_KINDS[Choice.REJECT] is OptionKind.REJECT_ONCE
    assert "reject_always" not in {kind.value for kind in OptionKind}


def test_no_choice_grants_unsandboxed_execution_or_an_approval_past_the_session() -> None:
    """What docs/security.md promises rests on this closed list: a choice added later fails
    here until someone checks that it allows one call, or one session's grant, and no more."""
    allows = {choice for choice in Choice if is_allow(choice)}
    assert allows == {
        Choice.ALLOW_ONCE,
        Choice.ALLOW_FOLDER_SESSION,
        Choice.ALLOW_EDIT_FILE_SESSION,
        Choice.ALLOW_EDIT_FOLDER_SESSION,
    }
    assert set(Choice) - allows == {Choice.REJECT}


@pytest.mark.parametrize("access", list(Access))
def test_every_access_offers_allow_once_and_reject(access: Access) -> None:
    offered = offered_options(Workspace("/w").choices_for(access))
    choices = {option.choice for option in offered}
    assert Choice.ALLOW_ONCE in choices and Choice.REJECT in choices
    assert all(option.kind is PERMISSION_KINDS[option.choice] for option in offered)


def test_edit_and_folder_choices() -> None:
    ws = Workspace("/w")
    edit = [o.choice for o in offered_options(ws.choices_for(Access.EDIT))]
    assert edit == [
        Choice.ALLOW_ONCE,
        Choice.ALLOW_EDIT_FILE_SESSION,
        Choice.ALLOW_EDIT_FOLDER_SESSION,
        Choice.REJECT,
    ]
    read = [o.choice for o in offered_options(ws.choices_for(Access.READ))]
    assert read == [Choice.ALLOW_ONCE, Choice.ALLOW_FOLDER_SESSION, Choice.REJECT]


def test_no_choice_is_not_an_allow() -> None:
    assert not is_allow(None)
