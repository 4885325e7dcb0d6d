"""read_file: show a text file (or a line range of it) to the model.

Output is numbered like `cat -n` so the model can ask for a precise range
next time; it is capped in bytes because one huge file must not blow the
context window, and the cap is announced in the text rather than silently
applied so the model knows to continue with `offset`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.args import Arguments, optional_int, required_str
from term2.app.tools.base import Invocation, Outcome, ToolFailed
from term2.app.tools.files import SNIFF_BYTES, human_size, looks_binary, open_checked, require_file
from term2.app.tools.paths import resolve
from term2.domain.history import Location, ToolKind
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

READ_LIMIT = 256 * 1024


@dataclass(frozen=True, slots=True)
class ReadFile:
    limit_bytes: int = READ_LIMIT
    name: str = "read_file"
    kind: ToolKind = ToolKind.READ

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Read a UTF-8 text file. Relative paths are relative to the workspace root. "
                "Each line is prefixed with its 1-based number and a tab (the prefix is not part of "
                f"the file). Output is capped at {human_size(self.limit_bytes)}; use offset/limit "
                "to read further. Binary files are refused."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to read."},
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "First line (1-based).",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Maximum number of lines.",
                    },
                },
                "required": ["path"],
                "additionalProperties": False,
            },
        )

    def prepare(self, args: Arguments, root: str) -> Invocation:
        path = resolve(root, required_str(args, "path"))
        offset = optional_int(args, "offset")
        limit = optional_int(args, "limit")
        title = f"Read {path}"
        if offset or limit:
            first = offset or 1
            title += (
                f" (lines {first}-{first + limit - 1})"
                if limit
                else f" (from line {first})"
            )
        return Invocation(
            title=title,
            access=Access.READ,
            target=path,
            grant_folder=os.path.dirname(path),
            locations=(Location(path, offset or 1),),
            run=partial(self._run, path, offset or 1, limit),
        )

    async def _run(
        self, path: str, offset: int, limit: int | None, ctx: ToolContext, call_id: str
    ) -> Outcome:
        text = await anyio.to_thread.run_sync(
            partial(read_lines, path, offset, limit, self.limit_bytes),
            abandon_on_cancel=True,
        )
        return Outcome.text_only(text)


def read_lines(path: str, offset: int, limit: int | None, limit_bytes: int) -> str:
    """Numbered lines offset..offset+limit-1, stopping early at the byte cap."""
    require_file(path)
    out: list[str] = []
    used = 0
    line_no = 0
    with open_checked(path) as handle:
        if looks_binary(handle.read(SNIFF_BYTES)):
            size = os.path.getsize(path)
            raise ToolFailed(
                f"{path} looks like a binary file ({human_size(size)}); it is not shown."
            )
        handle.seek(0)
        for raw in handle:
            line_no += 1
            if line_no < offset:
                continue
            if limit is not None and line_no >= offset + limit:
                break
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            numbered = f"{line_no:>6}\t{line}\n"
            size = len(numbered.encode("utf-8"))
            if used + size > limit_bytes:
                if not out:  # one enormous line: show its head rather than nothing
                    out.append(
                        numbered[: limit_bytes // 4].rstrip("\n")
                        + f"\n[line {line_no} was cut]\n"
                    )
                    line_no += 1
                out.append(
                    f"[truncated at {human_size(limit_bytes)}; continue with offset={line_no}]\n"
                )
                return "".join(out)
            out.append(numbered)
            used += size
    if line_no == 0:
        return "(empty file)\n"
    if not out:
        raise ToolFailed(f"offset {offset} is past the end of {path} ({line_no} lines)")
    return "".join(out)
