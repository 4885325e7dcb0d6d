"""The slash commands term2 answers itself (ADR 0043): `/status` and `/compact`.

A prompt is a command only when its text is exactly a known `/name`
(optionally followed by input); an unknown `/word` is an ordinary prompt and
goes to the model as text. The user's words are recorded as typed either way,
so `session/load` replays `/compact` as the user wrote it. `/status` makes no
model request: everything it says is known here. `/compact` summarises the
older conversation now, with the session's own model, and says what it kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from term2.domain.content import ContentBlock, TextBlock

if TYPE_CHECKING:  # the turn's machinery: the session methods list the commands without loading it
    from term2.app.compaction import Compactor
    from term2.app.metering import Meter
    from term2.app.transcript import Transcript
    from term2.ports.sandbox import Sandbox


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    description: str
    hint: str | None = None  # what to type after the name, for a command that takes input


COMMANDS = (
    Command("status", "Show the model, effort, context used, cost so far, sandbox, network and MCP servers"),
    Command("compact", "Summarise the older conversation now to free context, and say what was kept"),
)
_NAMES = frozenset(c.name for c in COMMANDS)


def command_of(prompt: tuple[ContentBlock, ...]) -> str | None:
    """The known command a prompt is, or None (an unknown `/word` is text for the model)."""
    if len(prompt) != 1 or not isinstance(prompt[0], TextBlock):
        return None
    text = prompt[0].text.strip()
    if not text.startswith("/"):
        return None
    name = text[1:].split(maxsplit=1)[0] if len(text) > 1 else ""
    return name if name in _NAMES else None


@dataclass(frozen=True, slots=True)
class StatusFacts:
    model: str
    effort: str | None
    reasons: bool
    window: int | None
    mcp: tuple[tuple[str, str], ...] | None


async def status_text(facts: StatusFacts, transcript: Transcript, meter: Meter, sandbox: Sandbox) -> str:
    """What `/status` answers, from what this process knows: no model request."""
    used = transcript.occupancy()
    context = f"about {used:,} tokens" + (
        f" of {facts.window:,} ({used * 100 // facts.window}%)" if facts.window else ""
    )
    spent = meter.spent().session
    cost = meter.session_cost
    effort = facts.effort or ("the model's default" if facts.reasons else "none (the model does not reason)")
    probe = await sandbox.status()
    sandboxed = (
        f"bubblewrap, {probe.detail}; commands run only inside it, never without it"
        if probe.available
        else f"unavailable ({probe.detail}): commands cannot run; nothing runs outside it"
    )
    network = "off for commands; a host is reached only through term2's proxy, after you allow it"
    if probe.network:
        network += f" ({probe.network})"
    servers = "none" if not facts.mcp else "; ".join(f"{name}: {state}" for name, state in facts.mcp)
    lines = [
        f"Model: {facts.model}",
        f"Effort: {effort}",
        f"Context: {context}",
        f"Tokens so far: {spent.input:,} in, {spent.output:,} out"
        + (f"; cost so far: ${cost:.4f}" if cost is not None else "; cost: no prices known for this model"),
        f"Sandbox: {sandboxed}",
        f"Network: {network}",
        f"MCP servers: {servers}",
    ]
    return "\n".join(lines)


async def compact_now(compactor: Compactor, transcript: Transcript) -> str:
    """Compact the conversation now and say what was kept."""
    before = len(transcript.messages)
    tokens = transcript.occupancy()
    if before == 0 or not await compactor.compact(transcript, forced=True):
        return "Nothing to compact yet: the conversation is already as short as it can be."
    kept = len(transcript.messages)
    return (
        f"Compacted the conversation: {before} messages (about {tokens:,} tokens) became {kept}, "
        f"about {transcript.occupancy():,} tokens. Kept: a summary of the older conversation and "
        "the most recent exchanges word for word. Your history in the editor is unchanged."
    )
