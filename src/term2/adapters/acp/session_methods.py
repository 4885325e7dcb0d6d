"""The session methods of ACP v1 and v2 over the application's use cases.

Loaded with the application, off the `initialize` path: this is where pydantic
checks parameters and the use cases run. Results are typed with the schemas'
definitions; where v1 and v2 share a result shape, one literal serves both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from term2.adapters.acp import params as p
from term2.adapters.acp.approval_bridge import AcpApprover
from term2.adapters.acp.connection import AfterReply, Handler, JsonRpcConnection
from term2.adapters.acp.errors import INTERNAL_ERROR, INVALID_PARAMS, RpcError
from term2.adapters.acp.updates import AcpUpdateSink
from term2.adapters.acp.wire_common import STOP_REASONS, spent_meta, turn_usage
from term2.app.prompting import PromptService
from term2.app.replay import replay
from term2.app.sessions import SessionService
from term2.domain.session import Session
from term2.domain.turn import StopReason
from term2.ports.updates import StateChanged

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1, v2


def _session_info(session: Session) -> v1.SessionInfo:
    info: v1.SessionInfo = {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "updatedAt": session.updated_at.isoformat(),
    }
    if session.title:
        info["title"] = session.title
    return info


def _refuse_extras(mcp_servers: list[Any] | None, directories: list[Any] | None, method: str) -> None:
    if mcp_servers:
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: term2 does not support MCP servers")
    if directories:
        raise RpcError(
            INVALID_PARAMS, f"Invalid params for {method}: term2 does not support additionalDirectories"
        )


class SessionMethods:
    """One instance per connection, bound to the negotiated version."""

    def __init__(
        self,
        sessions: SessionService,
        prompts: PromptService,
        connection: JsonRpcConnection,
        version: int,
        sink: AcpUpdateSink,
        on_session: Callable[[], None] = lambda: None,
    ) -> None:
        self._on_session = on_session
        self._sessions = sessions
        self._prompts = prompts
        self._version = version
        self._sink = sink
        self._approver = AcpApprover(connection, version, sink)

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
        return table

    async def new(self, params: Any) -> v1.NewSessionResponse | v2.NewSessionResponse:
        args = p.parse(p.NewSession, params, "session/new")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/new")
        opened = await self._sessions.new(args.cwd)
        self._on_session()
        return {"sessionId": opened.session.session_id}

    async def list(self, params: Any) -> v1.ListSessionsResponse | v2.ListSessionsResponse:
        args = p.parse(p.ListSessions, params, "session/list")
        page = await self._sessions.list(args.cwd, args.cursor)
        result: v1.ListSessionsResponse | v2.ListSessionsResponse = {
            "sessions": [_session_info(s) for s in page.sessions]
        }
        if page.next_cursor is not None:
            result["nextCursor"] = page.next_cursor
        return result

    async def resume(self, params: Any) -> v1.ResumeSessionResponse | v2.ResumeSessionResponse:
        args = p.parse(p.ResumeSession, params, "session/resume")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/resume")
        replay_from = args.replay_from if self._version == 2 else None
        if replay_from is not None and replay_from.type != "start":
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params for session/resume: unsupported replayFrom type {replay_from.type!r}",
            )
        opened = await self._sessions.reopen(args.session_id, args.cwd)
        self._on_session()
        if replay_from is not None:
            await self._replay(opened.session.session_id)
        return {}

    async def load(self, params: Any) -> v1.LoadSessionResponse:
        args = p.parse(p.ResumeSession, params, "session/load")
        _refuse_extras(args.mcp_servers, args.additional_directories, "session/load")
        opened = await self._sessions.reopen(args.session_id, args.cwd)
        self._on_session()
        await self._replay(opened.session.session_id)
        return {}

    async def _replay(self, session_id: str) -> None:
        async for event in replay(self._sessions.history(session_id)):
            await self._sink.replay(session_id, event)

    async def close(self, params: Any) -> v1.CloseSessionResponse | v2.CloseSessionResponse:
        args = p.parse(p.SessionRef, params, "session/close")
        if not await self._sessions.close(args.session_id):
            raise RpcError(
                INTERNAL_ERROR, "the session's active work did not settle; the session was closed anyway"
            )
        return {}

    async def prompt(self, params: Any) -> AfterReply | v1.PromptResponse:
        args = p.parse(p.Prompt, params, "session/prompt")
        blocks = p.prompt_blocks(args.prompt)
        opened = self._prompts.admit(args.session_id)

        async def run() -> Any:
            return await self._prompts.run(opened, blocks, self._sink, self._approver)

        if self._version == 2:
            try:
                await self._sink.send(args.session_id, StateChanged("running"))
            except BaseException:
                self._prompts.release(opened)
                raise
            accepted: v2.PromptResponse = {}  # v2 acknowledges now; the turn reports through state_update
            return AfterReply(accepted, run)
        outcome = await run()
        if outcome.stop_reason is StopReason.ERROR:
            raise RpcError(INTERNAL_ERROR, f"The turn failed: {outcome.error}")
        response: v1.PromptResponse = {"stopReason": STOP_REASONS[outcome.stop_reason]}
        if outcome.spent is not None:
            response["usage"] = turn_usage(outcome.spent)
            response["_meta"] = spent_meta(outcome.spent)
        return response

    async def cancel(self, params: Any) -> None:
        if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
            self._prompts.cancel(params["sessionId"])
