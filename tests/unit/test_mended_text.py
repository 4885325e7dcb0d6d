"""JSON text from outside made into Unicode term2 can keep (`term2.domain.mended_text`).

A lone surrogate a client, a provider or an MCP server escaped becomes U+FFFD; a valid pair stays
the character it spells; and a text with no surrogate escape is never walked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from term2.domain import mended_text
from term2.domain.mended_text import MendedText, loads, may_hold_lone_surrogates, mend, mend_text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (r'"a\ud800b"', "a\ufffdb"),  # a lone high surrogate
        (r'"\udc00"', "\ufffd"),  # a lone low surrogate
        (r'"\uDBFF\uDBFF\uDFFF"', "\ufffd\U0010ffff"),  # upper-case hex; a high one before a pair
        (r'"\ude00\ud83d"', "\ufffd\ufffd"),  # a pair in the wrong order is two lone ones
        (r'"\ud83d\ude00"', "\U0001f600"),  # a valid pair is kept: 😀
        (r'"\ud83d\ude00 \ud83d"', "\U0001f600 \ufffd"),
    ],
)
def test_lone_surrogates_become_u_fffd_and_pairs_are_kept(raw: str, expected: str) -> None:
    assert loads(raw) == expected
    assert loads(raw.encode()) == expected
    loads(raw).encode("utf-8")  # what the store, the wire and the log take


def test_every_string_of_a_value_is_mended_keys_included_in_order() -> None:
    raw = r'{"k\ud800": ["x\udc00", {"deep": [[r"\ud800"]]}, 1, null, "ok"], "id": "\ud83d\ude00", "z": true}'
    value = loads(raw.replace("[r", "["))
    assert list(value) == ["k\ufffd", "id", "z"]
    assert value["k\ufffd"] == ["x\ufffd", {"deep": [["\ufffd"]]}, 1, None, "ok"]
    assert value["id"] == "\U0001f600" and type(value["id"]) is str
    json.dumps(value, ensure_ascii=False).encode("utf-8")


def test_halves_side_by_side_in_a_text_put_together_are_joined() -> None:
    """Two pieces decoded apart (a tool call's argument fragments) may each end or start with a half."""
    assert mend_text("a\ud83d" + "\ude00b") == "a\U0001f600b"
    assert mend_text("\ud83d\ud83d\ude00\ude00") == "\ufffd\U0001f600\ufffd"


def test_mended_strings_are_marked_and_untouched_ones_are_the_same_objects() -> None:
    value = loads(r'{"text": "a\ud800", "cwd": "/w", "pair": "\ud83d\ude00"}')
    assert isinstance(value["text"], MendedText)
    assert not isinstance(value["cwd"], MendedText) and not isinstance(value["pair"], MendedText)
    plain = "nothing to mend é 😀"
    assert mend_text(plain) is plain
    assert isinstance(mend_text("\udfff"), MendedText)


def test_a_value_nested_as_deep_as_the_decoder_allows_is_mended_without_recursion() -> None:
    depth = 900
    value = loads("[" * depth + r'"\ud800"' + "]" * depth)
    for _ in range(depth):
        value = value[0]
    assert value == "\ufffd"


@pytest.mark.parametrize(
    ("raw", "may"),
    [
        (r'"\ud800"', True),
        (r'"\uDFFF"', True),
        (r'"\uDc00"', True),
        (r'"\ud7ff \ue000 \u00e9 \u4e2d"', False),  # just outside the range, and ordinary escapes
        ('"😀 é plain"', False),  # UTF-8 text needs no escape at all
        (r'"\\ud800"', True),  # an escaped backslash: a false alarm, which only costs a walk
    ],
)
def test_the_escape_check(raw: str, may: bool) -> None:
    assert may_hold_lone_surrogates(raw) is may
    assert may_hold_lone_surrogates(raw.encode()) is may


def test_a_text_without_a_surrogate_escape_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[Any] = []
    monkeypatch.setattr(mended_text, "mend", lambda value: walked.append(value) or value)
    raw = json.dumps({"prompt": "é 中 ẞ" * 1000, "items": [{"a": "b"}] * 100})  # escaped, but no \ud8-\udf
    assert "\\u" in raw and loads(raw) == json.loads(raw)
    assert walked == []
    loads(r'["\ud800"]')
    assert len(walked) == 1
    # A pair is escaped with the same digits: its text is walked (and found whole), never changed.
    assert loads(json.dumps(["😀"])) == ["😀"] and len(walked) == 2


def test_mend_leaves_other_values_alone() -> None:
    assert mend(None) is None and mend(3) == 3 and mend(True) is True
    items: list[Any] = ["a", 1]
    assert mend(items) is items and items == ["a", 1]
