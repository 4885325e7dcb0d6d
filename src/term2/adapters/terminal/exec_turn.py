"""`term2 exec`'s driver: open or reopen a session, run one turn through the prompt use case, report it.

This is the terminal's counterpart of ACP's session methods: it calls the
same use cases (`SessionService`, `PromptService`) with its own update sink
and approver, so a turn run here is the turn an editor runs, stored the same
way. Ctrl-C (or SIGTERM) cancels the turn through its cancel scope, like
`session/cancel`: a tool call that finished is reported and nothing is left
half-done; a second one leaves at once.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.abc

from term2.adapters.terminal.view import Ended, ExecView
from term2.app.prompting import PromptService
from term2.app.sessions import OpenSession, SessionService
from term2.domain.content import TextBlock
from term2.domain.errors import NotFound, Term2Error
from term2.domain.turn import StopReason
from term2.ports.approval import Approver
from term2.ports.updates import StateChanged


@dataclass(frozen=True, slots=True)
class ExecRequest:
    prompt: str
    cwd: str  # absolute; the session service checks it (and refuses unsafe roots) as for session/new
    resume: str | None = None  # a session id
    newest: bool = False  # --continue: the newest session made in `cwd`
    # `--model`/`--effort` as given: a new session starts with them anyway; a resumed one keeps its own
    # choice (ADR 0043) unless the command line names another.
    model: str | None = None
    effort: str | None = None
    mode: str | None = None  # `--mode` as given (ADR 0044); like the model, a resumed session keeps its own
    # `--add-dir` as given (ADR 0051): more workspace roots; a resumed session keeps its own unless some are named
    add_dirs: tuple[str, ...] = ()


Choose = Callable[[str, str, str], Awaitable[object]]  # (session id, config id, value): the pickers' use case


class Interrupts:
    """What Ctrl-C does: the first cancels the turn, the second leaves without waiting for it."""

    def __init__(self, cancel: Callable[[], None], leave: Callable[[], None], view: ExecView) -> None:
        self._cancel = cancel
        self._leave = leave
        self._view = view
        self.count = 0

    def interrupted(self) -> None:
        self.count += 1
        if self.count == 1:
            self._view.notice("cancelling the turn (Ctrl-C again to quit at once)")
            self._cancel()
        else:
            self._leave()

    async def watch(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                self.interrupted()


async def open_session(sessions: SessionService, request: ExecRequest) -> OpenSession:
    directories = request.add_dirs or None  # none named: a resumed session keeps its own
    if request.resume is not None:
        return await sessions.reopen(request.resume, request.cwd, directories)
    if request.newest:
        page = await sessions.list(request.cwd, None)
        if not page.sessions:
            raise NotFound(f"no session to continue in {request.cwd}")
        return await sessions.reopen(page.sessions[0].session_id, request.cwd, directories)
    return await sessions.new(request.cwd, request.add_dirs)


async def run_exec(
    sessions: SessionService,
    prompts: PromptService,
    request: ExecRequest,
    view: ExecView,
    approver: Approver,
    leave: Callable[[], None],
    choose: Choose | None = None,
) -> Ended:
    """One turn in the session `request` names; raises the session service's errors before any turn starts.

    `leave` ends the process at once (a second Ctrl-C); the caller owns the process.
    """
    opened = await open_session(sessions, request)
    session_id = opened.session.session_id
    if choose is not None and (request.resume is not None or request.newest):
        if request.model:
            await choose(session_id, "model", request.model)
        if request.effort:
            await choose(session_id, "thought_level", request.effort)
    if choose is not None and request.mode:
        await choose(session_id, "mode", request.mode)
    interrupts = Interrupts(lambda: prompts.cancel(session_id), leave, view)
    refused: Term2Error | None = None
    async with anyio.create_task_group() as tg:
        await tg.start(interrupts.watch)  # before the turn: no Ctrl-C may find the default handler
        try:
            prompts.check_credentials(session_id)  # a resumed session's own model may need another key
            admitted = prompts.admit(session_id)
        except Term2Error as exc:  # raised outside the task group, as itself
            refused = exc
        else:
            await view.send(session_id, StateChanged("running"))  # as ACP v2 says when it accepts a prompt
            outcome = await prompts.run(admitted, (TextBlock(request.prompt),), view, approver)
        tg.cancel_scope.cancel()
    if refused is not None:
        raise refused
    kept = True
    new = request.resume is None and not request.newest
    if new and outcome.stop_reason is StopReason.ERROR and not outcome.answered:
        # No model answered (a refused key, a server down or silent): the session holds nothing
        # but the prompt and the error, and would only clutter every session list.
        with anyio.CancelScope(shield=True):
            await sessions.discard(session_id)
        kept = False
    ended = Ended(session_id, outcome.stop_reason, outcome.error, outcome.spent, kept, outcome.refused)
    view.finish(ended)
    if ended.refused and ended.stop_reason is StopReason.END_TURN:
        calls = "1 tool call was" if ended.refused == 1 else f"{ended.refused} tool calls were"
        view.notice(f"{calls} refused, so the work may be incomplete (exit status 6)")
    return ended
