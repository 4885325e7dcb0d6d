"""The status history of one tool call, told to the client and the record.

Every transition is emitted as a ToolCallChanged and recorded as a new
snapshot, so that replay shows the call's last known state even when the
process dies mid-call. The first emission carries `first=True`.
"""

from __future__ import annotations

from dataclasses import replace

from term2.domain.history import (
    Location,
    TextOutput,
    ToolCall,
    ToolKind,
    ToolOutput,
    ToolStatus,
)
from term2.ports.tools import ToolContext
from term2.ports.updates import ToolCallChanged


class CallTracker:
    def __init__(self, call_id: str, ctx: ToolContext) -> None:
        self._call_id = call_id
        self._ctx = ctx
        self.snapshot: ToolCall | None = None
        self._announced = False

    async def start(
        self,
        title: str,
        kind: ToolKind,
        raw_input: dict[str, object],
        locations: tuple[Location, ...] = (),
        content: tuple[ToolOutput, ...] = (),
    ) -> ToolCall:
        call = ToolCall(
            self._call_id, title, kind, ToolStatus.PENDING, raw_input, content, locations
        )
        await self._publish(call)
        return call

    async def progress(self, content: tuple[ToolOutput, ...]) -> None:
        await self._publish(
            replace(self._current(), status=ToolStatus.IN_PROGRESS, content=content)
        )

    async def finish(
        self,
        status: ToolStatus,
        content: tuple[ToolOutput, ...],
        locations: tuple[Location, ...] | None = None,
    ) -> None:
        call = replace(self._current(), status=status, content=content)
        if locations is not None:
            call = replace(call, locations=locations)
        await self._publish(call)

    async def fail(self, message: str, status: ToolStatus = ToolStatus.FAILED) -> str:
        await self.finish(status, (TextOutput(message),))
        return message

    async def cancelled(self, fallback_title: str) -> None:
        """Record the cancellation; keeps whatever content the call had so far."""
        if self.snapshot is not None and self.snapshot.status.is_final:
            return
        call = self.snapshot or ToolCall(
            self._call_id, fallback_title, ToolKind.OTHER, ToolStatus.PENDING
        )
        await self._publish(replace(call, status=ToolStatus.CANCELLED))

    def _current(self) -> ToolCall:
        if self.snapshot is None:
            raise RuntimeError("tool call reported before it started")
        return self.snapshot

    async def _publish(self, call: ToolCall) -> None:
        self.snapshot = call
        first = not self._announced
        self._announced = True
        await self._ctx.emit(ToolCallChanged(call, first=first))
        await self._ctx.record(call)
