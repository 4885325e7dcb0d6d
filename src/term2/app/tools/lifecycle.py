"""The status history of one tool call, told to the client and the record.

Every transition is emitted as a ToolCallChanged and recorded as a new
snapshot, so that replay shows the call's last known state even when the
process dies mid-call. The first emission carries `first=True`.

What is told and recorded is text: the tools name paths as names.py shows
them, and any lone surrogate still left (an OS error's file name, a run_code
program's raw arguments) is written out as its escape here (names.said), so
no file name can stop the JSON of an update or the session store's row.
What an editor acts on is never escaped, since an escape names another
file: a location whose path has no exact form is dropped, and such a diff is
marked as naming no file an editor may act on (names.for_editor).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from term2.app.tools.names import for_editor, said, shown
from term2.domain.history import (
    DiffOutput,
    Location,
    TerminalOutput,
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
        call = ToolCall(self._call_id, title, kind, ToolStatus.PENDING, raw_input, content, locations)
        return await self._publish(call)

    async def progress(self, content: tuple[ToolOutput, ...]) -> None:
        await self._publish(replace(self._current(), status=ToolStatus.IN_PROGRESS, content=content))

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
        call = self.snapshot or ToolCall(self._call_id, fallback_title, ToolKind.OTHER, ToolStatus.PENDING)
        await self._publish(replace(call, status=ToolStatus.CANCELLED))

    def _current(self) -> ToolCall:
        if self.snapshot is None:
            raise RuntimeError("tool call reported before it started")
        return self.snapshot

    async def _publish(self, call: ToolCall) -> ToolCall:
        call = told(call)
        self.snapshot = call
        first = not self._announced
        self._announced = True
        await self._ctx.emit(ToolCallChanged(call, first=first))
        await self._ctx.record(call)
        return call


def told(call: ToolCall) -> ToolCall:
    """`call` with every lone surrogate in its text written as an escape; an equal call when there is none."""
    return replace(
        call,
        title=said(call.title),
        raw_input=_said_json(call.raw_input),
        content=tuple(_said_output(output) for output in call.content),
        locations=tuple(place for place in call.locations if for_editor(place.path) is not None),
    )


def _said_json(value: Any) -> Any:
    if isinstance(value, str):
        return said(value)
    if isinstance(value, dict):
        return {said(key) if isinstance(key, str) else key: _said_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_said_json(item) for item in value]
    return value


def _said_output(output: ToolOutput) -> ToolOutput:
    if isinstance(output, TextOutput):
        return replace(output, text=said(output.text))
    if isinstance(output, DiffOutput):
        if output.exact_path and for_editor(output.path) is None:  # no editor may act on a name it cannot be told
            output = replace(output, path=shown(output.path), exact_path=False)
        old = None if output.old_text is None else said(output.old_text)
        patch = None if output.patch is None else said(output.patch)
        return replace(output, path=said(output.path), old_text=old, new_text=said(output.new_text), patch=patch)
    if isinstance(output, TerminalOutput):
        return replace(output, command=said(output.command), cwd=said(output.cwd), output=said(output.output))
    return output
