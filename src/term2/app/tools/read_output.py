"""read_output: page through the whole text of a tool result that was cut for the model.

A long result reaches the model as its head and tail with a marker naming an
output id (see `app/results.py`); the whole text was kept in the session's
output archive, outside the workspace. It is term2's own record of a call the
user already allowed, so reading it needs no approval; it is numbered and
capped exactly like `read_file`, so paging works the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from term2.app.tools.args import ArgumentError, Arguments, optional_int, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.read import BYTES_PER_TOKEN, READ_LIMIT_TOKENS, numbered
from term2.domain.history import ToolKind
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

_OUTPUT_ID = re.compile(r"^out_[A-Za-z0-9]{1,64}$")


@dataclass(frozen=True, slots=True)
class ReadOutput:
    limit_tokens: int = READ_LIMIT_TOKENS
    name: str = "read_output"
    kind: ToolKind = ToolKind.READ

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Read the whole output of an earlier tool call that was cut short for you (its marker "
                "names the output id). Lines are numbered like read_file; use offset/limit to page."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "output_id": {"type": "string", "description": "The id from the cut marker (out_…)."},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines."},
                },
                "required": ["output_id"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        output_id = required_str(args, "output_id")
        if not _OUTPUT_ID.match(output_id):
            raise ArgumentError(f"{output_id!r} is not an output id (they look like out_…)")
        offset = optional_int(args, "offset") or 1
        limit = optional_int(args, "limit")
        return Invocation(
            title=f"Read the full output {output_id}",
            access=Access.READ,
            target=root,  # no workspace file is read: the archive is term2's own, outside the root
            grant_folder=root,
            locations=(),
            run=partial(self._run, output_id, offset, limit),
        )

    async def _run(self, output_id: str, offset: int, limit: int | None, ctx: ToolContext, call_id: str) -> Outcome:
        text = None if ctx.outputs is None else await ctx.outputs.fetch(ctx.session_id, output_id)
        if text is None:
            raise ToolFailed(f"no output {output_id} was kept in this session")
        lines = iter(text.encode("utf-8").splitlines(keepends=True))
        return Outcome.text_only(numbered(output_id, lines, offset, limit, self.limit_tokens * BYTES_PER_TOKEN))
