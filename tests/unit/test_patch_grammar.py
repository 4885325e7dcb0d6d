"""The `*** Begin Patch` grammar (domain/patch_grammar.py) and hunks placed in a file (text_edits.apply_chunks).

Every malformed patch gets a message that names the patch line and what was
expected there, so a model can fix the patch in one go.
"""

from __future__ import annotations

import pytest

from term2.domain.bounded_match import Budget
from term2.domain.patch_grammar import AddFile, Chunk, DeleteFile, PatchError, UpdateFile, parse_patch
from term2.domain.text_edits import Applied, Refused, apply_chunks
from term2.domain.tolerant_match import Ambiguous, Missing


def patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"]) + "\n"


def test_every_operation_parses() -> None:
    ops = parse_patch(
        patch(
            "*** Add File: new.txt",
            "+hello",
            "+",
            "*** Delete File: old.txt",
            "*** Update File: src/app.py",
            "*** Move to: src/main.py",
            "@@ def greet():",
            " a",
            "-b",
            "+c",
            "",
            "@@",
            "-x",
            "+y",
            "*** End of File",
        )
    )
    assert ops == (
        AddFile("new.txt", "hello\n\n"),
        DeleteFile("old.txt"),
        UpdateFile(
            "src/app.py",
            "src/main.py",
            (Chunk("def greet():", ("a", "b"), ("a", "c")), Chunk(None, ("x",), ("y",), at_end=True)),
        ),
    )


def test_a_first_hunk_without_its_at_line_and_crlf_patches() -> None:
    ops = parse_patch(patch("*** Update File: a.txt", " keep", "-old", "+new").replace("\n", "\r\n"))
    assert ops == (UpdateFile("a.txt", None, (Chunk(None, ("keep", "old"), ("keep", "new")),)),)


def test_a_pure_rename() -> None:
    assert parse_patch(patch("*** Update File: a", "*** Move to: b")) == (UpdateFile("a", "b", ()),)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*** Update File: a\n-x\n+y\n*** End Patch\n", "line 1: a patch must start with '*** Begin Patch'"),
        ("*** Begin Patch\n*** Update File: a\n-x\n+y\n", "must end with '*** End Patch'"),
        (patch(), "line 2: the patch changes no file"),
        (patch("*** Updat File: a", "-x"), "line 2: expected a file header"),
        (patch("*** Add File: a", "hello"), "line 3: every line of an added file must start with '+'"),
        (patch("*** Update File: a"), "line 2: *** Update File: a has no hunk"),
        (patch("*** Update File: a", "@@", "-x", "+y", "x"), "line 6: every hunk line must start with"),
        (patch("*** Update File: a", "@@", " same"), "changes nothing"),
        (patch("*** Update File: a", "@@", "-x", "@@"), "has no lines"),
        (patch("*** Add File: "), "needs a path"),
        (patch("*** Update File: a", "*** Move to:  ", "@@", "-x"), "needs a path"),
    ],
)
def test_malformed_patches_say_where_and_what_to_fix(text: str, expected: str) -> None:
    with pytest.raises(PatchError) as caught:
        parse_patch(text)
    assert expected in str(caught.value)


# --- hunks placed ----------------------------------------------------------------------

DEF = "    def f(self):"
CODE = "class A:\n    def f(self):\n        return 1\n\nclass B:\n    def f(self):\n        return 1\n"


def place(text: str, *chunks: Chunk) -> Applied | Refused:
    result = apply_chunks(text, chunks, Budget(1_000_000), 10**7)
    assert isinstance(result, Applied | Refused)
    return result


def test_an_at_line_tells_two_places_apart() -> None:
    result = place(CODE, Chunk("class B:", (DEF, "        return 1"), (DEF, "        return 2")))
    assert isinstance(result, Applied)
    assert result.text == CODE[: CODE.rindex("1")] + "2\n"


def test_without_it_two_places_are_refused() -> None:
    result = place(CODE, Chunk(None, (DEF, "        return 1"), (DEF, "        return 2")))
    assert isinstance(result, Refused) and isinstance(result.why, Ambiguous)
    assert result.why.places == ((2, 3), (6, 7))


def test_hunks_are_placed_in_order_each_below_the_last() -> None:
    first = Chunk(None, ("class A:",), ("class A0:",))
    second = Chunk(None, ("        return 1",), ("        return 9",))  # twice below: refused
    result = place(CODE, first, second)
    assert isinstance(result, Refused) and result.index == 1 and isinstance(result.why, Ambiguous)


def test_an_at_line_that_is_not_there() -> None:
    result = place(CODE, Chunk("class C:", ("x",), ("y",)))
    assert isinstance(result, Refused) and result.header == "class C:" and isinstance(result.why, Missing)


def test_end_of_file_and_pure_additions() -> None:
    text = "a\nb\na\n"
    result = place(text, Chunk(None, ("a",), ("A",), at_end=True))
    assert isinstance(result, Applied) and result.text == "a\nb\nA\n"
    added = place("a\nb", Chunk(None, (), ("c",)))
    assert isinstance(added, Applied) and added.text == "a\nb\nc"  # appended; no final newline added
    after = place(CODE, Chunk("class B:", (), ("    x = 1",)))
    assert isinstance(after, Applied) and "class B:\n    x = 1\n    def f" in after.text


def test_hunk_context_is_tolerant_and_says_so() -> None:
    text = "def f():\r\n\tif x:\r\n\t\treturn 1\r\n"
    result = place(text, Chunk(None, ("    if x:", "        return 1"), ("    if x:", "        return 2")))
    assert isinstance(result, Applied)
    assert result.text == "def f():\r\n\tif x:\r\n\t\treturn 2\r\n"
    assert result.tolerances and "tabs" in result.tolerances[0][1]


def test_deleting_the_last_lines_of_a_file_without_a_final_newline() -> None:
    result = place("a\nb\nc", Chunk(None, ("b", "c"), ()))
    assert isinstance(result, Applied) and result.text == "a"
