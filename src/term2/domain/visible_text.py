"""Text a person is asked about, with nothing in it that acts on how it is shown.

A terminal obeys C0 and C1 controls (ESC starts cursor moves, erases and
colour that could draw one command over another; OSC 52 sets the
clipboard), and any display that follows Unicode's bidi rules lets U+202E
and its kin reorder what is around them, so `rm -rf ~` can be made to read
as something else. Each such character is written out as an escape
(`\\x1b`, `\\u202e`); line breaks and tabs stay, since a multi-line command
is shown as one. U+2028 and U+2029 are line breaks to many displays and none to a shell or JSON
parser, so they would show a break that is not there: they are escaped too.
"""

from __future__ import annotations

_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x0A, 0x09)}
_ESCAPES.update(
    {c: f"\\u{c:04x}" for c in (0x061C, 0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))}
)


def visible(text: str) -> str:
    """`text` with every character a display would obey, rather than show, written as an escape."""
    return text.translate(_ESCAPES)
