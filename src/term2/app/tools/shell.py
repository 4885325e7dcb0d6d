"""run_shell: run one command, always inside the sandbox.

There is no unconfined path: the Sandbox port cannot express one, a model
asking for `sandbox: "unsandboxed"` is silently given the sandboxed default,
and when the sandbox is unavailable the call fails rather than falling back.
Output streams to the client as it arrives; the model gets the exit status
and the output capped (head and tail kept, the middle marked as cut), since
the end of a build log is usually where the error is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

from term2.app.tools.args import (
    ArgumentError,
    Arguments,
    optional_number,
    optional_str,
    required_str,
)
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.names import located, shown
from term2.app.tools.network_arg import NETWORK_SPEC, network_grant
from term2.app.tools.paths import canonical_root, resolve_shown
from term2.app.tools.sandboxed import SECRETS_WINDOW, did_not_run, ended, tell
from term2.domain.history import TerminalOutput, ToolKind, ToolOutput
from term2.domain.network import NetworkGrant
from term2.domain.truncation import ellipsize
from term2.domain.workspace import Access, is_within
from term2.ports.approval import CommandSubject
from term2.ports.llm import ToolSpec
from term2.ports.sandbox import (
    CommandRequest,
    CommandResult,
    SandboxFailed,
    SandboxUnavailable,
)
from term2.ports.tools import ToolContext
from term2.ports.updates import TerminalChunk

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
SANDBOX_OUTPUT_LIMIT = 256 * 1024
TITLE_LIMIT = 80


def terminal_id_for(call_id: str) -> str:
    return f"term_{call_id}"


@dataclass(frozen=True, slots=True)
class RunShell:
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    max_timeout_s: float = MAX_TIMEOUT_S
    name: str = "run_shell"
    kind: ToolKind = ToolKind.EXECUTE

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Run a shell command (bash -c) in a sandbox: only the workspace roots are writable and "
                "there is no way to run outside the sandbox. Returns the exit code and the combined "
                f"stdout/stderr (long output is cut in the middle). Default timeout "
                f"{self.default_timeout_s:g} s, at most {self.max_timeout_s:g} s. {SECRETS_WINDOW}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line to run.",
                    },
                    "cwd": {
                        "type": "string",
                        "description": "Folder to run in; defaults to the workspace root.",
                    },
                    "timeout": {"type": "number", "description": "Timeout in seconds."},
                    "network": NETWORK_SPEC,
                },
                "required": ["command"],
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        command = required_str(args, "command")
        if not command.strip():
            raise ArgumentError("argument 'command' must not be blank")
        cwd = resolve_shown(root, optional_str(args, "cwd") or ".")
        # The sandbox only ever starts inside the root it confines; asking the
        # user to approve a folder it would refuse anyway helps nobody.
        roots = (canonical_root(root), *extra_roots)
        if not any(is_within(cwd, each) for each in roots):
            where = (
                f"the workspace root {shown(root)}"
                if not extra_roots
                else "one of the workspace roots " + ", ".join(shown(each) for each in roots)
            )
            raise ArgumentError(f"cwd must be inside {where}; got {shown(cwd)}")
        if not os.path.isdir(cwd):
            raise ArgumentError(f"cwd {shown(cwd)} is not an existing folder")
        timeout = min(
            optional_number(args, "timeout") or self.default_timeout_s,
            self.max_timeout_s,
        )
        network = network_grant(args)
        # args.get("sandbox") is deliberately never read: "unsandboxed" is downgraded.
        title = f"Run `{ellipsize(command, TITLE_LIMIT)}`"
        return Invocation(
            title=title if network is None else f"{title} with network access to {network}",
            access=Access.EXECUTE,
            target=cwd,
            grant_folder=cwd,
            locations=located(cwd),
            run=partial(self._run, command, cwd, timeout, network),
            command=CommandSubject(command, shown(cwd)),  # what the user is asked about: the shown name
            content_on_start=partial(_empty_terminal, command, cwd),
            network=network,
        )

    async def _run(
        self, command: str, cwd: str, timeout: float, network: NetworkGrant | None, ctx: ToolContext, call_id: str
    ) -> Outcome:
        terminal_id = terminal_id_for(call_id)

        async def forward(data: bytes) -> None:
            await ctx.emit(TerminalChunk(call_id, terminal_id, data))

        workspace = ctx.access.workspace
        holder = workspace.anchor(cwd)  # the root the command starts in; every other root is bound beside it
        request = CommandRequest(
            command=command,
            root=holder,
            extra_roots=tuple(root for root in workspace.roots if root != holder),
            cwd=cwd,
            timeout_s=timeout,
            output_limit=SANDBOX_OUTPUT_LIMIT,
            network=network,
            guard_instructions=ctx.guard_instructions,
        )
        try:
            result = await ctx.sandbox.run(request, forward)
        except (SandboxUnavailable, SandboxFailed) as err:
            raise did_not_run(err, "command") from None
        await tell(result, ctx)
        return shell_outcome(command, cwd, terminal_id, result, timeout)


def _empty_terminal(command: str, cwd: str, call_id: str) -> tuple[ToolOutput, ...]:
    """Shown while the command runs, so the client can attach the streamed chunks."""
    return (TerminalOutput(terminal_id_for(call_id), command, shown(cwd)),)


def shell_outcome(command: str, cwd: str, terminal_id: str, result: CommandResult, timeout: float) -> Outcome:
    end = ended(
        result,
        timeout_s=timeout,
        output_limit=SANDBOX_OUTPUT_LIMIT,
    )
    # The terminal shows the user what the model reads, notices included.
    text = f"{end.status}\n{end.output}" if end.output else f"{end.status}\n(no output)"
    terminal = TerminalOutput(terminal_id, command, shown(cwd), end.terminal, result.exit_code, end.signal_name)
    return Outcome(text, (terminal,), failed=end.failed)
