"""The workspace rule: what a session may read, edit and run without asking.

Every decision takes paths that the caller has already resolved with realpath,
so `..` and symlinks leading out of the root are judged by where they land.

Three kinds of path inside the root are footholds rather than ordinary files,
and the tools treat them like paths outside it: `.git` (hooks and config run
code on the user's next git command) and project instruction files
(`AGENTS.md`, `CLAUDE.md`, `GEMINI.md` in any folder and any case: their text
steers every later session, ADR 0020) need approval to edit, and `.env` files
(secrets a model would carry off to its provider) need approval to read or
edit. The sandbox protects `.git` and `.env` from shell commands, and reports
every change a command makes to an instruction file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import PurePosixPath

from term2.domain.approval import ApprovalMode, Choice
from term2.domain.footholds import is_secret_file
from term2.domain.instructions import is_instruction_file
from term2.domain.paths import is_within
from term2.domain.roots import anchor, holding_root

__all__ = [
    "Access",
    "Grants",
    "SessionAccess",
    "Workspace",
    "is_git_metadata",
    "is_instruction_file",
    "is_secret_file",
    "is_within",
]


class Access(StrEnum):
    READ = "read"
    EDIT = "edit"
    EXECUTE = "execute"
    # A tool of an MCP server the client named: it acts outside the workspace and the sandbox, with the
    # user's own rights, so every call is asked, once, and no answer is remembered (ADR 0023).
    CALL = "call"
    # A command that asks for hosts (ADR 0030): whatever was granted for its folder, it is asked, allowed once
    # at most, and no answer is remembered; the question names the command, its folder and every host.
    NETWORK = "network"


MAX_DEPTH = 256
"""How deep a workspace tree may be: the root and the folders nested in it, counted together.

The sandbox walks the whole tree before and after every command, one descriptor per level, and
refuses a deeper tree (it could not vouch for what it did not see); so the file tools refuse to make
one, or a single write would lock every later command out of the workspace.
"""


def too_deep(path: str, root: str) -> bool:
    """Whether a file at `path` would sit in folders nested deeper than the sandbox walks."""
    return is_within(path, root) and len(PurePosixPath(path).relative_to(root).parts) > MAX_DEPTH


def is_git_metadata(path: str, root: str) -> bool:
    if not is_within(path, root):
        return False
    return ".git" in PurePosixPath(path).relative_to(root).parts


@dataclass(frozen=True, slots=True)
class Grants:
    """Session-scoped allowances, keyed to the granted file or folder.

    Reading a folder and running commands in it are granted separately: an
    answer about one must never silently authorise the other.
    """

    edit_files: frozenset[str] = field(default_factory=frozenset)
    edit_folders: frozenset[str] = field(default_factory=frozenset)
    read_folders: frozenset[str] = field(default_factory=frozenset)
    run_folders: frozenset[str] = field(default_factory=frozenset)

    def with_choice(self, choice: Choice, target: str, access: Access) -> Grants:
        if access in (Access.CALL, Access.NETWORK):
            return self  # never offered an allow-always choice; an answer that claims one grants nothing
        if choice is Choice.ALLOW_EDIT_FILE_SESSION:
            return replace(self, edit_files=self.edit_files | {target})
        if choice is Choice.ALLOW_EDIT_FOLDER_SESSION:
            return replace(self, edit_folders=self.edit_folders | {target})
        if choice is Choice.ALLOW_FOLDER_SESSION and access is Access.EXECUTE:
            return replace(self, run_folders=self.run_folders | {target})
        if choice is Choice.ALLOW_FOLDER_SESSION:
            return replace(self, read_folders=self.read_folders | {target})
        return self


@dataclass(frozen=True, slots=True)
class Workspace:
    """`root` is the session's cwd; `extra_roots` its additional directories, each judged as the root is."""

    root: str
    grants: Grants = field(default_factory=Grants)
    extra_roots: tuple[str, ...] = ()

    @property
    def roots(self) -> tuple[str, ...]:
        return (self.root, *self.extra_roots)

    def inside(self, resolved: str) -> bool:
        """Whether `resolved` lies in one of the session's roots."""
        return holding_root(resolved, self.roots) is not None

    def anchor(self, resolved: str) -> str:
        """The root `resolved` is judged from: the one holding it, else the cwd root."""
        return anchor(resolved, self.root, self.extra_roots)

    def needs_approval(self, access: Access, resolved: str, *, git_plant: bool = False) -> bool:
        """True when the action on `resolved` must be allowed by the user first.

        ``git_plant`` is the caller's finding (it needs the folder's entries)
        that an edit would complete or write inside a git-directory shape:
        such an edit is a foothold like one in ``.git``.
        """
        g = self.grants
        if access in (Access.CALL, Access.NETWORK):
            return True
        if access is Access.READ:
            if any(is_within(resolved, f) for f in g.read_folders):
                return False
            return not self.inside(resolved) or is_secret_file(resolved)
        if access is Access.EDIT:
            if resolved in g.edit_files:
                return False
            # A folder grant covers what is in it except what makes code run on the host or steers later
            # sessions: git metadata anywhere (hooks, config), git plants and instruction files each need
            # their own answer, else "Allow edits in this folder" given for a `.env` at the root would let
            # the model write `.git/hooks/pre-commit` unasked (a file grant still covers its own file).
            steering = git_plant or is_instruction_file(resolved) or ".git" in PurePosixPath(resolved).parts
            if not steering and any(is_within(resolved, f) for f in g.edit_folders):
                return False
            foothold = (
                git_plant
                or is_secret_file(resolved)
                or is_instruction_file(resolved)
                or is_git_metadata(resolved, self.anchor(resolved))
            )
            return not self.inside(resolved) or foothold
        return not any(is_within(resolved, f) for f in g.run_folders)

    def choices_for(self, access: Access) -> tuple[Choice, ...]:
        """The choices offered when `access` needs approval."""
        if access in (Access.CALL, Access.NETWORK):
            return (Choice.ALLOW_ONCE, Choice.REJECT)
        if access is Access.EDIT:
            return (
                Choice.ALLOW_ONCE,
                Choice.ALLOW_EDIT_FILE_SESSION,
                Choice.ALLOW_EDIT_FOLDER_SESSION,
                Choice.REJECT,
            )
        return (Choice.ALLOW_ONCE, Choice.ALLOW_FOLDER_SESSION, Choice.REJECT)

    def granted(self, choice: Choice, resolved: str, folder_of: str, access: Access) -> Workspace:
        """Record an allow-always answer; files grant themselves, folders their folder."""
        target = resolved if choice is Choice.ALLOW_EDIT_FILE_SESSION else folder_of
        return replace(self, grants=self.grants.with_choice(choice, target, access))


class SessionAccess:
    """The live workspace of one open session; grants accumulate until reset or close.

    The approval mode lives here too, read by the gate on every call: a switch back to `ask` in the
    middle of a turn stops `auto`'s skipped questions from the next call on, not the next turn.
    """

    def __init__(self, root: str, mode: ApprovalMode = ApprovalMode.ASK, extra_roots: tuple[str, ...] = ()) -> None:
        self.workspace = Workspace(root, extra_roots=extra_roots)
        self.mode = mode

    def with_roots(self, extra_roots: tuple[str, ...]) -> None:
        """The editor named other additional directories (a load or resume): the grants stay, keyed to paths."""
        self.workspace = replace(self.workspace, extra_roots=extra_roots)

    def grant(self, choice: Choice, resolved: str, folder_of: str, access: Access) -> None:
        self.workspace = self.workspace.granted(choice, resolved, folder_of, access)

    def reset(self) -> None:
        self.workspace = Workspace(self.workspace.root, extra_roots=self.workspace.extra_roots)
