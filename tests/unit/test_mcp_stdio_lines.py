"""The stdio transport's line cutter (adapters/mcp/stdio.py `Lines`): exact lines, a bound, a cut for logs.

Linear time is the design (each chunk searched once, a line's pieces joined once); what is checked here
is the behaviour that rests on it, without timing anything: lines across chunk boundaries come out whole,
a line past the bound raises before more than the bound is held, and the log's variant cuts and resyncs.
"""

from __future__ import annotations

import pytest

from term2.adapters.mcp.stdio import Lines, LineTooLong


def cut(lines: Lines, *chunks: bytes) -> list[bytes]:
    return [line for chunk in chunks for line in lines.feed(chunk)]


def test_lines_split_across_chunks_come_out_whole() -> None:
    data = b'{"a": 1}\n{"b": 22}\n\n{"c": 333}\n'
    for size in (1, 2, 3, 7, len(data)):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        assert cut(Lines(100), *chunks) == [b'{"a": 1}', b'{"b": 22}', b"", b'{"c": 333}']


def test_an_unfinished_line_is_held_until_its_newline() -> None:
    lines = Lines(100)
    assert cut(lines, b"abc", b"def") == []
    assert cut(lines, b"g\nh") == [b"abcdefg"]


def test_a_line_past_the_bound_raises_in_one_chunk_or_many() -> None:
    with pytest.raises(LineTooLong):
        cut(Lines(10), b"x" * 11)
    with pytest.raises(LineTooLong):
        cut(Lines(10), *(b"x" for _ in range(11)))
    with pytest.raises(LineTooLong):
        cut(Lines(10), b"xxxxxx", b"xxxxx\n")
    assert cut(Lines(10), b"x" * 10 + b"\n") == [b"x" * 10]


def test_the_logs_variant_cuts_a_long_line_and_goes_on_with_the_next() -> None:
    lines = Lines(4, cut=True)
    assert cut(lines, b"abcdefgh", b"ijk\nok\n") == [b"abcd [... cut]", b"ok"]
    assert cut(lines, b"123456\nz\n") == [b"1234 [... cut]", b"z"]
