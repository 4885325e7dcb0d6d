"""The slash commands (ADR 0043, 0044): `/status` and `/compact` term2 answers itself; `/init` and
`/review` are turns of the model with a prompt term2 writes.

A prompt is a command only when its text is exactly a known `/name`
(optionally followed by input); an unknown `/word` is an ordinary prompt and
goes to the model as text. The user's words are recorded as typed either way,
so `session/load` replays `/compact` as the user wrote it. `/status` makes no
model request: everything it says is known here. `/compact` summarises the
older conversation now, with the session's own model, and says what it kept.
`/init` asks the model to write AGENTS.md, which the gate asks about in every
mode (an instruction file). `/review [ref]` runs read-only for its turn,
whatever the session's mode, with the changes read by a fixed `git` command in
the sandbox: the model could not run one itself in read-only.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from term2.domain.content import ContentBlock, TextBlock
from term2.domain.truncation import keep_head

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
    Command("status", "Show the model, effort, mode, context used, cost so far, sandbox, network and MCP servers"),
    Command("compact", "Summarise the older conversation now to free context, and say what was kept"),
    Command("init", "Write an AGENTS.md for this repository from what the model finds (asks before writing it)"),
    Command(
        "review",
        "Review the uncommitted changes, or the given ref, read-only: nothing is changed",
        hint="optional git ref or range to review (default: the uncommitted changes)",
    ),
)
_NAMES = frozenset(c.name for c in COMMANDS)
ANSWERED = frozenset({"status", "compact"})  # answered by term2 itself, without a turn of the model

# What /review accepts as its ref: a git revision or range, never an option or anything the shell reads.
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/@{}~^:+-]{0,199}")
REVIEW_DIFF_LIMIT = 60_000  # characters of the changes put into the prompt; the model reads files for more


@dataclass(frozen=True, slots=True)
class Invoked:
    name: str
    argument: str  # what the user typed after the name, stripped ("" for none)


def invoked(prompt: tuple[ContentBlock, ...]) -> Invoked | None:
    """The known command a prompt is, with its input, or None (an unknown `/word` is text for the model)."""
    if len(prompt) != 1 or not isinstance(prompt[0], TextBlock):
        return None
    text = prompt[0].text.strip()
    if not text.startswith("/"):
        return None
    parts = text[1:].split(maxsplit=1)
    name = parts[0] if parts else ""
    return Invoked(name, parts[1].strip() if len(parts) > 1 else "") if name in _NAMES else None


INIT_PROMPT = """\
The user typed /init: write an AGENTS.md file at the workspace root for agents working in this repository.

First find out, with the read and search tools: what the project is, its layout, its languages and \
frameworks, how to build it, run its tests, lint and format it (from its README, configuration, CI files \
and scripts), and the conventions its code follows. If an AGENTS.md (or CLAUDE.md, GEMINI.md) already \
exists, read it and improve it rather than starting over.

Then write AGENTS.md with `write_file`: short and concrete (about 20 to 60 lines), in Markdown, with the \
exact commands, the layout, the conventions and any pitfalls you found. Write nothing you did not find. \
The user is asked before the file is written; if they refuse, say so and stop."""

REVIEW_PROMPT = """\
The user typed /review{shown}: review {what}. This turn is read-only: you can read and search, and every \
edit, command and MCP call is refused, so do not try to change anything.

Look for bugs, regressions, security problems, missing tests and unclear code, reading the surrounding \
files where the change needs context. Answer with a short overall assessment, then each finding with its \
file and line, how serious it is and a suggested fix. Say so plainly if you find nothing worth changing.

The changes, as `{command}` printed them in the sandbox:

{diff}"""


def review_ref(argument: str) -> str | None:
    """The ref /review was given, or None for the uncommitted changes; a ref git could read as an option
    or the shell as anything but one word is refused (ValueError)."""
    if not argument:
        return None
    if not _REF.fullmatch(argument):
        raise ValueError(f"/review takes one git ref or range (like main, HEAD~2 or main..HEAD), not {argument!r}")
    return argument


def review_command(ref: str | None) -> str:
    """The fixed git command that prints what /review reviews; no pager, no external diff or textconv
    driver, no optional lock: it only reads (it runs in the sandbox, where `.git` is read-only anyway)."""
    git = "git --no-pager --no-optional-locks -c core.fsmonitor=false"
    if ref is None:
        return f"{git} status --short && {git} diff HEAD --no-ext-diff --no-textconv --stat --patch"
    quoted = shlex.quote(ref)
    if ".." in ref:
        return f"{git} diff --no-ext-diff --no-textconv --stat --patch {quoted}"
    return f"{git} show --no-ext-diff --no-textconv --stat --patch {quoted}"


def review_prompt(ref: str | None, command: str, output: str) -> str:
    what = "the uncommitted changes in the workspace" if ref is None else f"the changes of `{ref}`"
    diff = keep_head(output, REVIEW_DIFF_LIMIT, "\n[... the rest was cut: read the files for it]")
    return REVIEW_PROMPT.format(
        shown="" if ref is None else f" {ref}", what=what, command=command, diff=diff or "(no output)"
    )


@dataclass(frozen=True, slots=True)
class StatusFacts:
    model: str
    effort: str | None
    reasons: bool
    window: int | None
    mcp: tuple[tuple[str, str], ...] | None
    mode: str = "ask"


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
        f"Mode: {facts.mode}",
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
