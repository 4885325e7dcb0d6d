"""The agent side of the run_code bridge: one narrow channel, one call at a time.

A program inside the sandbox asks for term2 tools by name with JSON
arguments; each request becomes an ordinary tool call through the nested
toolbox, so the workspace rule, approvals and the sandbox apply to it exactly
as to a direct call. Anything malformed is answered with an error; a message
over the size limit closes the channel. The program never gets a file
descriptor or a path it did not already have.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

from term2.domain.history import HistoryEntry, ToolCall, ToolStatus
from term2.ports.approval import ApprovalDecision, ApprovalRequest, Approver
from term2.ports.llm import ToolCallRequest
from term2.ports.tools import Toolbox, ToolContext
from term2.ports.updates import SessionEvent, ToolCallChanged

MAX_MESSAGE_BYTES = 1024 * 1024
PROGRAM_REQUEST = "__program__"


@dataclass
class NestedCall:
    call_id: str
    tool: str
    failed: bool


@dataclass
class BridgeLog:
    calls: list[NestedCall] = field(default_factory=list)
    refused: int = 0

    def summary(self) -> str:
        if not self.calls and not self.refused:
            return "nested tool calls: none"
        lines = [f"nested tool calls: {len(self.calls)}"]
        lines += [f"  {c.call_id} {c.tool}: {'failed' if c.failed else 'ok'}" for c in self.calls]
        if self.refused:
            lines.append(f"  refused malformed or unknown requests: {self.refused}")
        return "\n".join(lines)


def nested_context(ctx: ToolContext, parent_id: str, statuses: dict[str, ToolStatus]) -> ToolContext:
    """The parent's context, with every nested call linked to the run_code call that made it.

    The final status of each nested call is noted in `statuses`, which is how the
    bridge tells the program whether its call succeeded. Nested calls use the disk,
    through descriptors, even where the editor serves files (ADR 0024).
    """

    def link(call: ToolCall) -> ToolCall:
        return call if call.parent_id else replace(call, parent_id=parent_id)

    async def emit(event: SessionEvent) -> None:
        if isinstance(event, ToolCallChanged):
            statuses[event.call.tool_call_id] = event.call.status
            event = ToolCallChanged(link(event.call), event.first)
        await ctx.emit(event)

    async def record(entry: HistoryEntry) -> None:
        await ctx.record(link(entry) if isinstance(entry, ToolCall) else entry)

    approver = _LinkedApprover(ctx.approver, link)
    # No editor reads or writes: the program runs beside its nested calls and could swap a path for a symlink
    # between term2's check and the editor's act, which (unlike a descriptor) would follow it (ADR 0024).
    return ToolContext(
        ctx.session_id,
        ctx.access,
        approver,
        ctx.sandbox,
        emit,
        record,
        ctx.interaction,
        ctx.outputs,
        client_files=None,
        mode=ctx.mode,
        refused=ctx.refused,
    )


@dataclass(frozen=True, slots=True)
class _LinkedApprover:
    """The parent's approver, asked about the nested call as linked to its parent (so `_meta` names it)."""

    inner: Approver
    link: Callable[[ToolCall], ToolCall]

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        return await self.inner.request(replace(request, tool_call=self.link(request.tool_call)))


class Bridge:
    def __init__(
        self,
        program: str,
        nested: Toolbox,
        ctx: ToolContext,
        parent_id: str,
    ) -> None:
        self._program = program
        self._program_sent = False
        self._nested = nested
        self._statuses: dict[str, ToolStatus] = {}
        self._ctx = nested_context(ctx, parent_id, self._statuses)
        self._parent_id = parent_id
        self._tools = {spec.name for spec in nested.specs()}
        self.log = BridgeLog()

    async def serve(self, stream: ByteStream) -> None:
        """Answer requests until the program closes its end or breaks the rules."""
        reader = BufferedByteReceiveStream(stream)
        while True:
            try:
                # +1: anyio gives up once that many bytes are buffered without the delimiter, and a
                # message of exactly the limit may sit in the buffer before its newline arrives.
                line: bytes | None = await reader.receive_until(b"\n", MAX_MESSAGE_BYTES + 1)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            except anyio.DelimiterNotFound:
                line = None
            # receive_until only checks its limit between reads, so a line may overshoot it by one chunk.
            if line is None or len(line) > MAX_MESSAGE_BYTES:
                self.log.refused += 1
                await _reply(stream, None, error=f"message over {MAX_MESSAGE_BYTES} bytes; bridge closed")
                # Really close it: a program still writing the rest of the message
                # would otherwise block on a full socket until the timeout.
                await stream.aclose()
                return
            reply = await self._answer(line)
            try:
                await stream.send(json.dumps(reply).encode() + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except ValueError:
            self.log.refused += 1
            return {"id": None, "ok": False, "error": "request is not valid JSON"}
        if not isinstance(request, dict):
            self.log.refused += 1
            return {"id": None, "ok": False, "error": "request must be a JSON object"}
        request_id = request.get("id")
        tool, args = request.get("tool"), request.get("args", {})
        if tool == PROGRAM_REQUEST and not self._program_sent:  # the launcher asks once; later asks are forged
            self._program_sent = True
            return {"id": request_id, "ok": True, "result": self._program}
        if not isinstance(tool, str) or tool not in self._tools:
            self.log.refused += 1
            known = ", ".join(sorted(self._tools))
            return {"id": request_id, "ok": False, "error": f"unknown tool {tool!r}; available: {known}"}
        if not isinstance(args, dict):
            self.log.refused += 1
            return {"id": request_id, "ok": False, "error": "args must be a JSON object"}
        call_id = f"{self._parent_id}.{len(self.log.calls) + 1}"
        result = await self._nested.execute(ToolCallRequest(call_id, tool, json.dumps(args)), self._ctx)
        failed = self._statuses.get(call_id) is not ToolStatus.COMPLETED
        self.log.calls.append(NestedCall(call_id, tool, failed))
        if failed:
            return {"id": request_id, "ok": False, "error": result}
        return {"id": request_id, "ok": True, "result": result}


async def _reply(stream: ByteStream, request_id: object, error: str) -> None:
    try:
        await stream.send(json.dumps({"id": request_id, "ok": False, "error": error}).encode() + b"\n")
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
