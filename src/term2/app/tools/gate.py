"""Decide whether a prepared call may run: the workspace rule, then the user.

The session's approval mode (ADR 0044) is applied here, call by call, to what
the workspace rule asks (domain ``verdict``): `auto` skips only the question of
a no-network command in the sandbox, `read-only` refuses anything that could
change something before anyone is asked.

Fail closed: the call runs only when the rule needs no approval, or the
approver returns an allow choice that was actually offered, for a prompt that
is still the live one. Anything else, including an approver that raises, a
question asked with no prompt running (``no_interaction``) and an answer that
arrives after the prompt was cancelled, settled or closed (``stale``), is a
denial. These rules hold here, around any Approver, so that every approver
adapter gets them (the contract suite checks each). An allow-always answer is
recorded as a session grant keyed to the file or folder, so that later calls
inside it (in this prompt or later ones) are not asked again; the live
workspace is read from the session on every call for that reason.
"""

from __future__ import annotations

from dataclasses import replace

import anyio

from term2.app.tools.base import Invocation
from term2.app.tools.names import said, shown
from term2.domain.approval import (
    PERMISSION_KINDS,
    ApprovalMode,
    CallKind,
    OptionKind,
    Verdict,
    is_allow,
    offered_options,
    verdict,
)
from term2.domain.history import ToolCall
from term2.domain.roots import anchor, holding_root
from term2.domain.visible_text import visible
from term2.domain.workspace import Access, Workspace, is_git_metadata, is_instruction_file, is_within
from term2.ports.approval import ApprovalRequest, CommandSubject, DenialReason
from term2.ports.tools import ToolContext
from term2.support.deferred_log import get_logger

log = get_logger("term2.approval")

DENIAL_TEXT: dict[DenialReason, str] = {
    "rejected": "The user rejected this call",
    "cancelled": "The approval request was cancelled",
    "unknown_option": "The client answered with an option that was not offered",
    "malformed": "The client's answer to the approval request was malformed",
    "disconnected": "The client disconnected before answering the approval request",
    "stale": "The approval request became stale before it was answered",
    "no_interaction": "No client can answer approval requests for this session",
    "read_only": (
        "The session is in read-only (Plan) mode: edits, writes, commands, programs and MCP calls are refused "
        "without asking, and nothing was changed. Read and search to plan, and describe the change instead; the "
        "user can switch the mode to make it"
    ),
}

VERBS = {
    Access.READ: "reading",
    Access.EDIT: "editing",
    Access.EXECUTE: "running",
    Access.CALL: "calling",
    Access.NETWORK: "running",
}
ARGUMENTS_SHOWN = 2000  # characters of an MCP call's arguments in the question; the call's raw input has them all


def approval_title(invocation: Invocation) -> str:
    if invocation.remote is not None:
        return f"Allow the MCP server '{invocation.remote.server}' to run its tool '{invocation.remote.tool}'?"
    if invocation.command is not None and invocation.network is not None:
        command = invocation.command
        return f"Allow `{command.command}` in {command.cwd} with network access to {invocation.network}?"
    if invocation.command is not None:
        return f"Allow running `{invocation.command.command}` in {invocation.command.cwd}?"
    return f"Allow {VERBS[invocation.access]} {shown(invocation.target)}?"


def approval_description(invocation: Invocation, root: str, extra_roots: tuple[str, ...] = ()) -> str:
    """Why this call needs the user: the first foothold it touches, or the root it leaves.

    Paths are judged as they are and named as the tools show names (names.py): the question is JSON for
    the editor, and a name that is not UTF-8 has no other exact form there.
    """
    target = invocation.target
    root = anchor(target, root, extra_roots)  # a path in an additional root is judged from that root
    name, root_name = shown(target), shown(root)
    roots_named = " and ".join(shown(each) for each in (root, *(r for r in extra_roots if r != root)))
    writable = roots_named + (" is" if not extra_roots else " are")
    if invocation.remote is not None:
        remote = invocation.remote
        arguments = remote.arguments[:ARGUMENTS_SHOWN] + ("…" if len(remote.arguments) > ARGUMENTS_SHOWN else "")
        return (
            f"The model asks to call '{remote.tool}' on the MCP server '{remote.server}', which your editor "
            f"configured; it runs outside term2's sandbox with your rights. Arguments: {arguments}"
        )
    if invocation.network is not None:
        return (
            f"The command runs in the sandbox; only {writable} writable. Through term2's proxy it may connect to "
            f"{invocation.network} and nothing else, for this run only; whatever it sends there leaves your "
            "machine. Every other connection is refused and reported."
        )
    if invocation.access is Access.EXECUTE:
        return f"The command runs in the sandbox; only {writable} writable."
    if not is_within(target, root):
        where = f"the workspace root {root_name}" if not extra_roots else f"every workspace root ({roots_named})"
        return f"{name} is outside {where}."
    if invocation.access is Access.EDIT and is_git_metadata(target, root):
        return f"{name} is git metadata, whose hooks and config the host's git would run."
    if invocation.access is Access.EDIT and invocation.git_plant is not None:
        return (
            f"Writing this would make {shown(invocation.git_plant)} a git directory (or write inside one), "
            "whose config the host's git would run."
        )
    if invocation.access is Access.EDIT and is_instruction_file(target):
        return (
            f"{name} is a project instruction file: term2 puts its text into the system prompt of every "
            "later session in this project, so a change to it steers what the agent does next time."
        )
    return f"{name} may hold secrets (.env); its contents would be sent to the model's provider."


ESCAPED_NOTE = (
    " The name is written escaped, as term2's tools show names: each `\\\\` is one backslash and each "
    "`\\xNN` one byte (or control character) of the real name."
)


def escaped_note(invocation: Invocation) -> str:
    """Says the question's name is escaped (names.py), when it is: a file named `a\\b` is another one."""
    if invocation.remote is not None or invocation.command is not None:
        return ""
    return ESCAPED_NOTE if shown(invocation.target) != invocation.target else ""


def question(invocation: Invocation, workspace: Workspace) -> Access | None:
    """The access the user must allow before the call may run, or None: the one question, asked the same way
    everywhere (before asking, before running calls side by side, before preparing a preview of the change).

    An edit is judged as an edit only, even one that reads its target to place its text: an edit grant is the
    user's answer for every later edit inside it, so asking again to read would ask twice (issue 30.10). What
    the model may not read stays out of its results instead (changes.py: an edit there answers only whether
    it applied, ADR 0042).
    """
    if invocation.remote is not None:
        return Access.CALL  # whatever access it claims: an MCP call is always asked (ADR 0023)
    if invocation.network is not None:
        return Access.NETWORK  # asked even in a folder granted for commands; allowed once at most (ADR 0030)
    if workspace.needs_approval(invocation.access, invocation.target, git_plant=invocation.git_plant is not None):
        return invocation.access
    return None


def call_kind(invocation: Invocation, roots: tuple[str, ...]) -> CallKind:
    """What a call (or one part of it) does, as the modes judge it; anything unsure is OTHER, never skipped."""
    if invocation.remote is not None or invocation.access is Access.CALL:
        return CallKind.REMOTE
    if invocation.network is not None or invocation.access is Access.NETWORK:
        return CallKind.NETWORK
    if invocation.access is Access.EXECUTE:
        return (
            CallKind.SANDBOXED
            if invocation.command is not None and holding_root(invocation.target, roots) is not None
            else (CallKind.OTHER)
        )
    if invocation.access is Access.EDIT:
        return CallKind.EDIT
    if invocation.access is Access.READ and invocation.command is None:
        return CallKind.READ
    return CallKind.OTHER


def judged(invocation: Invocation, workspace: Workspace, mode: ApprovalMode) -> tuple[Verdict, Access | None]:
    """The mode's verdict on one call (or part) and the question the workspace rule has for it."""
    asked = question(invocation, workspace)
    return verdict(mode, call_kind(invocation, workspace.roots), asked=asked is not None), asked


def needs_approval(invocation: Invocation, workspace: Workspace, mode: ApprovalMode = ApprovalMode.ASK) -> bool:
    """Whether the user will be asked about the call (a refused call is not asked)."""
    parts = invocation.parts or (invocation,)
    verdicts = [judged(part, workspace, mode)[0] for part in parts]
    return Verdict.REFUSE not in verdicts and Verdict.ASK in verdicts


def skipped_question(invocation: Invocation, ctx: ToolContext) -> bool:
    """Whether the mode let this call run without the question the workspace rule has for it (auto)."""
    mode = ctx.approval_mode()
    for part in invocation.parts or (invocation,):
        judgement, asked = judged(part, ctx.access.workspace, mode)
        if judgement is Verdict.RUN and asked is not None:
            return True
    return False


async def authorize(invocation: Invocation, pending: ToolCall, ctx: ToolContext) -> DenialReason | None:
    """None when the call may run, otherwise why it may not.

    A call that touches several files (apply_patch) is judged file by file, each asked in its own words, and
    the first denial denies the whole call: nothing runs unless every file it touches is allowed. A part the
    mode refuses refuses the whole call before any part is asked.
    """
    parts = invocation.parts or (invocation,)
    if any(judged(part, ctx.access.workspace, ctx.approval_mode())[0] is Verdict.REFUSE for part in parts):
        return "read_only"
    for part in parts:
        denial = await _authorize_one(part, pending, ctx)
        if denial is not None:
            return denial
    return None


async def _authorize_one(invocation: Invocation, pending: ToolCall, ctx: ToolContext) -> DenialReason | None:
    workspace = ctx.access.workspace
    judgement, asked = judged(invocation, workspace, ctx.approval_mode())
    if judgement is Verdict.REFUSE:
        return "read_only"  # the mode may have changed while an earlier part was asked
    if judgement is Verdict.RUN or asked is None:
        return None
    options = offered_options(workspace.choices_for(asked))
    revision = ctx.interaction.current()
    if revision is None or not options:
        return "no_interaction"  # e.g. a run_code program's nested call after its prompt ended
    command = invocation.command
    request = ApprovalRequest(  # asked as text a client parses and a person reads as it is (_asked)
        session_id=ctx.session_id,
        tool_call=replace(pending, title=_asked(pending.title)),
        title=_asked(approval_title(invocation)),
        description=_asked(
            approval_description(invocation, workspace.root, workspace.extra_roots) + escaped_note(invocation)
        ),
        options=options,
        command=None if command is None else CommandSubject(_asked(command.command), _asked(command.cwd)),
    )
    try:
        decision = await ctx.approver.request(request)
    except anyio.get_cancelled_exc_class():
        raise
    except Exception:
        log.exception("approver failed; denying the call")
        return "disconnected"
    if not ctx.interaction.is_current(revision):
        return "stale"  # the prompt was cancelled, settled or closed while the question was pending
    if judged(invocation, ctx.access.workspace, ctx.approval_mode())[0] is Verdict.REFUSE:
        return "read_only"  # the user chose read-only while the question was pending: that wins over the answer
    choice = decision.choice
    offered = {option.choice for option in options}
    if choice is not None and choice in offered and is_allow(choice):
        if PERMISSION_KINDS[choice] is OptionKind.ALLOW_ALWAYS:
            ctx.access.grant(choice, invocation.target, invocation.grant_folder, asked)
        return None
    if decision.denial is not None:
        return decision.denial
    if choice is not None and choice not in offered:
        return "unknown_option"
    return "rejected"


def _asked(text: str) -> str:
    """A question's text: a lone surrogate left (a run_code program's name) as its escape, which a strict
    client's JSON parser takes, and any character a display obeys rather than shows (ESC, U+202E) written
    out, so the model's command cannot redraw or reorder what the user approves in an editor either."""
    return visible(said(text))


def denial_message(reason: DenialReason) -> str:
    return f"{DENIAL_TEXT.get(reason, 'The call was denied')} ({reason}); the tool did not run."
