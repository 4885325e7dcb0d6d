"""Approval choices and what an answer grants.

There is no choice that runs a command unsandboxed or remembers an approval
past the open session: what cannot be chosen cannot be offered, nor answered.
Every choice maps to one ACP option kind; `reject_always` is never one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Choice(StrEnum):
    ALLOW_ONCE = "allow-once"
    ALLOW_FOLDER_SESSION = "allow-folder-session"
    ALLOW_EDIT_FILE_SESSION = "allow-edit-file-session"
    ALLOW_EDIT_FOLDER_SESSION = "allow-edit-folder-session"
    REJECT = "reject"


class OptionKind(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"


PERMISSION_KINDS: dict[Choice, OptionKind] = {
    Choice.ALLOW_ONCE: OptionKind.ALLOW_ONCE,
    Choice.ALLOW_FOLDER_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.ALLOW_EDIT_FILE_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.ALLOW_EDIT_FOLDER_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.REJECT: OptionKind.REJECT_ONCE,
}

CHOICE_NAMES: dict[Choice, str] = {
    Choice.ALLOW_ONCE: "Allow once",
    Choice.ALLOW_FOLDER_SESSION: "Allow for this folder (session)",
    Choice.ALLOW_EDIT_FILE_SESSION: "Allow edits to this file (session)",
    Choice.ALLOW_EDIT_FOLDER_SESSION: "Allow edits in this folder (session)",
    Choice.REJECT: "Reject",
}


@dataclass(frozen=True, slots=True)
class PermissionOption:
    choice: Choice
    kind: OptionKind
    name: str


def offered_options(choices: tuple[Choice, ...]) -> tuple[PermissionOption, ...]:
    """The client options for `choices`, in order, each with its ACP kind and name."""
    return tuple(PermissionOption(choice, PERMISSION_KINDS[choice], CHOICE_NAMES[choice]) for choice in choices)


def is_allow(choice: Choice | None) -> bool:
    return choice is not None and PERMISSION_KINDS.get(choice) in (
        OptionKind.ALLOW_ONCE,
        OptionKind.ALLOW_ALWAYS,
    )
