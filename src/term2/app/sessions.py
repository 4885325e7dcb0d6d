"""Session use cases: create, list, reopen, replay and close.

An open session lives in the registry while a client works with it; its
grants and its one foreground turn are process-local, while everything worth
keeping goes to the store as it happens.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from term2.app.clock import new_session_id, utc_now
from term2.app.mcp.servers import McpSessions, Notify
from term2.app.turn import Turn
from term2.domain.errors import InvalidInput, NotFound
from term2.domain.footholds import unsafe_root_reason
from term2.domain.model_choice import ModelChoice
from term2.domain.roots import MAX_ADDITIONAL, overlap_reason
from term2.domain.session import Session, SessionPage, SessionState
from term2.domain.workspace import SessionAccess
from term2.ports.outputs import OutputArchive
from term2.ports.session_store import InvalidCursor, SessionStore

if TYPE_CHECKING:  # the history is read by turns and replays, which load it (ADR 0052)
    from term2.app.instructions import ProjectInstructions
    from term2.domain.context_estimate import ContextMemory
    from term2.domain.history import HistoryEntry
    from term2.ports.mcp import McpServer

LIST_PAGE_SIZE = 50
CLOSE_SETTLE_TIMEOUT_S = 10.0
MAX_CWD_CHARS = 4096  # PATH_MAX on Linux


def _absolute(cwd: object, what: str = "cwd") -> str:
    if not isinstance(cwd, str) or not cwd:
        raise InvalidInput(f"{what} must be a non-empty string")
    if "\x00" in cwd:
        raise InvalidInput(f"{what} must not contain NUL bytes")
    if len(cwd) > MAX_CWD_CHARS:
        # No such path can exist, and realpath() is quadratic in the number of separators:
        # a few MB of "/" would block the event loop for minutes.
        raise InvalidInput(f"{what} is too long ({len(cwd)} characters, at most {MAX_CWD_CHARS})")
    if not os.path.isabs(cwd):
        raise InvalidInput(f"{what} must be an absolute path, got {cwd!r}")
    return cwd


def _shown(path: str) -> str:
    """A path as a refusal names it (`names.shown`); those rules load with the turn part, not with a session
    that is opened without a refusal (ADR 0053)."""
    from term2.app.tools.names import shown

    return shown(path)


def filter_cwd(cwd: object) -> str:
    """A list filter names a folder that may be gone (a deleted project still has its sessions)."""
    return os.path.realpath(_absolute(cwd))


def canonical_cwd(cwd: object, what: str = "cwd") -> str:
    """Validate a client-supplied workspace cwd and return its realpath.

    A folder whose path is not UTF-8 (`term2 exec` run in `caf\\xe9/`, or a link
    to it) is refused by name: sessions are kept and listed by their folder as
    text, which has no exact form for it (ADR 0034).
    """
    real = os.path.realpath(_absolute(cwd, what))
    if not os.path.exists(real):
        raise InvalidInput(f"{what} does not exist: {_shown(str(cwd))}")
    if not os.path.isdir(real):
        raise InvalidInput(f"{what} is not a directory: {_shown(str(cwd))}")
    try:
        real.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(
            f"{what} {_shown(real)} cannot be a workspace: its path is not UTF-8, and sessions are kept by their "
            "folder's path as text; rename the folder or open one whose path is UTF-8"
        ) from None
    return real


class KnownHistory:
    """What this process has read of a session's history, so that a turn reads only what came since.

    Reading and decoding the whole history every turn made a long session's
    turns slower by ~0.3 ms each (a 200-turn session: ~60 ms a turn). The
    store hands out what was appended after a position, whichever process
    appended it, so keeping the position keeps the view whole.
    """

    def __init__(self) -> None:
        self._entries: list[HistoryEntry] = []
        self._position = 0
        self._written: dict[int, HistoryEntry] = {}  # what this process appended since, by position

    def wrote(self, position: int, entry: HistoryEntry) -> None:
        """A snapshot this process appended at ``position``: the next read takes it as it is, undecoded
        (decoding needs pydantic's schema, which a process that has only written need not build, ADR 0053)."""
        self._written[position] = entry

    async def read(self, store: SessionStore, session_id: str) -> list[HistoryEntry]:
        """The compacted history now (a copy the caller may keep)."""
        new, self._position = await store.appended(session_id, self._position, dict(self._written))
        self._written = {at: entry for at, entry in self._written.items() if at > self._position}
        if new:
            from term2.domain.history import compact

            self._entries = compact([*self._entries, *new])
        return list(self._entries)


@dataclass(eq=False)
class OpenSession:
    """A session a client is attached to in this process."""

    session: Session
    access: SessionAccess
    turn: Turn = field(default_factory=Turn)
    history: KnownHistory = field(default_factory=KnownHistory)
    _instructions: ProjectInstructions | None = field(default=None, init=False, repr=False)
    _context: ContextMemory | None = field(default=None, init=False, repr=False)

    @property
    def context(self) -> ContextMemory:
        """What the provider's counts taught, across turns; made by the first turn (opening a session does not
        import its module, ADR 0053)."""
        if self._context is None:
            from term2.domain.context_estimate import ContextMemory

            self._context = ContextMemory()
        return self._context

    @property
    def instructions(self) -> ProjectInstructions:
        """The project's instruction files, cached until they change; made by the first turn that reads
        them (opening a session does not import them, ADR 0053)."""
        if self._instructions is None:
            from term2.app.instructions import ProjectInstructions

            workspace = self.access.workspace
            self._instructions = ProjectInstructions(workspace.root, extra_roots=workspace.extra_roots)
        return self._instructions

    def with_roots(self, extra_roots: tuple[str, ...]) -> None:
        """The session's additional roots, named anew by a load or resume."""
        self.access.with_roots(extra_roots)
        if self._instructions is not None:
            self._instructions.with_roots(extra_roots)


class SessionRegistry:
    def __init__(self) -> None:
        self._open: dict[str, OpenSession] = {}

    def get(self, session_id: str) -> OpenSession | None:
        return self._open.get(session_id)

    def attach(self, session: Session) -> OpenSession:
        current = self._open.get(session.session_id)
        if current is not None:
            return current
        opened = OpenSession(session, SessionAccess(session.cwd, session.mode, session.additional_directories))
        self._open[session.session_id] = opened
        return opened

    def detach(self, session_id: str) -> None:
        self._open.pop(session_id, None)


def workspace_root(cwd: object, private: Sequence[str] = (), what: str = "cwd") -> str:
    """A cwd that may become a workspace root: canonical, and not one no agent should write in.

    The same rule the sandbox applies before binding a root (domain
    ``unsafe_root_reason``), checked here first so that the file tools never
    get a root the shell would refuse: a session on ``/`` or a home folder
    would let them write anywhere without asking.
    """
    root = canonical_cwd(cwd, what)
    home = os.path.realpath(os.path.expanduser("~"))
    reason = unsafe_root_reason(root, home=home, private=[os.path.realpath(p) for p in private])
    if reason is not None:
        raise InvalidInput(f"{what} {root} cannot be a workspace: {reason}")
    return root


def additional_roots(directories: Sequence[object], root: str, private: Sequence[str] = ()) -> tuple[str, ...]:
    """The editor's additional directories as roots: each checked as `cwd` is, none inside or holding another
    root, each owned by whoever owns `root` (the sandbox runs every command as that owner, ADR 0050)."""
    if len(directories) > MAX_ADDITIONAL:
        raise InvalidInput(f"additionalDirectories: at most {MAX_ADDITIONAL} are supported, got {len(directories)}")
    roots = [root]
    for index, directory in enumerate(directories):
        what = f"additionalDirectories[{index}]"
        candidate = workspace_root(directory, private, what)
        reason = overlap_reason(candidate, roots)
        if reason is not None:
            raise InvalidInput(f"{what} cannot be a root: {reason}")
        try:
            other_owner = os.stat(candidate).st_uid != os.stat(root).st_uid
        except OSError as exc:  # gone since it was checked
            raise InvalidInput(f"{what} {_shown(candidate)} cannot be a root: {exc.strerror}") from None
        if other_owner:
            raise InvalidInput(
                f"{what} {_shown(candidate)} cannot be a root: it belongs to another user than the workspace "
                f"{_shown(root)}, and commands run as that folder's owner"
            )
        roots.append(candidate)
    return tuple(roots[1:])


class SessionService:
    """``private`` are term2's own data and config folders: no workspace may hold or sit in them."""

    def __init__(
        self,
        store: SessionStore,
        registry: SessionRegistry,
        private: Sequence[str] = (),
        mcp: McpSessions | None = None,
        launcher: ModelChoice | None = None,
        outputs: OutputArchive | None = None,
    ) -> None:
        self._outputs = outputs  # the sessions' archived tool outputs, removed with a deleted session
        self._store = store
        self._registry = registry
        self._private = tuple(private)
        self._mcp = mcp
        self._launcher = launcher  # the model and effort new sessions start with, kept with each (ADR 0043)

    async def connect_servers(self, session_id: str, servers: Sequence[McpServer], notify: Notify) -> None:
        """Start the MCP servers the client named for an open session, replacing those it had (ADR 0023).

        Returns once they are starting, not started: a slow server does not hold up the session.
        """
        opened = self._registry.get(session_id)
        if opened is None or self._mcp is None:
            return
        await self._mcp.open(session_id, opened.session.cwd, servers, notify)

    async def new(self, cwd: object, directories: Sequence[object] = ()) -> OpenSession:
        root = workspace_root(cwd, self._private)
        extra = additional_roots(directories, root, self._private)
        now = utc_now()
        session = Session(new_session_id(), root, created_at=now, updated_at=now, additional_directories=extra)
        if self._launcher is not None:
            session = session.with_model(self._launcher.model, self._launcher.effort)
        await self._store.create(session)
        return self._registry.attach(session)

    async def list(self, cwd: object | None, cursor: str | None) -> SessionPage:
        root = filter_cwd(cwd) if cwd is not None else None
        try:
            return await self._store.list(root, cursor, LIST_PAGE_SIZE)
        except InvalidCursor as exc:
            raise InvalidInput(f"invalid cursor: {exc}") from exc

    async def reopen(self, session_id: str, cwd: object, directories: Sequence[object] | None = ()) -> OpenSession:
        """Attach to a stored session (resume or load); the cwd must be the session's own.

        `directories` is the complete list of additional roots from now on, whatever the session had before
        (ACP v1 Session Setup: it may differ from the stored one; none named, none active). None keeps the
        stored list, checked again as if named (`term2 exec --resume` without `--add-dir`: the user's own).
        """
        root = workspace_root(cwd, self._private)
        opened = self._registry.get(session_id)
        session = opened.session if opened else await self._store.get(session_id)
        if session is None:
            raise NotFound(f"unknown session: {session_id}")
        if session.cwd != root:
            raise InvalidInput(f"cwd {root} does not match the session's workspace {session.cwd}")
        named = session.additional_directories if directories is None else directories
        extra = additional_roots(named, root, self._private)
        if session.state is SessionState.CLOSED or session.additional_directories != extra:
            if session.state is SessionState.CLOSED:
                session = session.with_state(SessionState.IDLE)
            session = session.with_directories(extra).touched(utc_now())
            await self._store.save(session)
        if opened is not None:
            opened.session = session
            opened.with_roots(extra)
            return opened
        return self._registry.attach(session)

    def history(self, session_id: str) -> AsyncIterator[HistoryEntry]:
        return self._store.history(session_id)

    async def discard(self, session_id: str) -> None:
        """Close the session and remove it from the store: made for a turn that never reached a model."""
        await self.close(session_id)
        await self._store.delete(session_id)

    async def close(self, session_id: str) -> bool:
        """Cancel active work, wait for it to settle, then release the session.

        Returns False when cancellation did not settle in time; the session is
        closed all the same and the caller reports the failure.
        """
        opened = self._registry.get(session_id)
        if opened is None:
            if await self._store.get(session_id) is None:
                raise NotFound(f"unknown session: {session_id}")
            return True
        settled = await self._release(opened)
        closed = opened.session.with_state(SessionState.CLOSED).touched(utc_now())
        await self._store.save(closed)
        return settled

    async def delete(self, session_id: str) -> bool:
        """Settle the session as `close` does, then remove it, its history (images and title with it) and
        its archived outputs, durably; NotFound when no such session exists. Returns False when the turn
        did not settle in time (the session is deleted all the same, and the caller says so).
        """
        opened = self._registry.get(session_id)
        settled = await self._release(opened) if opened is not None else True
        deleted = await self._store.delete(session_id)
        self._registry.detach(session_id)  # a load that attached it again while this settled: gone too
        if not deleted and opened is None:
            raise NotFound(f"unknown session: {session_id}")
        if self._outputs is not None:
            await self._outputs.drop(session_id)
        return settled

    async def _release(self, opened: OpenSession) -> bool:
        """Detach first, so no prompt can be admitted from here on, then end and wait for the running turn
        and the session's MCP servers; the grants go with the process-local state."""
        session_id = opened.session.session_id
        self._registry.detach(session_id)
        opened.turn.invalidate()
        opened.turn.cancel()
        settled = await opened.turn.wait_settled(CLOSE_SETTLE_TIMEOUT_S)
        if self._mcp is not None:
            await self._mcp.close(session_id)  # after the turn: its calls to them have ended
        opened.access.reset()
        return settled
