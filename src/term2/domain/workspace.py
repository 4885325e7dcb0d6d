"""The workspace rule: what a session may read, edit and run without asking.

Every decision takes paths that the caller has already resolved with realpath,
so `..` and symlinks leading out of the root are judged by where they land.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import PurePosixPath

from term2.domain.approval import Choice


class Access(StrEnum):
    READ = "read"
    EDIT = "edit"
    EXECUTE = "execute"


def is_within(path: str, folder: str) -> bool:
    p, f = PurePosixPath(path), PurePosixPath(folder)
    return p == f or f in p.parents


@dataclass(frozen=True, slots=True)
class Grants:
    """Session-scoped allowances, keyed to the granted file or folder."""

    edit_files: frozenset[str] = field(default_factory=frozenset)
    edit_folders: frozenset[str] = field(default_factory=frozenset)
    folders: frozenset[str] = field(default_factory=frozenset)

    def with_choice(self, choice: Choice, target: str) -> Grants:
        if choice is Choice.ALLOW_EDIT_FILE_SESSION:
            return Grants(self.edit_files | {target}, self.edit_folders, self.folders)
        if choice is Choice.ALLOW_EDIT_FOLDER_SESSION:
            return Grants(self.edit_files, self.edit_folders | {target}, self.folders)
        if choice is Choice.ALLOW_FOLDER_SESSION:
            return Grants(self.edit_files, self.edit_folders, self.folders | {target})
        return self


@dataclass(frozen=True, slots=True)
class Workspace:
    root: str
    grants: Grants = field(default_factory=Grants)

    def needs_approval(self, access: Access, resolved: str) -> bool:
        """True when the action on `resolved` must be allowed by the user first."""
        if access is Access.READ:
            return not (
                is_within(resolved, self.root)
                or any(is_within(resolved, f) for f in self.grants.folders)
            )
        if access is Access.EDIT:
            return not (
                is_within(resolved, self.root)
                or resolved in self.grants.edit_files
                or any(is_within(resolved, f) for f in self.grants.edit_folders)
            )
        return not any(is_within(resolved, f) for f in self.grants.folders)

    def choices_for(self, access: Access) -> tuple[Choice, ...]:
        """The choices offered when `access` needs approval."""
        if access is Access.EDIT:
            return (
                Choice.ALLOW_ONCE,
                Choice.ALLOW_EDIT_FILE_SESSION,
                Choice.ALLOW_EDIT_FOLDER_SESSION,
                Choice.REJECT,
                Choice.ALLOW_REMEMBER,
            )
        return (Choice.ALLOW_ONCE, Choice.ALLOW_FOLDER_SESSION, Choice.REJECT, Choice.UNSANDBOXED_ONCE)

    def granted(self, choice: Choice, resolved: str, folder_of: str) -> Workspace:
        """Record an allow-always answer; files grant themselves, folders their folder."""
        target = resolved if choice is Choice.ALLOW_EDIT_FILE_SESSION else folder_of
        return Workspace(self.root, self.grants.with_choice(choice, target))


class SessionAccess:
    """The live workspace of one open session; grants accumulate until reset or close."""

    def __init__(self, root: str) -> None:
        self.workspace = Workspace(root)

    def grant(self, choice: Choice, resolved: str, folder_of: str) -> None:
        self.workspace = self.workspace.granted(choice, resolved, folder_of)

    def reset(self) -> None:
        self.workspace = Workspace(self.workspace.root)
