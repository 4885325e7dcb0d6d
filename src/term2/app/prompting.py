"""The prompt use case: admit one foreground turn per session, run it, settle it.

Every path ends the same way: the session is released, its settled event is
set and the caller gets a stop reason, whether the model finished, the user
cancelled, or the provider failed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import anyio

from term2.app.agent_loop import run_loop
from term2.app.clock import new_id, utc_now
from term2.app.commands import (
    ANSWERED,
    INIT_PROMPT,
    Invoked,
    StatusFacts,
    compact_now,
    invoked,
    review_command,
    review_prompt,
    review_ref,
    status_text,
)
from term2.app.compaction import Compactor
from term2.app.conversation import model_transcript, system_prompt
from term2.app.mcp.servers import McpSessions, SessionServers
from term2.app.mcp.toolbox import session_toolbox
from term2.app.metering import Meter
from term2.app.session_models import FollowingModel, ModelSetup, SessionModels
from term2.app.sessions import OpenSession, SessionRegistry
from term2.app.tools.locked_sandbox import LockedSandbox
from term2.app.tools.paths import canonical_root
from term2.app.transcript import Transcript
from term2.domain.approval import ApprovalMode
from term2.domain.content import ContentBlock, TextBlock, images_of, render_for_model
from term2.domain.errors import InvalidInput, NotFound, Term2Error
from term2.domain.history import AgentMessage, HistoryEntry, UserMessage
from term2.domain.session import SessionState
from term2.domain.transcript import ChatMessage
from term2.domain.turn import StopReason, TurnLimits
from term2.ports.approval import Approver, DenialReason
from term2.ports.client_files import ClientFiles
from term2.ports.folder_locks import FolderLocks
from term2.ports.llm import LLMError
from term2.ports.outputs import OutputArchive
from term2.ports.sandbox import CommandRequest, Sandbox, SandboxFailed, SandboxUnavailable
from term2.ports.session_store import SessionStore
from term2.ports.tools import ToolContext
from term2.ports.updates import (
    MessageChunk,
    SessionEvent,
    Spent,
    StateChanged,
    TitleChanged,
    UpdateSink,
    UserMessageSent,
)
from term2.support.deferred_log import get_logger

log = get_logger("term2.prompt")

Emit = Callable[[SessionEvent], Awaitable[None]]
Record = Callable[[HistoryEntry], Awaitable[None]]


def cache_key(session_id: str) -> str:
    """Stable within a session, different across sessions, and not the session id itself (a bearer secret)."""
    return hashlib.sha256(f"term2-cache:{session_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    stop_reason: StopReason
    error: str | None = None
    spent: Spent | None = None
    answered: bool = True  # False: no model answered anything (a key refused, a server down or silent)
    refused: int = 0  # tool calls the gate refused during the turn (rejected, no one to ask, read-only)


class RefusedCalls:
    """Counts the turn's refused tool calls, as the gate decides them: the one place every denial passes."""

    def __init__(self) -> None:
        self.count = 0

    def note(self, _reason: DenialReason) -> None:
        self.count += 1


class PromptService:
    def __init__(
        self,
        store: SessionStore,
        registry: SessionRegistry,
        models: SessionModels,
        sandbox: Sandbox,
        limits: TurnLimits,
        outputs: OutputArchive | None = None,
        mcp: McpSessions | None = None,
        folder_locks: FolderLocks | None = None,
    ) -> None:
        self._store = store
        self._registry = registry
        # Per turn, from the session's choice: the provider is built (and litellm loaded) lazily, and the
        # budget, prices and edit tools follow the model the session runs now (ADR 0043).
        self._models = models
        # One set of folder locks on both sides (ADR 0038): every program this service runs holds its root's,
        # and the file tools ask the editor only under theirs. Without locks the editor is never asked.
        self._folder_locks = folder_locks
        self._sandbox: Sandbox = sandbox if folder_locks is None else LockedSandbox(sandbox, folder_locks)
        self._limits = limits
        self._outputs = outputs
        self._mcp = mcp  # the session's MCP servers, whose tools join the built-in ones (ADR 0023)

    def admit(self, session_id: str, prompt: tuple[ContentBlock, ...] = ()) -> OpenSession:
        """Claim the session's one foreground slot, before any preparation starts.

        A prompt with images for a model that takes none is refused here, before
        anything is recorded or sent: the session stays as it was (ADR 0046).
        """
        opened = self._registry.get(session_id)
        if opened is None:
            raise NotFound(f"unknown or closed session: {session_id}")
        if images_of(prompt):
            model, takes = self._models.takes_images(opened.session)
            if not takes:
                raise InvalidInput(
                    f"the model {model} does not take images; remove the image, or choose a model that takes "
                    "images (a local model can be declared with `images = true` in config.toml)"
                )
        opened.turn.admit(session_id)
        return opened

    def check_credentials(self, session_id: str) -> None:
        """NotAuthenticated when the session's model has no key (an unknown session is admit's to refuse)."""
        opened = self._registry.get(session_id)
        if opened is not None:
            self._models.check_credentials(opened.session)

    def release(self, opened: OpenSession) -> None:
        """Give the slot back when preparation failed and no turn will run."""
        opened.turn.settle()

    def cancel(self, session_id: str) -> None:
        opened = self._registry.get(session_id)
        if opened is not None:
            opened.turn.cancel()

    async def run(
        self,
        opened: OpenSession,
        prompt: tuple[ContentBlock, ...],
        sink: UpdateSink,
        approver: Approver,
        *,
        client_files: ClientFiles | None = None,  # the editor's reads and writes, where it serves them
    ) -> TurnOutcome:
        session_id = opened.session.session_id
        scope = opened.turn.scope

        async def emit(event: SessionEvent) -> None:
            await sink.send(session_id, event)

        async def record(entry: HistoryEntry) -> None:
            opened.history.wrote(await self._store.append(session_id, entry), entry)

        outcome = TurnOutcome(StopReason.CANCELLED)
        meter = Meter()
        refusals = RefusedCalls()
        try:
            with scope:
                outcome = await self._turn(opened, prompt, emit, record, approver, meter, client_files, refusals)
        except LLMError as exc:  # the user is told through the turn itself: the log keeps it, stderr stays quiet
            log.info("turn failed", session_id=session_id, kind=exc.kind, error=str(exc))
            outcome = TurnOutcome(StopReason.ERROR, str(exc))
        except Term2Error as exc:
            log.info("turn failed", session_id=session_id, error=str(exc))
            outcome = TurnOutcome(StopReason.ERROR, str(exc))
        except Exception as exc:
            log.exception("turn failed", session_id=session_id)
            outcome = TurnOutcome(StopReason.ERROR, f"internal error: {exc}")
        finally:
            with anyio.CancelScope(shield=True):
                if outcome.error is not None:
                    await self._report_failure(outcome.error, emit, record)
                spent = await self._record_spending(meter, record)
                outcome = replace(outcome, spent=spent, answered=meter.answered, refused=refusals.count)
                await self._settle(opened, outcome, emit)
        return outcome

    async def _turn(
        self,
        opened: OpenSession,
        prompt: tuple[ContentBlock, ...],
        emit: Emit,
        record: Record,
        approver: Approver,
        meter: Meter,
        client_files: ClientFiles | None = None,
        refusals: RefusedCalls | None = None,
    ) -> TurnOutcome:
        session = opened.session
        entries = await opened.history.read(self._store, session.session_id)
        meter.start(entries, None)  # the session's totals so far, even if the model turns out unusable below
        user = UserMessage(new_id("user"), prompt)
        await emit(UserMessageSent(user.message_id, prompt))
        await record(user)
        text = render_for_model(prompt)
        # Re-read: a model chosen while this turn was being admitted must not be overwritten.
        untitled = opened.session.title is None
        typed = " ".join(b.text for b in prompt if isinstance(b, TextBlock))  # the user's words name it, if any
        titled = opened.session.titled_from(typed or text)
        opened.session = titled.with_state(SessionState.RUNNING).touched(utc_now())
        await self._store.save(opened.session)
        if untitled and opened.session.title is not None:  # stored first: a list right after the update has it
            await emit(TitleChanged(opened.session.title, opened.session.updated_at))
        setup = self._models.setup(opened.session)  # after the prompt is recorded: an unusable model fails the turn
        llm, budget = FollowingModel(self._models, opened, setup.llm), setup.budget
        meter.start(entries, setup.prices)  # again, now with the prices: costs too
        instructions = await opened.instructions.read()
        tools = setup.toolbox.specs()  # the system prompt names the built-in tools; MCP tools describe themselves
        command = invoked(prompt)
        # /review's turn is read-only whatever the session's mode; any other turn follows the session's, live.
        turn_mode = ApprovalMode.READ_ONLY if command is not None and command.name == "review" else None
        planning = (turn_mode or opened.access.mode) is ApprovalMode.READ_ONLY
        system = ChatMessage(
            "system",
            system_prompt(
                session.cwd, tools, instructions, planning=planning, extra_roots=session.additional_directories
            ),
        )
        servers = self._mcp.servers(session.session_id) if self._mcp is not None else None
        toolbox = await session_toolbox(setup.toolbox, servers)
        key = cache_key(session.session_id)
        messages = model_transcript(entries)
        transcript = Transcript(
            system, toolbox.specs(), messages, record, key, memory=opened.context, max_tokens=budget.max_output
        )
        if command is not None and command.name in ANSWERED:
            await self._command(command.name, opened, transcript, meter, setup, servers, approver, emit, record)
            return TurnOutcome(StopReason.END_TURN)
        if command is not None:
            asked = await self._model_command(command, session.cwd, emit, record)
            if asked is None:
                return TurnOutcome(StopReason.END_TURN)
            text = asked  # the model's prompt; the user's words stay recorded (and replayed) as typed
        await transcript.add(ChatMessage("user", text, images=images_of(prompt)), stored=ChatMessage("user", text))
        ctx = ToolContext(
            session.session_id,
            opened.access,
            approver,
            self._sandbox,
            emit,
            record,
            opened.turn,
            self._outputs,
            client_files=client_files,
            folder_locks=self._folder_locks,
            mode=turn_mode,
            images=self._models.takes_images(opened.session)[1],
            refused=refusals.note if refusals is not None else None,
        )
        compactor = Compactor(llm, budget, ctx, meter, counter=llm)
        stop = await run_loop(transcript, llm, toolbox, ctx, self._limits, compactor=compactor, meter=meter)
        return TurnOutcome(stop)

    async def _command(
        self,
        command: str,
        opened: OpenSession,
        transcript: Transcript,
        meter: Meter,
        setup: ModelSetup,
        servers: SessionServers | None,
        approver: Approver,
        emit: Emit,
        record: Record,
    ) -> None:
        """Answer a slash command as the agent's message; the prompt itself is not shown to the model."""
        ctx = ToolContext(
            opened.session.session_id, opened.access, approver, self._sandbox, emit, record, opened.turn, self._outputs
        )
        if command == "compact":
            answer = await compact_now(Compactor(setup.llm, setup.budget, ctx, meter), transcript)
        else:
            choice = self._models.choice(opened.session)
            model = choice.model if choice is not None else "none configured"
            effort = choice.effort if choice is not None else None
            reasons = bool(choice and self._models.efforts(choice.model))
            states = servers.states() if servers is not None else None
            facts = StatusFacts(model, effort, reasons, setup.budget.window, states, opened.access.mode.value)
            answer = await status_text(facts, transcript, meter, self._sandbox)
        message = AgentMessage(new_id("msg"), answer)
        await emit(MessageChunk(message.message_id, message.text))
        await record(message)

    async def _model_command(self, command: Invoked, root: str, emit: Emit, record: Record) -> str | None:
        """The prompt /init or /review gives the model, or None when term2 answered the command itself."""
        if command.name == "init":
            return INIT_PROMPT
        try:
            ref = review_ref(command.argument)
        except ValueError as exc:
            message = AgentMessage(new_id("msg"), str(exc))
            await emit(MessageChunk(message.message_id, message.text))
            await record(message)
            return None
        shell = review_command(ref)
        return review_prompt(ref, shell, await self._read_changes(shell, root))

    async def _read_changes(self, shell: str, root: str) -> str:
        """What /review's fixed git command prints, run in the sandbox (never outside it) without network."""
        canonical = canonical_root(root)
        request = CommandRequest(command=shell, root=canonical, cwd=canonical, timeout_s=60.0)

        async def ignore(_data: bytes) -> None:
            return None

        try:
            result = await self._sandbox.run(request, ignore)
        except (SandboxUnavailable, SandboxFailed) as exc:
            return f"(term2 could not read the changes: the sandbox did not run the command: {exc})"
        text = result.output.decode("utf-8", errors="replace")
        if result.exit_code != 0:
            text += f"\n(the command ended with exit code {result.exit_code})"
        return text

    async def _record_spending(self, meter: Meter, record: Record) -> Spent:
        """Keep the turn's usage in the history (the next turn's totals start from it)."""
        entry = meter.record(new_id("turn"))
        if entry is not None:
            try:
                await record(entry)
            except Exception:
                log.exception("could not record the turn's usage")
        return meter.spent()

    async def _report_failure(self, error: str, emit: Emit, record: Record) -> None:
        message = AgentMessage(new_id("msg"), f"term2 could not finish this turn: {error}")
        try:
            await emit(MessageChunk(message.message_id, message.text))
            await record(message)
        except Exception:
            log.exception("could not report a failed turn")

    async def _settle(self, opened: OpenSession, outcome: TurnOutcome, emit: Emit) -> None:
        """Release the session; the idle update goes out only now that the turn has really ended."""
        opened.turn.invalidate()  # no question asked during the turn may be answered from now on
        try:
            opened.session = opened.session.with_state(SessionState.IDLE).touched(utc_now())
            await self._store.save(opened.session)
        except Exception:
            log.exception("could not save settled session")
        try:
            await emit(StateChanged("idle", outcome.stop_reason, outcome.spent))
        except Exception:
            log.exception("could not send the idle update")
        finally:
            opened.turn.settle()
