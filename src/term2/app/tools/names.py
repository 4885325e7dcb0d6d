"""Show any file name Linux allows as plain, unambiguous text, and read it back.

Linux names are bytes: `caf\\xe9.txt` (Latin-1) is legal, and so is a name
with a line break. Python carries such bytes as lone surrogates
(surrogateescape), which no JSON encoder, session store or model accepts, so
every name a search tool shows goes through `shown`. A name that is valid
UTF-8 and holds no backslash or control character is shown as it is; any
other is escaped whole: each backslash doubled, each byte that is not part
of valid UTF-8 text, and each control character, written `\\xNN`; a C1
control or a character that breaks a line or reorders text (U+2028, U+202E…)
is written as its UTF-8 bytes (`\\xe2\\x80\\xae`), so it reads back the same. A shown
name holding a backslash is therefore always an escaped one, and `unshown`
turns it back into the exact bytes (as a surrogateescape str).

Every tool that takes a path reads it with `unshown` (paths.resolve_shown), so
a name the model was shown reaches the same file. The rule has one reading:
a backslash in a path is always an escape's start where it starts one (`\\\\`
or `\\xNN`), so a real file named `a\\x41` is reached as `a\\\\x41`, the form
`shown` gives it, and `a\\x41` names `aA`. A lone surrogate in an argument (a
run_code program passing a name from `os.listdir`) stands for its byte, as in
Python's surrogateescape.

`said` is the net behind the tools: free text that names a path it did not
show (an OS error's message, a program's raw arguments) has each lone
surrogate written as its escape before it is told, recorded or stored, so no
name can fail a turn.

`for_editor` serves the other audience: what an editor acts on (a tool
call's location, a diff's path) must name the very file, so it is the exact
name, never the shown one (the file `x\\y.txt` is shown `x\\\\y.txt`, which
names another). JSON carries a backslash, a control or a bidi character
exactly; a name that is not UTF-8 has no exact JSON form, so the editor is
given no path for it at all (ADR 0034).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the history's types load with the turn part, not with the first session (ADR 0052)
    from term2.domain.history import Location

# C1 controls, and the characters that break a line or reorder what is shown around them (bidi controls):
# a name must not draw a line of its own, or read backwards, in a question an editor or a terminal shows.
_LAYOUT = "\x80-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_NEEDS_ESCAPE = re.compile(f"[\\\\\x00-\x1f\x7f\udc80-\udcff{_LAYOUT}]")
_LAYOUT_CHAR = re.compile(f"[{_LAYOUT}]")
_CONTROL = re.compile(f"[\x00-\x1f\x7f{_LAYOUT}]")  # lone surrogates: `said`, for every tool call
_ESCAPED = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")
_LONE = re.compile("[\ud800-\udfff]")


def shown(name: str | bytes) -> str:
    """`name` (bytes, or a surrogateescape str) as text that round-trips through `unshown`."""
    text = os.fsdecode(name) if isinstance(name, bytes) else name
    if not _NEEDS_ESCAPE.search(text):
        return text
    out: list[str] = []
    for char in text:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif _LAYOUT_CHAR.match(char):
            out.append("".join(f"\\x{byte:02x}" for byte in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)


def one_line(text: str) -> str:
    """`text` with every control, line break and bidi character written as `\\xNN`, backslashes kept as they
    are: for a line term2 adds under a command's output (a notice), whose names were already `shown`, so
    that no other text in it can start a line of its own or an escape sequence in the user's terminal."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda match: "".join(f"\\x{byte:02x}" for byte in match.group().encode()), text)


def unshown(text: str) -> str:
    """The name `shown` made `text` from, as a surrogateescape str a path call accepts."""
    if "\\" not in text:
        return text
    data = text.encode("utf-8", "surrogateescape")

    def one(match: re.Match[bytes]) -> bytes:
        body = match.group(1)
        return b"\\" if body == b"\\" else bytes([int(body[1:], 16)])

    return os.fsdecode(re.sub(_ESCAPED.pattern.encode(), one, data))


def said(text: str) -> str:
    """`text` with every lone surrogate written out: `\\xNN` for a byte surrogateescape carried, else `\\uXXXX`.

    For free text that may hold a name no tool showed; a name a tool formats goes through `shown` instead,
    which also escapes its backslashes. Text without lone surrogates is returned as it is.
    """
    if not _LONE.search(text):
        return text

    def one(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"

    return _LONE.sub(one, text)


def for_editor(name: str) -> str | None:
    """`name` exactly, for a path an editor acts on; None when it has no exact text form (it is not UTF-8).

    A shown name would be wrong here: the editor does not read escapes back, so `x\\\\y.txt` would open
    (or revert) a file a repository could plant under that name instead of `x\\y.txt`.
    """
    return None if _LONE.search(name) else name


def located(path: str, line: int | None = None) -> tuple[Location, ...]:
    """The location an editor is given for the canonical `path`: exact, or none when the name is not UTF-8."""
    from term2.domain.history import Location

    exact = for_editor(path)
    return () if exact is None else (Location(exact, line),)
