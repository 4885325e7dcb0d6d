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


class ApprovalMode(StrEnum):
    """How many of the workspace rule's questions a session asks (ADR 0044): never which walls exist.

    `ask` asks every question the rule has (the posture term2's page describes). `auto` runs a command or
    a `run_code` program in the sandbox, without network, inside the workspace, without asking; every other
    question stays. `read-only` refuses at once whatever could change something (an edit, a write, a
    command, a program, an MCP call) and asks the rest as `ask` does.
    """

    ASK = "ask"
    AUTO = "auto"
    READ_ONLY = "read-only"


class CallKind(StrEnum):
    """What a call does, as the modes judge it: the part of a call a mode may skip or refuse."""

    READ = "read"  # reads and searches: read_file, list_dir, glob, grep, read_output, update_plan
    EDIT = "edit"  # anything that writes a file: write_file, edit_file, multi_edit, apply_patch
    SANDBOXED = "sandboxed"  # a command or program in the sandbox, with no network, in the workspace
    NETWORK = "network"  # a command or program that asks for hosts (ADR 0030)
    REMOTE = "remote"  # an MCP server's tool: outside the sandbox, with the user's rights (ADR 0023)
    OTHER = "other"  # anything else (unsure): asked wherever the rule asks, refused in read-only


class Verdict(StrEnum):
    RUN = "run"  # no question
    ASK = "ask"  # the question the workspace rule has, asked as in `ask`
    REFUSE = "refuse"  # refused at once: no question, nothing runs


def verdict(mode: ApprovalMode, kind: CallKind, *, asked: bool) -> Verdict:
    """Whether a call runs, is asked about or is refused, given what the workspace rule says (`asked`).

    The only question a mode ever skips is `auto`'s for a no-network sandboxed command: the sandbox is
    the wall that holds it either way. Everything else the rule asks is asked in every mode, and
    `read-only` may only refuse more; no mode turns a REFUSE or a missing allow into a run.
    """
    if mode is ApprovalMode.READ_ONLY and kind is not CallKind.READ:
        return Verdict.REFUSE
    if not asked:
        return Verdict.RUN
    if mode is ApprovalMode.AUTO and kind is CallKind.SANDBOXED:
        return Verdict.RUN
    return Verdict.ASK


def approval_mode(value: str | None) -> ApprovalMode:
    """A stored or chosen mode; anything unknown (or none) is `ask`, the mode that asks everything."""
    try:
        return ApprovalMode(value) if value is not None else ApprovalMode.ASK
    except ValueError:
        return ApprovalMode.ASK
