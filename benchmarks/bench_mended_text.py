"""What mending lone surrogates (`term2.domain.mended_text.loads`, ADR 0035) costs beside `json.loads`.

Usage: uv run --frozen python benchmarks/bench_mended_text.py

Every JSON line from a client, and every SSE event from a native provider, is decoded with `loads`:
`json.loads` plus one regex scan of the raw text for a surrogate's escape (`\\uD800`-`\\uDFFF`), and a
walk of the decoded value only when the scan finds one. Measured on `session/prompt` lines whose text
is (a) plain ASCII, (b) non-ASCII escaped as `\\u00e9`/`\\u4e2d` (what Python's json.dumps writes),
(c) raw UTF-8 (what serde_json and most editors write), and (d) text holding emoji, escaped as
surrogate pairs: the scan finds them, so the value is walked (and nothing changes). A provider's
stream is mended on the port's events instead (`StreamMender`): its cost per text delta is printed
beside `json.loads` of that delta's chunk. Figures: the best of 7 repeats, microseconds per call.
"""

from __future__ import annotations

import json
import timeit
from collections.abc import Callable

from term2.adapters.llm.mended_events import StreamMender
from term2.domain.mended_text import loads
from term2.ports.llm import TextDelta


def _best(call: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(call, number=number, repeat=7)) / number * 1e6


def _prompt_line(text: str, ascii_only: bool) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "session/prompt",
        "params": {"sessionId": "sess_x", "prompt": [{"type": "text", "text": text}]},
    }
    return json.dumps(message, ensure_ascii=ascii_only).encode("utf-8")


def main() -> None:
    cases: list[tuple[str, bytes]] = []
    for size in (300, 64 * 1024, 1024 * 1024):
        for name, unit, ascii_only in (
            ("ascii", "lorem ipsum dolor sit amet ", True),
            ("escaped", "lorem ipsum \u00e9\u4e2d ", True),
            ("utf-8", "lorem ipsum \u00e9\u4e2d ", False),
            ("emoji pairs", "lorem ipsum \U0001f600 ", True),
        ):
            text = (unit * (size // len(unit) + 1))[:size]
            cases.append(
                (
                    f"prompt, {name}, {size // 1024 or size} {'KiB' if size >= 1024 else 'chars'}",
                    _prompt_line(text, ascii_only),
                )
            )
    print(f"{'case':34} {'bytes':>9} {'json.loads':>11} {'loads':>9} {'extra':>7}")
    for name, line in cases:
        number = max(3, min(20000, 2_000_000 // len(line)))
        plain = _best(lambda line=line: json.loads(line), number)  # type: ignore[misc]
        mended = _best(lambda line=line: loads(line), number)  # type: ignore[misc]
        print(f"{name:34} {len(line):>9,} {plain:>9.1f}us {mended:>7.1f}us {(mended - plain) / plain:>+7.0%}")
    mender, delta = StreamMender(), TextDelta(" world")
    chunk = b'{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" world"}}]}'
    print(
        f"an SSE text delta: json.loads {_best(lambda: json.loads(chunk), 20000):.2f}us, "
        f"StreamMender.feed {_best(lambda: mender.feed(delta), 20000):.2f}us"
    )


if __name__ == "__main__":
    main()
