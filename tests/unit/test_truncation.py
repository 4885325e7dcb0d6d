"""Every cut is marked, happens only past the limit, and keeps exactly what it says."""

from __future__ import annotations

import pytest

from term2.domain.truncation import ellipsize, keep_ends, keep_head


@pytest.mark.parametrize("text", ["", "abc", "abcde"])
def test_text_that_fits_is_returned_as_is(text: str) -> None:
    assert keep_head(text, 5, "[cut]") == text
    assert keep_ends(text, 5, "[cut]") == text
    assert ellipsize(text, 5) == text


def test_keep_head_keeps_the_limit_and_can_say_how_much_went() -> None:
    assert keep_head("abcdef", 5, " [line cut]") == "abcde [line cut]"
    assert keep_head("abcdefgh", 5, "\n[{cut} more]") == "abcde\n[3 more]"


def test_keep_ends_keeps_a_third_of_the_head_and_two_thirds_of_the_tail() -> None:
    text = "H" * 10 + "m" * 100 + "T" * 20
    assert keep_ends(text, 30, "<{cut}>") == "H" * 10 + "<100>" + "T" * 20


def test_keep_ends_with_no_room_keeps_only_the_marker() -> None:
    assert keep_ends("abc", 0, "<{cut}>") == "<3>"


def test_ellipsize_stays_within_the_limit() -> None:
    assert ellipsize("abcdef", 5) == "abcd…"
    assert len(ellipsize("x" * 500, 80)) == 80
