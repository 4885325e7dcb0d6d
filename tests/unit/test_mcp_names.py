"""MCP tool names: valid for every provider, unique, and the same for the same servers every time."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from term2.app.mcp.names import MAX_NAME, tool_names

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_plain_names_read_as_server_and_tool() -> None:
    assert tool_names([("github", "create_issue"), ("time", "get-time")]) == [
        "mcp__github__create_issue",
        "mcp__time__get-time",
    ]


def test_other_characters_become_underscores() -> None:
    assert tool_names([("my server.io", "ö/tool")]) == ["mcp__my_server_io____tool"]


def test_collisions_get_a_stable_hashed_suffix() -> None:
    first, second = tool_names([("a b", "t"), ("a.b", "t")])
    assert first == "mcp__a_b__t"
    assert second != first and second.startswith("mcp__a_b__t_") and VALID.match(second)
    assert tool_names([("a b", "t"), ("a.b", "t")]) == [first, second]  # deterministic


def test_a_server_listed_twice_still_gets_unique_names() -> None:
    names = tool_names([("s", "t"), ("s", "t"), ("s", "t")])
    assert len(set(names)) == 3


def test_long_names_are_cut_with_a_hash_and_stay_distinct() -> None:
    server = "s" * 40
    names = tool_names([(server, "t" * 40 + "1"), (server, "t" * 40 + "2")])
    assert all(len(n) <= MAX_NAME and VALID.match(n) for n in names)
    assert names[0] != names[1]


def test_taken_names_are_avoided() -> None:
    assert tool_names([("x", "y")], taken={"mcp__x__y"})[0] != "mcp__x__y"


@given(st.lists(st.tuples(st.text(max_size=80), st.text(max_size=80)), max_size=20))
def test_every_name_is_valid_and_unique(pairs: list[tuple[str, str]]) -> None:
    names = tool_names(pairs)
    assert len(names) == len(pairs) == len(set(names))
    assert all(VALID.match(name) for name in names)
