"""The session methods of ACP v1 and v2 over the application's use cases.

Loaded with the application, off the `initialize` path: this is where pydantic-core
checks parameters and the use cases run. Results are typed with the schemas'
definitions; where v1 and v2 share a result shape, one literal serves both.

Creating, listing and closing sessions need only the session use case, so
they are served as soon as it is built; prompts and replays wait for `Turns`,
which start-up builds next (see `term2.app.entrypoints.serve`). Their modules
are imported where they are first needed, not here.
"""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from term2.adapters.acp import params as p
from term2.adapters.acp.auth_methods import Authentication, AuthMethods
from term2.adapters.acp.connection import AfterReply, Handler
from term2.adapters.acp.errors import AUTH_REQUIRED, INTERNAL_ERROR, INVALID_PARAMS, RpcError
from term2.adapters.acp.mcp_servers import mcp_servers
from term2.app.session_config import SessionConfig
from term2.app.sessions import SessionService
from term2.domain.errors import NotAuthenticated
from term2.domain.session import Session

if TYPE_CHECKING:
    from term2.adapters.acp.turns import Turns
    from term2.adapters.acp.wire_types import v1, v2
    from term2.ports.mcp import McpServer


_R = TypeVar("_R", bound=Mapping[str, object])
Notify = Callable[[str, Mapping[str, object]], Awaitable[None]]  # a notification to the client


def _session_info(session: Session) -> v1.SessionInfo:
    info: v1.SessionInfo = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "updatedAt": session.updated_at.isoformat(),
    }
    if session.title:
        info["title"] = session.title
    if session.additional_directories:
        info["additionalDirectories"] = list(session.additional_directories)
    return info


def _refuse_extras(mcp_servers: list[Any] | None, directories: list[Any] | None, method: str) -> None:
    if mcp_servers:
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: term2 does not support MCP servers")
    if directories:
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: term2 does not support additionalDirectories")


class SessionMethods:
    """One instance per connection, bound to the negotiated version."""

    def __init__(
        self,
        sessions: SessionService,
        version: int,
        turns: Callable[[], Awaitable[Turns]],
        on_session: Callable[[], None] = lambda: None,
        on_turn_end: Callable[[], None] = lambda: None,
        config: SessionConfig | None = None,
        notify: Notify | None = None,
        auth: Authentication | None = None,
    ) -> None:
        self._auth = AuthMethods(auth) if auth is not None else None  # v1 `authenticate`, `logout` (ADR 0047)
        self._on_session = on_session
        self._on_turn_end = on_turn_end
        self._config = config  # the pickers and commands, offered on v1 only (ADR 0043)
        self._notify = notify
        self._sessions = sessions
        self._version = version
        self._turns = turns
        self._made: Turns | None = None  # once a request has waited for the turn part
        self._waiting: dict[str, int] = {}  # prompts waiting for the turn part, by session
        self._cancelled_early: set[str] = set()  # ... of which a cancel arrived meanwhile

    def table(self) -> dict[str, Handler]:
        table: dict[str, Handler] = {
            "session/new": self.new,
            "session/list": self.list,
            "session/resume": self.resume,
            "session/close": self.close,
            "session/prompt": self.prompt,
        }
        if self._version == 1:
            table["session/load"] = self.load
            table["session/delete"] = self.delete
            table["session/set_config_option"] = self.set_config_option
            table["session/set_mode"] = self.set_mode
            if self._auth is not None:
                table["authenticate"] = self._auth.authenticate
                table["logout"] = self._auth.logout
        return table

    async def new(self, params: Any) -> v1.NewSessionResponse | v2.NewSessionResponse | AfterReply:
        args = p.parse(p.NEW_SESSION, params, "session/new")
        _refuse_extras(self._v2_only(args["mcpServers"]), self._v2_only(args["additionalDirectories"]), "session/new")
        servers = mcp_servers(args["mcpServers"], "session/new")
        opened = await self._sessions.new(args["cwd"], args["additionalDirectories"] or ())
        self._on_session()
        created: v1.NewSessionResponse | v2.NewSessionResponse = {"sessionId": opened.session.session_id}
        self._add_options(created, opened.session)
        return await self._with_servers(opened.session.session_id, servers, created)

    async def list(self, params: Any) -> v1.ListSessionsResponse | v2.ListSessionsResponse:
        args = p.parse(p.LIST_SESSIONS, params, "session/list")
        page = await self._sessions.list(args["cwd"], args["cursor"])
        result: v1.ListSessionsResponse | v2.ListSessionsResponse = {
            "sessions": [_session_info(s) for s in page.sessions]
        }
        if page.next_cursor is not None:
            result["nextCursor"] = page.next_cursor
        return result

    async def resume(self, params: Any) -> v1.ResumeSessionResponse | v2.ResumeSessionResponse | AfterReply:
        args = p.parse(p.RESUME_SESSION, params, "session/resume")
        directories = args["additionalDirectories"]
        _refuse_extras(self._v2_only(args["mcpServers"]), self._v2_only(directories), "session/resume")
        servers = mcp_servers(args["mcpServers"], "session/resume")
        replay_from = args["replayFrom"] if self._version == 2 else None
        if replay_from is not None and replay_from["type"] != "start":
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params for session/resume: unsupported replayFrom type {replay_from['type']!r}",
            )
        opened = await self._sessions.reopen(args["sessionId"], args["cwd"], directories or ())
        self._on_session()
        if replay_from is not None:
            await self._replay(opened.session.session_id)
        resumed: v1.ResumeSessionResponse | v2.ResumeSessionResponse = {}
        self._add_options(resumed, opened.session)
        return await self._with_servers(opened.session.session_id, servers, resumed)

    async def load(self, params: Any) -> v1.LoadSessionResponse | AfterReply:
        args = p.parse(p.RESUME_SESSION, params, "session/load")
        directories = args["additionalDirectories"]
        _refuse_extras(self._v2_only(args["mcpServers"]), self._v2_only(directories), "session/load")
        servers = mcp_servers(args["mcpServers"], "session/load")
        opened = await self._sessions.reopen(args["sessionId"], args["cwd"], directories or ())
        self._on_session()
        await self._replay(opened.session.session_id)
        loaded: v1.LoadSessionResponse = {}
        self._add_options(loaded, opened.session)
        return await self._with_servers(opened.session.session_id, servers, loaded)

    async def set_config_option(self, params: Any) -> v1.SetSessionConfigOptionResponse | AfterReply:
        """v1 only: change the model, the effort or the mode; the answer is the full set (ADR 0043).

        A mode changed here is told as `current_mode_update` too, after the reply, for a client that
        shows the legacy modes (ADR 0044).
        """
        from term2.adapters.acp.config_options import config_options, mode_update
        from term2.app.session_config import MODE

        args = p.parse(p.SET_CONFIG_OPTION, params, "session/set_config_option")
        if self._config is None:
            raise RpcError(INVALID_PARAMS, "Invalid params for session/set_config_option: no options here")
        value = args["value"]
        if not isinstance(value, str) or args["type"] == "boolean":
            raise RpcError(
                INVALID_PARAMS,
                "Invalid params for session/set_config_option: value must be a value id (term2's options are selects)",
            )
        session_id = args["sessionId"]
        selects = await self._config.choose(session_id, args["configId"], value)
        answer: v1.SetSessionConfigOptionResponse = {"configOptions": config_options(selects)}
        update = mode_update(session_id, selects) if args["configId"] == MODE else None
        if update is None:
            return answer
        return AfterReply(answer, partial(self._tell, update))

    async def set_mode(self, params: Any) -> AfterReply:
        """v1 only, for clients that know modes and not config options: the same three modes as the
        `mode` select (ADR 0044); the change is told as `config_option_update`, after the reply."""
        from term2.adapters.acp.config_options import options_update
        from term2.app.session_config import MODE

        args = p.parse(p.SET_MODE, params, "session/set_mode")
        if self._config is None:
            raise RpcError(INVALID_PARAMS, "Invalid params for session/set_mode: no modes here")
        session_id = args["sessionId"]
        selects = await self._config.choose(session_id, MODE, args["modeId"])
        answer: dict[str, object] = {}  # SetSessionModeResponse: no fields
        return AfterReply(answer, partial(self._tell, options_update(session_id, selects)))

    async def _tell(self, update: v1.SessionNotification) -> None:
        if self._notify is None:
            return
        try:
            await self._notify("session/update", update)
        except Exception:  # the client went away; nothing else to tell
            return

    def _offers_config(self) -> bool:
        return self._version == 1 and self._config is not None

    def _add_options(self, result: Mapping[str, object], session: Session) -> None:
        """v1's `configOptions` on a new, loaded or resumed session; the shared v1/v2 literal is typed
        as v2's first, which has no such field, so the v1 value is typed on its own."""
        from term2.adapters.acp.config_options import config_options, mode_state

        if self._config is not None and self._version == 1:
            selects = self._config.selects(session)
            options: builtins.list[v1.SessionConfigOption] = config_options(selects)
            cast(dict[str, object], result)["configOptions"] = options
            modes = mode_state(selects)
            if modes is not None:  # the same mode, for clients that know only the legacy modes (ADR 0044)
                cast(dict[str, object], result)["modes"] = modes

    def _v2_only(self, items: builtins.list[Any] | None) -> builtins.list[Any] | None:
        """v2 refuses MCP servers and additional directories as its page says; v1 takes both (ADR 0023, 0051)."""
        return items if self._version == 2 else None

    async def _with_servers(
        self, session_id: str, servers: tuple[tuple[McpServer, ...], tuple[str, ...]], result: _R
    ) -> _R | AfterReply:
        """Start the session's MCP servers now (in the background), and tell the user about them only
        once the reply is out: a notice for a session the client does not know yet would be lost."""
        replied = anyio.Event()

        async def notice(text: str) -> None:
            from term2.app.clock import new_id
            from term2.ports.updates import Notice  # a turn's updates: not loaded to open a session

            await replied.wait()
            turns = await self._turns()
            await turns.sink.send(session_id, Notice(new_id("notice"), text, "warning"))

        await self._sessions.connect_servers(session_id, servers[0], notice)
        commands = self._offers_config() and self._notify is not None
        if not servers[0] and not servers[1] and not commands:
            return result

        async def then() -> None:
            replied.set()
            if commands:  # after the reply: Zed drops updates for a session it does not know yet
                await self._send_commands(session_id)
            for text in servers[1]:
                try:
                    await notice(text)
                except Exception:  # the client went away; nothing else to tell
                    return

        return AfterReply(result, then)

    async def _send_commands(self, session_id: str) -> None:
        from term2.adapters.acp.config_options import commands_update
        from term2.app.commands import COMMANDS

        assert self._notify is not None
        try:
            await self._notify("session/update", commands_update(session_id, COMMANDS))
        except Exception:  # the client went away; nothing else to tell
            return

    async def _replay(self, session_id: str) -> None:
        from term2.app.replay import replay

        self._made = await self._turns()
        sink = self._made.sink
        async for event in replay(self._sessions.history(session_id)):
            await sink.replay(session_id, event)

    async def close(self, params: Any) -> v1.CloseSessionResponse | v2.CloseSessionResponse:
        args = p.parse(p.SESSION_REF, params, "session/close")
        if not await self._sessions.close(args["sessionId"]):
            raise RpcError(INTERNAL_ERROR, "the session's active work did not settle; the session was closed anyway")
        return {}

    async def delete(self, params: Any) -> v1.DeleteSessionResponse:
        """v1 only: an active turn is cancelled and settled first, as close does; then the session is gone."""
        args = p.parse(p.SESSION_REF, params, "session/delete")
        if not await self._sessions.delete(args["sessionId"]):
            raise RpcError(INTERNAL_ERROR, "the session's active work did not settle; the session was deleted anyway")
        return {}

    async def prompt(self, params: Any) -> AfterReply | v1.PromptResponse:
        from term2.adapters.acp.wire_common import STOP_REASONS, spent_meta, turn_usage
        from term2.domain.turn import StopReason
        from term2.ports.updates import StateChanged

        args = p.parse(p.PROMPT, params, "session/prompt")
        blocks = p.prompt_blocks(args["prompt"], embedded=self._version == 1)
        session_id = args["sessionId"]
        self._waiting[session_id] = self._waiting.get(session_id, 0) + 1
        try:
            turns = await self._turns()
        finally:
            self._waiting[session_id] -= 1
            if not self._waiting[session_id]:
                del self._waiting[session_id]
        self._made = turns
        if self._version == 1:  # v1 Authentication: a missing key is `auth_required`; v2's page has no such error
            try:
                turns.prompts.check_credentials(session_id)
            except NotAuthenticated as exc:
                raise RpcError(AUTH_REQUIRED, "Authentication required", {"message": str(exc)}) from None
        opened = turns.prompts.admit(session_id, blocks)
        if session_id in self._cancelled_early:  # the turn starts cancelled and ends as such, in the usual way
            self._cancelled_early.discard(session_id)
            turns.prompts.cancel(session_id)

        async def run() -> Any:
            try:
                return await turns.prompts.run(opened, blocks, turns.sink, turns.approver, client_files=turns.files)
            finally:
                self._on_turn_end()

        if self._version == 2:
            try:
                await turns.sink.send(args["sessionId"], StateChanged("running"))
            except BaseException:
                turns.prompts.release(opened)
                raise
            accepted: v2.PromptResponse = {}  # v2 acknowledges now; the turn reports through state_update
            return AfterReply(accepted, run)
        outcome = await run()
        if outcome.stop_reason is StopReason.ERROR:
            raise RpcError(INTERNAL_ERROR, f"The turn failed: {outcome.error}")
        response: v1.PromptResponse = {"stopReason": STOP_REASONS[outcome.stop_reason]}
        if outcome.spent is not None:
            if outcome.spent.reported:  # never zeros passed off as measured: no count, no `usage`
                # Unstable in v1 since SDK 2.4.0 (stable clients drop it; Zed's unstable build reads it).
                cast(dict[str, object], response)["usage"] = turn_usage(outcome.spent)
            response["_meta"] = spent_meta(outcome.spent)
        return response

    async def cancel(self, params: Any) -> None:
        """Never waits for the turn part: notifications are handled in the reading loop, in order.

        Before the turn part exists no turn can be running; a prompt still
        waiting for it is marked, and starts cancelled.
        """
        if not (isinstance(params, dict) and isinstance(params.get("sessionId"), str)):
            return
        session_id = params["sessionId"]
        if self._made is not None:
            self._made.prompts.cancel(session_id)
        elif session_id in self._waiting:
            self._cancelled_early.add(session_id)
