"""The `*** Begin Patch` format OpenAI's GPT-5 and codex models are trained to write, parsed.

    *** Begin Patch
    *** Add File: <path>          then every line of the new file, each as "+text"
    *** Delete File: <path>
    *** Update File: <path>
    *** Move to: <path>           (optional: the updated file is renamed)
    @@ <a line above the change>  (or a bare "@@"; the first hunk may leave it out)
     context line                 (" " + text; an empty line is an empty context line)
    -removed line
    +added line
    *** End of File               (optional: the hunk ends the file)
    *** End Patch

A model that gets the format wrong must learn exactly what to change, so
every error names the patch line (1-based) and what was expected there.
Nothing here touches files: paths are returned as written.
"""

from __future__ import annotations

from dataclasses import dataclass

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
END_OF_FILE = "*** End of File"
HUNK = "@@"


class PatchError(ValueError):
    """The patch does not follow the grammar; the message says where and how to fix it."""


@dataclass(frozen=True, slots=True)
class Chunk:
    header: str | None  # the text after "@@ ": a line the change sits below
    old: tuple[str, ...]  # context and removed lines, in order
    new: tuple[str, ...]  # context and added lines, in order
    at_end: bool = False  # "*** End of File": the old lines end the file


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str


@dataclass(frozen=True, slots=True)
class UpdateFile:
    path: str
    move_to: str | None
    chunks: tuple[Chunk, ...]


FileOp = AddFile | DeleteFile | UpdateFile


def parse_patch(text: str) -> tuple[FileOp, ...]:
    """The file operations of `text`, in order, or PatchError naming the first problem."""
    lines = text.replace("\r\n", "\n").strip().split("\n")
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"line 1: a patch must start with {BEGIN!r} on a line of its own")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchError(f"line {len(lines)}: a patch must end with {END!r} on a line of its own")
    body = lines[1:-1]
    ops: list[FileOp] = []
    index = 0
    while index < len(body):
        op, index = _file_op(body, index)
        ops.append(op)
    if not ops:
        headers = f"{ADD.strip()!r}, {DELETE.strip()!r} or {UPDATE.strip()!r}"
        raise PatchError(f"line 2: the patch changes no file; add an {headers} section")
    return tuple(ops)


def _at(index: int) -> str:
    return f"line {index + 2}"  # body line `index` is patch line index + 2


def _path(line: str, prefix: str, index: int) -> str:
    path = line[len(prefix) :].strip()
    if not path:
        raise PatchError(f"{_at(index)}: {prefix.strip()!r} needs a path after it")
    return path


def _file_op(body: list[str], index: int) -> tuple[FileOp, int]:
    line = body[index]
    if line.startswith(ADD):
        path = _path(line, ADD, index)
        index += 1
        content: list[str] = []
        while index < len(body) and body[index].startswith("+"):
            content.append(body[index][1:] + "\n")
            index += 1
        if index < len(body) and not _is_header(body[index]):
            raise PatchError(
                f"{_at(index)}: every line of an added file must start with '+' "
                f"(found {_shown(body[index])} in {ADD.strip()} {path})"
            )
        return AddFile(path, "".join(content)), index
    if line.startswith(DELETE):
        return DeleteFile(_path(line, DELETE, index)), index + 1
    if line.startswith(UPDATE):
        return _update(body, index)
    raise PatchError(
        f"{_at(index)}: expected a file header ({ADD.strip()!r}, {DELETE.strip()!r} or {UPDATE.strip()!r} "
        f"followed by a path), found {_shown(line)}"
    )


def _is_header(line: str) -> bool:
    return line.startswith((ADD, DELETE, UPDATE))


def _shown(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:80] + "…")


def _update(body: list[str], index: int) -> tuple[UpdateFile, int]:
    path = _path(body[index], UPDATE, index)
    start = index
    index += 1
    move_to = None
    if index < len(body) and body[index].startswith(MOVE):
        move_to = _path(body[index], MOVE, index)
        index += 1
    chunks: list[Chunk] = []
    while index < len(body) and not _is_header(body[index]):
        chunk, index = _chunk(body, index, first=not chunks, path=path)
        chunks.append(chunk)
    if not chunks and move_to is None:
        raise PatchError(
            f"{_at(start)}: {UPDATE.strip()} {path} has no hunk; follow it with '@@' and the lines to change "
            "(' ' context, '-' removed, '+' added)"
        )
    return UpdateFile(path, move_to, tuple(chunks)), index


def _chunk(body: list[str], index: int, *, first: bool, path: str) -> tuple[Chunk, int]:
    line = body[index]
    header: str | None = None
    if line == HUNK or line.startswith(HUNK + " "):
        header = line[len(HUNK) :].strip() or None
        index += 1
    elif not first:
        raise PatchError(
            f"{_at(index)}: expected a hunk line (' ' context, '-' removed, '+' added), '@@' or a file header "
            f"in {UPDATE.strip()} {path}, found {_shown(line)}"
        )
    old: list[str] = []
    new: list[str] = []
    at_end = False
    begun = index
    blank_tail = 0  # empty lines at the hunk's end are spacing, not context the file must have
    while index < len(body):
        line = body[index]
        if line == END_OF_FILE:
            at_end = True
            index += 1
            break
        if line == HUNK or line.startswith(HUNK + " ") or _is_header(line):
            break
        blank_tail = blank_tail + 1 if line == "" else 0
        if line == "":
            old.append("")
            new.append("")
        elif line[0] == " ":
            old.append(line[1:])
            new.append(line[1:])
        elif line[0] == "-":
            old.append(line[1:])
        elif line[0] == "+":
            new.append(line[1:])
        else:
            raise PatchError(
                f"{_at(index)}: every hunk line must start with ' ' (context), '-' (removed) or '+' (added); "
                f"found {_shown(line)} in {UPDATE.strip()} {path}"
            )
        index += 1
    if blank_tail and not at_end:
        del old[len(old) - blank_tail :], new[len(new) - blank_tail :]
    if index == begun or (not old and not new):
        raise PatchError(
            f"{_at(begun - 1)}: a hunk in {UPDATE.strip()} {path} has no lines; give it context and changes"
        )
    if old == new:
        raise PatchError(f"{_at(begun - 1)}: a hunk in {UPDATE.strip()} {path} changes nothing (no '-' or '+' lines)")
    return Chunk(header, tuple(old), tuple(new), at_end), index
