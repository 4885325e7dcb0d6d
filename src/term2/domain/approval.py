"""Approval choices and what an answer grants.

Only choices with a client-facing kind are ever offered. The interactive-only
choices exist so that the filter is explicit and tested, not implied.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Choice(StrEnum):
    APPROVE = "approve"
    ALLOW_ONCE = "allow-once"
    ALLOW_FOLDER_SESSION = "allow-folder-session"
    ALLOW_EDIT_FILE_SESSION = "allow-edit-file-session"
    ALLOW_EDIT_FOLDER_SESSION = "allow-edit-folder-session"
    REJECT = "reject"
    DENY = "deny"
    UNSANDBOXED_ONCE = "unsandboxed-once"
    ALLOW_REMEMBER = "allow-remember"


class OptionKind(StrEnum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"


PERMISSION_KINDS: dict[Choice, OptionKind] = {
    Choice.APPROVE: OptionKind.ALLOW_ONCE,
    Choice.ALLOW_ONCE: OptionKind.ALLOW_ONCE,
    Choice.ALLOW_FOLDER_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.ALLOW_EDIT_FILE_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.ALLOW_EDIT_FOLDER_SESSION: OptionKind.ALLOW_ALWAYS,
    Choice.REJECT: OptionKind.REJECT_ONCE,
    Choice.DENY: OptionKind.REJECT_ONCE,
}

CHOICE_NAMES: dict[Choice, str] = {
    Choice.APPROVE: "Approve",
    Choice.ALLOW_ONCE: "Allow once",
    Choice.ALLOW_FOLDER_SESSION: "Allow for this folder (session)",
    Choice.ALLOW_EDIT_FILE_SESSION: "Allow edits to this file (session)",
    Choice.ALLOW_EDIT_FOLDER_SESSION: "Allow edits in this folder (session)",
    Choice.REJECT: "Reject",
    Choice.DENY: "Deny",
}


@dataclass(frozen=True, slots=True)
class PermissionOption:
    choice: Choice
    kind: OptionKind
    name: str


def offered_options(choices: tuple[Choice, ...]) -> tuple[PermissionOption, ...]:
    """Map choices to client options, dropping every choice without an ACP kind."""
    return tuple(
        PermissionOption(choice, PERMISSION_KINDS[choice], CHOICE_NAMES[choice])
        for choice in choices
        if choice in PERMISSION_KINDS
    )


def resolution(choice: Choice) -> str:
    """What the session receives for an answer: y, n, or the session-scoped choice id."""
    kind = PERMISSION_KINDS.get(choice)
    if kind is OptionKind.ALLOW_ONCE:
        return "y"
    if kind is OptionKind.ALLOW_ALWAYS:
        return choice.value
    return "n"


def is_allow(choice: Choice | None) -> bool:
    return choice is not None and PERMISSION_KINDS.get(choice) in (
        OptionKind.ALLOW_ONCE,
        OptionKind.ALLOW_ALWAYS,
    )
