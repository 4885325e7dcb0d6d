"""WorkspaceToolbox: the Toolbox port over the built-in workspace tools.

`execute` owns a call from start to end and never lets an ordinary error out:
the model always gets a text result, and the client always sees the call end
in a final status. The order is fixed: parse the arguments, announce the call
as pending, apply the workspace rule and ask the user if needed, mark it in
progress, run it, and report completed or failed. A cancelled task still
records and emits `cancelled` (shielded) before the cancellation propagates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import anyio

from term2.app.edit_tools import EDIT_TOOL_SETS
from term2.app.tools.args import ArgumentError, parse_arguments
from term2.app.tools.base import Invocation, Outcome, Runner, Tool
from term2.app.tools.edit import EditFile, MultiEdit, WriteFile
from term2.app.tools.failure import ToolFailed
from term2.app.tools.gate import authorize, denial_message, needs_approval, skipped_question
from term2.app.tools.lifecycle import CallTracker
from term2.app.tools.listing import Glob, ListDir
from term2.app.tools.names import said, shown
from term2.app.tools.patch import ApplyPatch
from term2.app.tools.paths import canonical_root
from term2.app.tools.plan import UpdatePlan
from term2.app.tools.read import ReadFile
from term2.app.tools.read_output import ReadOutput
from term2.app.tools.run_code import RunCode
from term2.app.tools.search import Grep
from term2.app.tools.shell import RunShell
from term2.domain.history import ToolKind, ToolOutput, ToolStatus
from term2.domain.workspace import Access
from term2.ports.llm import ToolCallRequest, ToolSpec
from term2.ports.tools import ToolContext, ToolReply
from term2.ports.workspace_search import WorkspaceSearch
from term2.support.deferred_log import get_logger

log = get_logger("term2.tools")


# Read-only tools: several of them in one model response run side by side (read, list, glob, grep).
CONCURRENT_KINDS = frozenset({ToolKind.READ, ToolKind.SEARCH})


def default_tools(
    edit: tuple[str, ...] = EDIT_TOOL_SETS["edit_file"], search: WorkspaceSearch | None = None
) -> tuple[Tool, ...]:
    """Every built-in tool, with the edit tools named in `edit` (which ones suit a model: app/edit_tools.py).

    `search` walks and searches for list_dir, glob and grep (ADR 0032); without one (a toolbox
    asked only for its specs) those three fail closed when called.
    """
    editors: dict[str, Tool] = {"edit_file": EditFile(), "multi_edit": MultiEdit(), "apply_patch": ApplyPatch()}
    chosen = tuple(editors[name] for name in edit)
    searching = (ListDir(search), Glob(search), Grep(search))
    base: tuple[Tool, ...] = (ReadFile(), *searching, WriteFile(), *chosen, RunShell())
    return (*base, RunCode(WorkspaceToolbox(base)), ReadOutput(), UpdatePlan())


class WorkspaceToolbox:
    """Runs the given tools (by default every built-in one) against a session's workspace."""

    def __init__(self, tools: Iterable[Tool] | None = None) -> None:
        chosen = tuple(tools) if tools is not None else default_tools()
        self._tools: dict[str, Tool] = {tool.name: tool for tool in chosen}
        if len(self._tools) != len(chosen):
            raise ValueError("tool names must be unique")

    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(tool.spec() for tool in self._tools.values())

    def runs_concurrently(self, call: ToolCallRequest, ctx: ToolContext) -> bool:
        tool = self._tools.get(call.name)
        if tool is None or tool.kind not in CONCURRENT_KINDS:
            return False
        try:
            workspace = ctx.access.workspace
            invocation = tool.prepare(
                parse_arguments(call.arguments), canonical_root(workspace.root), workspace.extra_roots
            )
        except Exception:  # the call fails on its own when it runs; alone, in order
            return False
        if invocation.access is not Access.READ or invocation.command is not None:
            return False
        return not needs_approval(invocation, ctx.access.workspace, ctx.approval_mode())

    async def execute(self, call: ToolCallRequest, ctx: ToolContext) -> str | ToolReply:
        tracker = CallTracker(call.call_id, ctx)
        try:
            # The model's text as the tracker tells and records it: no lone surrogate (names.said).
            result = await self._execute(call, ctx, tracker)
            if isinstance(result, ToolReply):
                return ToolReply(said(result.text), result.images)
            return said(result)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await tracker.cancelled(call.name)
            raise

    async def _execute(self, call: ToolCallRequest, ctx: ToolContext, tracker: CallTracker) -> str | ToolReply:
        tool = self._tools.get(call.name)
        kind = tool.kind if tool is not None else ToolKind.OTHER
        try:
            args = parse_arguments(call.arguments)
        except ArgumentError as err:
            await tracker.start(call.name, kind, {"arguments": call.arguments})
            return await tracker.fail(f"Error: invalid arguments for {call.name}: {err}")
        if tool is None:
            await tracker.start(call.name, kind, args)
            known = ", ".join(sorted(self._tools))
            return await tracker.fail(f"Error: there is no tool named {call.name!r}; available tools: {known}")
        root = canonical_root(ctx.access.workspace.root)
        try:
            invocation = tool.prepare(args, root, ctx.access.workspace.extra_roots)
        except Exception as err:  # a malformed path may raise OSError, ValueError, RecursionError…
            await tracker.start(tool.name, kind, args)
            return await tracker.fail(f"Error: invalid arguments for {tool.name}: {err}")

        pending = await tracker.start(
            invocation.title, kind, args, invocation.locations, await _proposed(invocation, ctx)
        )
        denial = await authorize(invocation, pending, ctx)
        # Judged with no await since authorize returned: the mode that let the call through unasked.
        unasked = denial is None and skipped_question(invocation, ctx)
        if denial is not None:
            # A denied call fails, whatever the reason (a client's "cancelled"
            # answer included): the turn goes on. A cancelled turn never gets
            # here; it leaves through CancelledError and is reported cancelled.
            if ctx.refused is not None:
                ctx.refused(denial)
            return await tracker.fail(denial_message(denial))

        await tracker.progress(invocation.content_on_start(call.call_id))
        run_ctx = replace(ctx, guard_instructions=True) if unasked else ctx
        outcome = await self._run(tool, invocation.run, run_ctx, call.call_id)
        status = ToolStatus.FAILED if outcome.failed else ToolStatus.COMPLETED
        # Shielded: the tool has acted. A cancel arriving now must not report (and record) as
        # cancelled a change that was made; it takes effect once the outcome is told.
        with anyio.CancelScope(shield=True):
            await tracker.finish(status, outcome.content, outcome.locations)
        return ToolReply(outcome.text, outcome.images) if outcome.images and ctx.images else outcome.text

    @staticmethod
    async def _run(tool: Tool, run: Runner, ctx: ToolContext, call_id: str) -> Outcome:
        """Run the tool; any ordinary exception becomes a failed outcome for the model."""
        try:
            return await run(ctx, call_id)
        except ToolFailed as err:
            return Outcome.failure(f"Error: {err}")
        except OSError as err:
            return Outcome.failure(f"Error: {tool.name} failed: {_os_message(err)}")
        except Exception as err:
            log.exception("tool raised", tool=tool.name)
            return Outcome.failure(f"Error: {tool.name} failed unexpectedly: {err}")


async def _proposed(invocation: Invocation, ctx: ToolContext) -> tuple[ToolOutput, ...]:
    """The change a call that needs approval would make, for the user to review before deciding."""
    if invocation.preview is None or not needs_approval(invocation, ctx.access.workspace, ctx.approval_mode()):
        return ()
    return await anyio.to_thread.run_sync(invocation.preview, abandon_on_cancel=True)


def _os_message(err: OSError) -> str:
    if err.strerror is None:
        return str(err)
    name = err.filename
    return f"{err.strerror}: {shown(name) if isinstance(name, str | bytes) else name}" if name else err.strerror
