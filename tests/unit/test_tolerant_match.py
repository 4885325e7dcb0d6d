"""The tolerance chain (domain/tolerant_match.py): each near-miss applied as meant, every ambiguity refused.

Each tolerance has a case that applies it (and says so) and a case where the
same slip leaves two places (refused, both named). The property test then
puts one block in a file twice and makes every slip the chain forgives: no
such edit may ever apply.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from term2.domain.bounded_match import Budget
from term2.domain.line_endings import Body
from term2.domain.text_edits import Applied, Edit, Refused, TooLarge, apply_edits
from term2.domain.tolerant_match import Ambiguous, Found, Missing, locate

STEPS = 4_000_000


def edited(text: str, old: str, new: str, *, replace_all: bool = False) -> tuple[str, str | None]:
    result = apply_edits(text, [Edit(old, new, replace_all)], Budget(STEPS), 10**7)
    assert isinstance(result, Applied), result
    return result.text, (result.tolerances[0][1] if result.tolerances else None)


def refused(text: str, old: str, new: str = "X") -> Ambiguous | Missing:
    result = apply_edits(text, [Edit(old, new)], Budget(STEPS), 10**7)
    assert isinstance(result, Refused), result
    return result.why


PY = "def f(x):\n    if x:\n        return 1\n    return 2\n"


# --- each tolerance applies, and says so -----------------------------------------------


def test_exact_match_says_nothing_was_forgiven() -> None:
    assert edited(PY, "return 2", "return 3") == (PY.replace("return 2", "return 3"), None)


def test_trailing_whitespace() -> None:
    text = "a = 1   \nb = 2\t\nc = 3\n"
    new, how = edited(text, "a = 1\nb = 2\n", "a = 1\nb = 20\n")
    assert new == "a = 1   \nb = 20\nc = 3\n"  # the untouched line keeps its own trailing spaces
    assert how == "ignoring trailing whitespace"


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        ("if x:\n    return 1\n", "if x:\n    y = 0\n    return 1\n", "re-indenting by +4 spaces"),  # flush left
        (
            "        if x:\n            return 1\n",
            "        if x:\n            y = 0\n            return 1\n",
            "re-indenting by -4 spaces",
        ),
    ],
)
def test_indentation_shifted_and_new_string_reindented_the_same_way(old: str, new: str, said: str) -> None:
    text, how = edited(PY, old, new)
    assert text == "def f(x):\n    if x:\n        y = 0\n        return 1\n    return 2\n"
    assert how == said


def test_tabs_against_spaces_writes_the_files_tabs() -> None:
    makefile = "all: x\n\tcc -o x x.c\n\tstrip x\n"
    text, how = edited(makefile, "all: x\n    cc -o x x.c\n", "all: x\n    cc -O2 -o x x.c\n")
    assert text == "all: x\n\tcc -O2 -o x x.c\n\tstrip x\n"
    assert how is not None and "tabs" in how


def test_spaces_for_a_tab_indented_go_file() -> None:
    go = "func f() {\n\tif ok {\n\t\treturn 1\n\t}\n}\n"
    text, how = edited(go, "    if ok {\n        return 1\n", "    if ok {\n        return 2\n")
    assert text == "func f() {\n\tif ok {\n\t\treturn 2\n\t}\n}\n"
    assert how is not None and "tabs" in how


def test_typographic_punctuation_is_matched_loosely_and_new_string_is_kept() -> None:
    text = "title = “Hello” — it’s\u00a0here\nnext = 1\n"
    new, how = edited(text, 'title = "Hello" - it\'s here\nnext = 1\n', 'title = "Bye" - it\'s here\nnext = 1\n')
    assert new == 'title = "Bye" - it\'s here\nnext = 1\n'  # the model's quotes, never "curled"
    assert how is not None and "punctuation" in how


def test_untouched_lines_keep_their_curly_quotes() -> None:
    text = "a = “x”\nb = 1\n"
    new, _ = edited(text, 'a = "x"\nb = 1\n', 'a = "x"\nb = 2\n')
    assert new == "a = “x”\nb = 2\n"


def test_read_file_prefixes_are_stripped_from_both_strings() -> None:
    old = "     3\t        return 1\n     4\t    return 2\n"
    text, how = edited(PY, old, old.replace("return 1", "return 10"))
    assert text == PY.replace("return 1", "return 10")
    assert how is not None and "line-number prefixes" in how


def test_prefixes_out_of_order_are_not_taken_for_read_files() -> None:
    assert isinstance(refused("a\nb\n", "     2\ta\n     9\tb\n"), Missing)


@pytest.mark.parametrize(
    ("text", "old", "expected"),
    [
        ("a\n\nb\nc\n", "a\nb\nc\n", "a\n\nB\nc\n"),  # old_string lacks a blank line the file has
        ("a\nb\nc\n", "a\n\nb\nc\n", "a\nB\nc\n"),  # old_string has one the file lacks
    ],
)
def test_a_blank_line_more_or_less(text: str, old: str, expected: str) -> None:
    new = old.replace("b", "B")
    result, how = edited(text, old, new)
    assert result == expected
    assert how == "allowing a blank line more or less"


def test_two_blank_lines_off_is_not_forgiven() -> None:
    assert isinstance(refused("a\n\n\nb\n", "a\nb\n"), Missing)


def test_literal_escapes_are_read_as_newlines_and_tabs() -> None:
    text, how = edited(PY, "    if x:\\n        return 1", "    if x:\\n        return 5")
    assert text == PY.replace("return 1", "return 5")
    assert how is not None and "literal" in how


def test_escapes_are_left_alone_when_old_string_has_real_newlines() -> None:
    assert isinstance(refused("a\nb\\nc\n", "a\nb\nc"), Missing)


def test_the_files_own_escapes_match_exactly_first() -> None:
    text = 'print("a\\nb")\n'
    assert edited(text, 'print("a\\nb")', 'print("c")') == ('print("c")\n', None)


# --- refusals --------------------------------------------------------------------------


def test_an_exact_match_in_two_places_is_refused_with_both_named() -> None:
    why = refused("x = 1\ny\nx = 1\n", "x = 1")
    assert isinstance(why, Ambiguous) and why.places == ((1, 1), (3, 3)) and why.tolerance is None


def test_overlapping_occurrences_are_two_places() -> None:
    why = refused("a\na\na\n", "a\na")
    assert isinstance(why, Ambiguous) and why.places == ((1, 2), (2, 3))


@pytest.mark.parametrize(
    ("text", "old", "tolerance"),
    [
        ("a  \nb\nz\na \nb\n", "a\nb", "trailing"),
        ("  f()\n  g()\nz\n    f()\n    g()\n", "f()\ng()\n", "re-indenting"),
        ("\tf()\n\tg()\nz\n\tf()\n\tg()\n", "    f()\n    g()\n", "tabs"),
        ("s = “a”\nt\nz\ns = “a”\nt\n", 's = "a"\nt\n', "punctuation"),
        ("a\n\nb\nz\na\n\nb\n", "a\nb\n", "blank"),
        ("a\nb\nz\na\nb\n", "a\\nb", "literal"),
        ("a\nb\nz\na\nb\n", "     1\ta\n     2\tb\n", "prefixes"),
    ],
)
def test_each_tolerance_refuses_two_places_and_names_both(text: str, old: str, tolerance: str) -> None:
    why = refused(text, old)
    assert isinstance(why, Ambiguous), why
    assert len(why.places) == 2 and why.places[0][0] == 1 and why.places[1][0] >= 4
    assert why.tolerance is not None and tolerance in why.tolerance


def test_nothing_plausible_is_missing() -> None:
    assert isinstance(refused(PY, "while True:\n    pass\n"), Missing)


def test_indentation_re_flowed_from_two_columns_a_level_to_four() -> None:
    text, how = edited(PY, "if x:\n  return 1\nreturn 2\n", "if x:\n  return 1\n  log()\nreturn 2\n")
    assert text == "def f(x):\n    if x:\n        return 1\n        log()\n    return 2\n"
    assert how is not None and "re-flowing" in how


def test_inconsistent_indentation_is_no_shift() -> None:
    assert isinstance(refused("a\n  b\n    c\n", "a\n b\n    c\n"), Missing)
    assert isinstance(refused("f(x)\n  g\n", "f(x)\n g\n    h\n"), Missing)


def test_many_places_are_counted_as_more() -> None:
    why = refused("x\n" * 50, "x")
    assert isinstance(why, Ambiguous) and why.more and len(why.places) == 20


def test_a_search_out_of_steps_refuses() -> None:
    text = "".join(f"  line {i}\n" for i in range(3000))
    found = locate(text, "line 7\nline 8\n", "x", budget=Budget(100))
    assert isinstance(found, Missing) and found.why is not None


# --- several edits, all or none ----------------------------------------------------------


def test_edits_apply_in_order_to_the_text_the_earlier_ones_left() -> None:
    result = apply_edits(PY, [Edit("return 1", "return 10"), Edit("return 10", "return 11")], Budget(STEPS), 10**7)
    assert isinstance(result, Applied) and result.text == PY.replace("return 1", "return 11")


def test_one_edit_that_cannot_apply_stops_them_all() -> None:
    result = apply_edits(PY, [Edit("return 1", "return 10"), Edit("nowhere", "x")], Budget(STEPS), 10**7)
    assert isinstance(result, Refused) and result.index == 1


def test_a_result_over_the_limit_is_refused_before_it_is_built() -> None:
    result = apply_edits("a " * 1000, [Edit("a", "b" * 1000, replace_all=True)], Budget(STEPS), 100_000)
    assert isinstance(result, TooLarge) and result.size > 100_000


# --- never a guess: the pattern twice -----------------------------------------------------

WORDS = st.text(alphabet="abcdefgh_()=:", min_size=1, max_size=12)
SLIPS = ("none", "trailing", "indent", "dedent", "tabs", "punct", "prefix", "blank", "escape")


def _slip(block: list[str], slip: str, first_line: int) -> str:
    if slip == "trailing":
        return "\n".join(line + "  " for line in block) + "\n"
    if slip == "indent":
        return "\n".join("    " + line for line in block) + "\n"
    if slip == "dedent":
        return "\n".join(line.removeprefix("    ") for line in block) + "\n"
    if slip == "tabs":
        return "\n".join(line.replace("    ", "\t") for line in block) + "\n"
    if slip == "punct":
        return "\n".join(line.replace('"', "“") for line in block) + "\n"
    if slip == "prefix":
        return "".join(f"{first_line + i:>6}\t{line}\n" for i, line in enumerate(block))
    if slip == "blank":
        return "\n".join([block[0], "", *block[1:]]) + "\n"
    if slip == "escape":
        return "\\n".join(block)
    return "\n".join(block) + "\n"


@settings(max_examples=300, deadline=None)
@given(
    block=st.lists(st.tuples(st.integers(0, 2), WORDS, st.booleans()), min_size=2, max_size=5),
    fillers=st.lists(WORDS, min_size=3, max_size=3),
    slip=st.sampled_from(SLIPS),
    crlf=st.booleans(),
)
def test_no_tolerance_applies_when_the_pattern_occurs_twice(
    block: list[tuple[int, str, bool]], fillers: list[str], slip: str, crlf: bool
) -> None:
    lines = ["    " * depth + word + (' "q"' if quoted else "") for depth, word, quoted in block]
    around = [f"#filler {i} {word}" for i, word in enumerate(fillers)]
    file_lines = [around[0], *lines, around[1], *lines, around[2]]
    text = "\n".join(file_lines) + "\n"
    if crlf:
        text = text.replace("\n", "\r\n")
    old = _slip(lines, slip, 2)
    new = old.replace("a", "Z") + "added\n"
    body = Body(text)
    found = locate(body.lf, old, new, budget=Budget(STEPS))
    assert not isinstance(found, Found), (slip, old, found)
