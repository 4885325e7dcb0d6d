"""Show any file name Linux allows as plain, unambiguous text, and read it back.

Linux names are bytes: `caf\\xe9.txt` (Latin-1) is legal, and so is a name
with a line break. Python carries such bytes as lone surrogates
(surrogateescape), which no JSON encoder, session store or model accepts, so
every name a search tool shows goes through `shown`. A name that is valid
UTF-8 and holds no backslash or control character is shown as it is; any
other is escaped whole: each backslash doubled, each byte that is not part
of valid UTF-8 text, and each control character, written `\\xNN`. A shown
name holding a backslash is therefore always an escaped one, and `unshown`
turns it back into the exact bytes (as a surrogateescape str).
"""

from __future__ import annotations

import os
import re

_NEEDS_ESCAPE = re.compile(r"[\\\x00-\x1f\x7f\udc80-\udcff]")
_ESCAPED = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")


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
        else:
            out.append(char)
    return "".join(out)


def unshown(text: str) -> str:
    """The name `shown` made `text` from, as a surrogateescape str a path call accepts."""
    if "\\" not in text:
        return text
    data = text.encode("utf-8", "surrogateescape")

    def one(match: re.Match[bytes]) -> bytes:
        body = match.group(1)
        return b"\\" if body == b"\\" else bytes([int(body[1:], 16)])

    return os.fsdecode(re.sub(_ESCAPED.pattern.encode(), one, data))
