"""read_file: show a text file (or a line range of it) to the model.

Output is numbered like `cat -n` so the model can ask for a precise range
next time; it is capped in bytes because one huge file must not blow the
context window, and the cap is announced in the text rather than silently
applied so the model knows to continue with `offset`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from term2.app.tools.anchored import capped_lines, open_regular, read_upto
from term2.app.tools.args import Arguments, optional_int, required_str
from term2.app.tools.base import Invocation, Outcome
from term2.app.tools.failure import ToolFailed
from term2.app.tools.files import SNIFF_BYTES, human_size, looks_binary
from term2.app.tools.names import located, shown
from term2.app.tools.paths import resolve_shown
from term2.app.tools.through_client import client_read
from term2.domain.content import decoded_size
from term2.domain.history import TextOutput, ToolKind
from term2.domain.images import MAX_IMAGE_BYTES, Image, InvalidImage, checked_image, sniff
from term2.domain.roots import anchor
from term2.domain.workspace import Access
from term2.ports.llm import ToolSpec
from term2.ports.tools import ToolContext

# The cap is what the model pays for, so it is counted in tokens: ~4 bytes of source text each
# (a cheap estimate that needs no tokenizer). 9,000 tokens is ~900 lines of code, and stays under
# the bound every tool result gets in the transcript (`app/results.py`), so a read is never cut.
READ_LIMIT_TOKENS = 9_000
BYTES_PER_TOKEN = 4
MIN_LINE_BYTES = 8  # a numbered empty line: six digits, a tab, a line break


@dataclass(frozen=True, slots=True)
class ReadFile:
    limit_tokens: int = READ_LIMIT_TOKENS
    name: str = "read_file"
    kind: ToolKind = ToolKind.READ

    @property
    def limit_bytes(self) -> int:
        return self.limit_tokens * BYTES_PER_TOKEN

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=(
                "Read a UTF-8 text file. Relative paths are relative to the workspace root. "
                "Each line is prefixed with its 1-based number and a tab (the prefix is not part of "
                f"the file). Output is capped at about {self.limit_tokens:,} tokens; use offset/limit "
                "to read further, and read only the parts you need. Binary files are refused."
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

    def prepare(self, args: Arguments, root: str, extra_roots: tuple[str, ...] = ()) -> Invocation:
        path = resolve_shown(root, required_str(args, "path"))
        root = anchor(path, root, extra_roots)  # judged and opened from the root that holds it
        offset = optional_int(args, "offset")
        limit = optional_int(args, "limit")
        title = f"Read {shown(path)}"
        if offset or limit:
            first = offset or 1
            title += f" (lines {first}-{first + limit - 1})" if limit else f" (from line {first})"
        return Invocation(
            title=title,
            access=Access.READ,
            target=path,
            grant_folder=os.path.dirname(path),
            locations=located(path, offset or 1),
            run=partial(self._run, path, root, offset or 1, limit),
        )

    async def _run(
        self, path: str, root: str, offset: int, limit: int | None, ctx: ToolContext, call_id: str
    ) -> Outcome:
        # The editor's buffer where it serves reads (the user's unsaved text), asked only for the lines the
        # cap can show: each numbered line takes at least 8 bytes, so one more than that always hits the cap.
        asked = self.limit_bytes // MIN_LINE_BYTES + 1
        image = await anyio.to_thread.run_sync(partial(read_image, path, root), abandon_on_cancel=True)
        if image is not None:  # from the disk, through the same gate: an editor serves text only
            return image_outcome(path, image, ctx.images)
        served = await client_read(ctx, path, root, line=offset, limit=min(limit or asked, asked))
        if served is not None:
            # Nothing from a later line: past the end, or an empty file (as the disk would say)? One line tells.
            empty = not served and offset > 1 and await client_read(ctx, path, root, line=1, limit=1) == ""
            return Outcome.text_only(numbered_text(path, served, offset, limit, self.limit_bytes, empty=empty))
        text = await anyio.to_thread.run_sync(
            partial(read_lines, path, root, offset, limit, self.limit_bytes),
            abandon_on_cancel=True,
        )
        return Outcome.text_only(text)


def read_image(path: str, root: str) -> Image | None:
    """The file as an image (PNG, JPEG, GIF or WebP by its bytes, checked and bounded as a pasted one),
    or None when it is not one (or cannot be opened: the text read that follows says why, or the editor
    serves a buffer not saved yet); ToolFailed for an image term2 will not send (too large, damaged)."""
    try:
        fd = open_regular(path, root)
    except OSError:
        return None
    try:
        head = read_upto(fd, SNIFF_BYTES)
        if sniff(head) is None:
            return None
        raw = head + read_upto(fd, MAX_IMAGE_BYTES + 1 - len(head))
    finally:
        os.close(fd)
    try:
        return checked_image(base64.b64encode(raw).decode("ascii"), None, shown(path))
    except InvalidImage as exc:
        raise ToolFailed(str(exc)) from None


def image_outcome(path: str, image: Image, takes_images: bool) -> Outcome:
    """A note for the model and the client; the image itself goes to a model that takes images."""
    size = human_size(decoded_size(image.data))
    if not takes_images:
        return Outcome.text_only(
            f"{shown(path)} is an image ({image.mime_type}, {size}); the model in use does not take images, "
            "so it is not shown."
        )
    note = f"{shown(path)} is an image ({image.mime_type}, {size}); it is attached to this result."
    return Outcome(note, (TextOutput(note),), images=(image,))


def read_lines(path: str, root: str, offset: int, limit: int | None, limit_bytes: int) -> str:
    """Numbered lines offset..offset+limit-1, stopping early at the byte cap.

    The file is read in chunks and each line kept only up to the cap, so a
    huge file (or one enormous line) costs a bounded amount of memory.
    """
    fd = open_regular(path, root)
    try:
        head = read_upto(fd, SNIFF_BYTES)
        if looks_binary(head):
            raise ToolFailed(
                f"{shown(path)} looks like a binary file ({human_size(os.fstat(fd).st_size)}); it is not shown."
            )
        return numbered(path, capped_lines(fd, head, limit_bytes + 1), offset, limit, limit_bytes)
    finally:
        os.close(fd)


def numbered_text(
    path: str, text: str, offset: int, limit: int | None, limit_bytes: int, *, empty: bool = False
) -> str:
    """The client's text of lines offset.., numbered and capped exactly as a read of the disk is.

    Lines are split at "\n" only, as on the disk (an editor's buffer may have turned CRLF into LF;
    the numbers are the same either way).
    """
    if "\x00" in text[:SNIFF_BYTES]:
        size = human_size(len(text.encode("utf-8", "surrogatepass")))
        raise ToolFailed(f"{shown(path)} looks like a binary file ({size}); it is not shown.")
    if empty:
        return "(empty file)\n"
    if not text and offset > 1:
        raise ToolFailed(f"offset {offset} is past the end of {shown(path)}")
    return numbered(path, _split(text), offset, limit, limit_bytes, first=offset)


def _split(text: str) -> Iterator[bytes]:
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end].encode("utf-8", "surrogatepass")
        start = end


def numbered(
    path: str, lines: Iterator[bytes], offset: int, limit: int | None, limit_bytes: int, *, first: int = 1
) -> str:
    """`lines` numbered from `first` (the disk gives the whole file; a client, its lines from `offset`)."""
    out: list[str] = []
    used = 0
    line_no = first - 1
    for raw in lines:
        line_no += 1
        if line_no < offset:
            continue
        if limit is not None and line_no >= offset + limit:
            break
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        entry = f"{line_no:>6}\t{line}\n"
        size = len(entry.encode("utf-8"))
        if used + size > limit_bytes:
            if not out:  # one enormous line: show its head rather than nothing
                out.append(entry[: limit_bytes // 4].rstrip("\n") + f"\n[line {line_no} was cut]\n")
                line_no += 1
            tokens = limit_bytes // BYTES_PER_TOKEN
            out.append(
                f"[truncated at about {tokens:,} tokens ({human_size(limit_bytes)}); continue with "
                f"offset={line_no}, or read a smaller range with limit]\n"
            )
            return "".join(out)
        out.append(entry)
        used += size
    if line_no == 0:
        return "(empty file)\n"
    if not out:
        raise ToolFailed(f"offset {offset} is past the end of {shown(path)} ({line_no} lines)")
    return "".join(out)
