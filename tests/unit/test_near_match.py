"""An edit whose old_string is not found answers with the closest lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.app.tools.edit import edit_file
from term2.app.tools.failure import ToolFailed
from term2.domain.near_match import closest_lines

SOURCE = "\n".join(
    [
        "import os",
        "",
        "def greet(name):",
        "    message = f'hello {name}'",
        "    print(message)",
        "    return message",
        "",
        "def part(x):",
        "    return x * 2",
    ]
)


def test_a_misindented_snippet_finds_its_lines() -> None:
    near = closest_lines(SOURCE, "def greet(name):\n  message = f'hello {name}'\n  print(message)")
    assert near is not None
    assert near.first_line == 3
    assert near.lines == ("def greet(name):", "    message = f'hello {name}'", "    print(message)")


def test_one_wrong_word_still_finds_the_line() -> None:
    near = closest_lines(SOURCE, "    return x * 3")
    assert near is not None and near.first_line == 9


def test_nothing_alike_gives_nothing() -> None:
    assert closest_lines(SOURCE, "class Unrelated(Base): pass  # zzz qqq") is None
    assert closest_lines("", "x") is None
    assert closest_lines(SOURCE, "   ") is None


def test_a_large_file_is_searched_by_the_rarest_word() -> None:
    text = "\n".join(f"line {i} = compute({i})" for i in range(200_000))
    near = closest_lines(text, "line 123456 = compute(123456) + 1")
    assert near is not None and near.first_line == 123457


def test_edit_file_shows_the_closest_lines_with_numbers(tmp_path: Path) -> None:
    path = tmp_path / "a.py"
    path.write_text(SOURCE)
    with pytest.raises(ToolFailed) as failed:
        edit_file(str(path), str(tmp_path), "    return x * 3", "    return x * 4", False)
    message = str(failed.value)
    assert "not found" in message and "line 9" in message and "     9\t    return x * 2" in message
    assert path.read_text() == SOURCE, "nothing was written"
