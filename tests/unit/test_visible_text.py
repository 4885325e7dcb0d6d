"""What an approval question shows: every character a display obeys rather than shows is escaped."""

from __future__ import annotations

import pytest

from term2.domain.visible_text import visible


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\x9bb", "a\\x9bb"),
        ("rm -rf ~ \u202e#txt.", "rm -rf ~ \\u202e#txt."),
        ("safe\u2028rm -rf ~", "safe\\u2028rm -rf ~"),
        ("one\u2029two", "one\\u2029two"),
        ("\u2066x\u2069", "\\u2066x\\u2069"),
    ],
)
def test_what_a_display_would_obey_is_written_out(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_line_breaks_and_tabs_of_a_multi_line_command_stay() -> None:
    assert visible("make\n\tpytest -q") == "make\n\tpytest -q"
