"""The name globs of a walk (`*.py`, `*.{ts,tsx}`, `[!a]*`, `include:odd`) match exactly the names they name."""

from __future__ import annotations

import pytest

from term2.domain.name_glob import name_glob_regex

CASES = [
    ("*.py", ["a.py", ".py", "a.b.py"], ["a.pyc", "a.pyx"]),
    ("*.{ts,tsx}", ["a.ts", "a.tsx"], ["a.t", "a.tsxx", "a.{ts,tsx}"]),
    ("?.md", ["a.md"], ["ab.md", ".md"]),
    ("[!a]*", ["b", "Ab"], ["a", "abc"]),
    ("[^a-c]x", ["dx"], ["bx"]),
    ("include:odd", ["include:odd"], ["include"]),
    ("a\\*b", ["a*b"], ["axb"]),
    ("caf\udce9.txt", ["caf\udce9.txt"], ["café.txt"]),
    ("x[", ["x["], ["x"]),
    ("{a,b", ["a", "b"], ["{a,b"]),
]


@pytest.mark.parametrize(("glob", "names", "others"), CASES)
def test_a_name_glob_matches_what_it_names_and_nothing_else(glob: str, names: list[str], others: list[str]) -> None:
    regex = name_glob_regex(glob)
    assert [name for name in names if regex.fullmatch(name)] == names
    assert [name for name in others if regex.fullmatch(name)] == []
