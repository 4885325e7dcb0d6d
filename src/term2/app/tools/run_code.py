"""run_code: a short Python program that calls term2's tools from inside the sandbox.

The model batches many steps into one call and gets one result back. The
program runs under the same sandbox as run_shell (same root, limits, no
network, scrubbed environment, timeout, output cap); its only way out is the
bridge, and every nested call it makes is an ordinary tool call with its own
workspace check, approval and status, linked to this call.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from functools import partial

import anyio

from term2.app.tools.args import ArgumentError, Arguments, optional_number, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.bridge import Bridge
from term2.app.tools.names import located, shown
from term2.app.tools.network_arg import NETWORK_SPEC, network_grant
from term2.app.tools.paths import canonical_root
from term2.app.tools.run_code_program import launcher_command
from term2.app.tools.sandboxed import SECRETS_WINDOW, did_not_run, ended, tell
from term2.domain.history import TextOutput, ToolKind
from term2.domain.network import NetworkGrant
from term2.domain.truncation import ellipsize
from term2.domain.workspace import Access
from term2.ports.approval import CommandSubject
from term2.ports.llm import ToolSpec
from term2.ports.sandbox import CommandRequest, SandboxFailed, SandboxUnavailable
from term2.ports.tools import Toolbox, ToolContext
from term2.support.unix_stream import UnixStream

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
OUTPUT_LIMIT = 64 * 1024
TITLE_LIMIT = 60


@dataclass(frozen=True, slots=True)
class RunCode:
    nested: Toolbox  # the tools a program may call; run_code itself is not among them
    name: str = "run_code"
    kind: ToolKind = ToolKind.EXECUTE

    def spec(self) -> ToolSpec:
        names = ", ".join(spec.name for spec in self.nested.specs())
        return ToolSpec(
            name=self.name,
            description=(
                "Run a short Python 3 program in the sandbox that can call term2's tools, to batch many "
                "steps into one call. Inside the program, `tools.<name>(**arguments)` calls a tool and "
                "returns its text result, or raises `ToolError` when it fails or is denied. Available: "
                f"{names}. The program's printed output and a summary of its tool calls are returned. "
                f"{SECRETS_WINDOW}"
            ),
            parameters={
                "type": "object",
                "properties": {
                    "code": {"type": "string", "description": "The Python 3 program."},
                    "timeout": {"type": "number", "description": "Timeout in seconds."},
                    "network": NETWORK_SPEC,
                },
                "required": ["code"],
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        code = required_str(args, "code")
        if not code.strip():
            raise ArgumentError("argument 'code' must not be blank")
        timeout = min(optional_number(args, "timeout") or DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S)
        cwd = canonical_root(root)
        first_line = code.strip().splitlines()[0]
        network = network_grant(args)
        title = f"Run Python program `{ellipsize(first_line, TITLE_LIMIT)}`"
        return Invocation(
            title=title if network is None else f"{title} with network access to {network}",
            access=Access.EXECUTE,
            target=cwd,
            grant_folder=cwd,
            locations=located(cwd),
            run=partial(self._run, code, cwd, timeout, network),
            command=CommandSubject(f"python3 <program: {len(code.splitlines())} lines>", shown(cwd)),
            network=network,
        )

    async def _run(
        self, code: str, cwd: str, timeout: float, network: NetworkGrant | None, ctx: ToolContext, call_id: str
    ) -> Outcome:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        bridge = Bridge(code, self.nested, ctx, call_id)
        request = CommandRequest(
            command=launcher_command(),
            root=ctx.access.workspace.root,
            extra_roots=ctx.access.workspace.extra_roots,
            cwd=cwd,
            timeout_s=timeout,
            output_limit=OUTPUT_LIMIT,
            bridge_fd=theirs.fileno(),
            network=network,
            guard_instructions=ctx.guard_instructions,  # the program's own writes; its nested calls are judged apart
        )
        stream = UnixStream(ours)  # not anyio's: see term2.support.unix_stream
        failure: SandboxUnavailable | SandboxFailed | None = None
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, stream)
                try:
                    result = await ctx.sandbox.run(request)
                except (SandboxUnavailable, SandboxFailed) as exc:  # caught here: the task group would wrap it
                    failure = exc
                finally:
                    theirs.close()
                    tg.cancel_scope.cancel()
        finally:
            await stream.aclose()
        if failure is not None:
            raise did_not_run(failure, "program")
        await tell(result, ctx)
        end = ended(result, timeout_s=timeout, output_limit=OUTPUT_LIMIT)
        text = f"{end.status}\n{end.output}\n{bridge.log.summary()}".strip()
        return Outcome(text, (TextOutput(text, printed=True),), failed=end.failed)
