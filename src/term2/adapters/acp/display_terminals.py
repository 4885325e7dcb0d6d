"""A sandboxed command's output as a terminal in the tool call's card, for clients that draw one (Zed).

Zed advertises `clientCapabilities._meta.terminal_output: true` and then
draws a display-only terminal from tool-call `_meta`; the shapes below are
the ones its `handle_session_notification` (zed-industries/zed,
`crates/agent_servers/src/acp.rs`) reads:

- a `tool_call` whose `_meta.terminal_info` is `{"terminal_id", "cwd"}`
  creates the terminal, labelled with the call's title, before the call is
  applied, so that the call's own `{"type": "terminal", "terminalId"}`
  content resolves. A second `tool_call` for a known id updates that call
  (Zed's `upsert_tool_call`), which is how a call announced before its
  command started gets its terminal;
- a `tool_call_update` whose `_meta.terminal_output` is `{"terminal_id",
  "data"}` appends `data` (a string; Zed writes its UTF-8 bytes and adds a CR
  before each bare LF);
- a `tool_call_update` whose `_meta.terminal_exit` is `{"terminal_id",
  "exit_code", "signal"}` ends it.

The command runs in term2's sandbox as for every client; the client only
draws what term2 streams. `_meta` is open in the v1 schema, so every message
stays valid for clients that ignore it. One terminal a call (run_shell has
one); a call's other terminal outputs, if it ever had any, show as text.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from term2.domain.history import TerminalOutput, ToolCall
from term2.ports.updates import TerminalChunk

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1


@dataclass
class _Stream:
    """What one terminal was sent so far: chunks may split a UTF-8 sequence, so they are decoded in order."""

    decoder: codecs.IncrementalDecoder = field(default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"))
    sent: list[str] = field(default_factory=list)
    announced: bool = False


@dataclass(frozen=True, slots=True)
class Shown:
    """How a tool call's change is drawn: `terminal` is the one shown as a terminal (None: none is);
    `announce` sends the call as a `tool_call` carrying `meta`, which creates it; `after` follows the call."""

    terminal: TerminalOutput | None
    announce: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    after: tuple[v1.SessionUpdate, ...] = ()


def terminal_of(call: ToolCall) -> TerminalOutput | None:
    return next((c for c in call.content if isinstance(c, TerminalOutput)), None)


class DisplayTerminals:
    def __init__(self) -> None:
        self._streams: dict[str, _Stream] = {}

    def tool_call(self, call: ToolCall, replay: bool) -> Shown:
        """A replay draws each terminal afresh (the client opened a new thread) with its whole output."""
        terminal = terminal_of(call)
        if terminal is None:
            return Shown(None)
        stream = self._streams.get(terminal.terminal_id)
        if stream is None or replay:
            stream = self._streams[terminal.terminal_id] = _Stream()
        meta: dict[str, Any] = {}
        announce = not stream.announced
        if announce:
            stream.announced = True
            meta["terminal_info"] = {"terminal_id": terminal.terminal_id, "cwd": terminal.cwd}
        if not call.status.is_final:
            return Shown(terminal, announce, meta)
        del self._streams[terminal.terminal_id]
        after: list[v1.SessionUpdate] = []
        rest = _unsent(terminal.output, "".join(stream.sent))
        if rest:
            after.append(_meta_update(call.tool_call_id, "terminal_output", terminal.terminal_id, {"data": rest}))
        ended = {"exit_code": terminal.exit_code, "signal": terminal.signal}
        after.append(_meta_update(call.tool_call_id, "terminal_exit", terminal.terminal_id, ended))
        return Shown(terminal, announce, meta, tuple(after))

    def chunk(self, event: TerminalChunk) -> list[v1.SessionUpdate]:
        stream = self._streams.setdefault(event.terminal_id, _Stream())
        text = stream.decoder.decode(event.data)
        if not text:
            return []
        stream.sent.append(text)
        return [_meta_update(event.tool_call_id, "terminal_output", event.terminal_id, {"data": text})]


def _unsent(final: str, sent: str) -> str:
    """What the recorded output adds to what was streamed: the sandbox's notices after a command, or
    the whole output when nothing was streamed (a replay). Nothing when the two disagree: the
    streamed bytes are what the command wrote, and are never drawn twice."""
    return final[len(sent) :] if final.startswith(sent) else ""


def _meta_update(call_id: str, key: str, terminal_id: str, fields: dict[str, Any]) -> v1.SessionUpdate:
    update: v1.SessionUpdateToolCallUpdate = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "_meta": {key: {"terminal_id": terminal_id, **fields}},
    }
    return update
