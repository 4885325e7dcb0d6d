"""Line endings, BOM and final newline survive an edit the model wrote with "\\n" (domain/line_endings.py)."""

from __future__ import annotations

import pytest

from term2.domain.bounded_match import Budget
from term2.domain.line_endings import BOM, styled_like
from term2.domain.text_edits import Applied, Edit, apply_edits


def edit(text: str, old: str, new: str, replace_all: bool = False) -> str:
    result = apply_edits(text, [Edit(old, new, replace_all)], Budget(1_000_000), 10**7)
    assert isinstance(result, Applied), result
    return result.text


def test_a_crlf_file_stays_crlf_with_an_lf_old_string() -> None:
    text = "x = 1\r\ny = 2\r\nz = 3\r\n"
    assert edit(text, "x = 1\ny = 2\n", "x = 1\nw = 0\ny = 2\n") == "x = 1\r\nw = 0\r\ny = 2\r\nz = 3\r\n"


def test_a_crlf_old_string_matches_a_crlf_file() -> None:
    assert edit("a\r\nb\r\n", "a\r\nb", "A\r\nB") == "A\r\nB\r\n"


def test_an_lf_file_stays_lf_with_a_crlf_new_string() -> None:
    assert edit("a\nb\n", "a\nb\n", "a\r\nc\r\n") == "a\nc\n"


def test_replace_all_in_a_crlf_file() -> None:
    assert edit("a\r\nb\r\na\r\nb\r\n", "a\nb", "c\nd", replace_all=True) == "c\r\nd\r\nc\r\nd\r\n"


def test_mixed_endings_keep_each_lines_own() -> None:
    text = "one\r\ntwo\nthree\r\nfour\n"
    assert edit(text, "two\nthree\n", "TWO\nTHREE\n") == "one\r\nTWO\nTHREE\r\nfour\n"
    assert edit(text, "one\ntwo", "ONE\nTWO") == "ONE\r\nTWO\nthree\r\nfour\n"


def test_mixed_endings_with_replace_all() -> None:
    assert edit("a\r\nb\na\nb\r\n", "a\nb", "c\nd", replace_all=True) == "c\r\nd\nc\nd\r\n"


def test_mixed_endings_through_a_tolerant_match() -> None:
    text = "if x:\r\n    y = 1\n    z = 2\r\n"
    assert edit(text, "if x:\n  y = 1\n  z = 2\n", "if x:\n  y = 10\n  z = 2\n") == "if x:\r\n    y = 10\n    z = 2\r\n"


def test_a_bom_is_kept_and_not_part_of_the_match() -> None:
    text = BOM + "first\nsecond\n"
    assert edit(text, "first\n", "1st\n") == BOM + "1st\nsecond\n"


@pytest.mark.parametrize(
    ("text", "old", "new", "expected"),
    [
        ("a\nb", "b", "c\n", "a\nc"),  # no final newline: none is added
        ("a\nb\n", "b\n", "c", "a\nc\n"),  # a final newline: it is kept
        ("a\r\nb", "b", "c\n", "a\r\nc"),
        ("a\r\nb\r\n", "\nb\r\n", "", "a\r\n"),
        ("a\n", "a\n", "", ""),  # an emptied file stays empty
    ],
)
def test_the_final_newline_state_is_kept(text: str, old: str, new: str, expected: str) -> None:
    assert edit(text, old, new) == expected


def test_a_line_stage_matches_a_last_line_without_its_newline() -> None:
    assert edit("a\n  b", "b\n", "c\n") == "a\n  c"


@pytest.mark.parametrize(
    ("old", "content", "expected"),
    [
        ("a\r\nb\r\n", "x\ny\n", "x\r\ny\r\n"),  # a CRLF file stays CRLF
        ("a\r\nb\r\n", "x\r\ny\n", "x\r\ny\n"),  # content with a CRLF says which endings it wants
        ("a\nb\r\n", "x\ny\n", "x\ny\n"),  # a mixed file: content as written
        ("a\nb\n", "x\r\ny\r\n", "x\r\ny\r\n"),
        (BOM + "a\n", "x\n", BOM + "x\n"),
        (None, "x\n", "x\n"),
    ],
)
def test_write_file_over_an_existing_file(old: str | None, content: str, expected: str) -> None:
    assert styled_like(old, content) == expected
