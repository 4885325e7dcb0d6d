"""Benchmark: listing sessions from a 10,000-session SQLite store.

Measures ``SessionStore.list(limit=50)`` for the first page, a middle page
(reached through real cursors), and a cwd-filtered page, each over repeated
runs through the full async path (thread hop, lock, query, decode, cursor
signing). Also times replaying a 10,000-append history. Prints a markdown
snippet for docs/benchmarks.md.

Run: ``uv run python benchmarks/bench_session_list.py [--sessions N] [--runs N]``
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

from term2.adapters.store import SqliteSessionStore
from term2.domain.history import TextOutput, ToolCall, ToolKind, ToolStatus
from term2.domain.session import Session

PAGE = 50
TARGET_MS = 50.0
CWDS = 20
T0 = datetime(2025, 1, 1, tzinfo=UTC)


async def populate(store: SqliteSessionStore, count: int) -> None:
    for n in range(count):
        at = T0 + timedelta(seconds=n)
        await store.create(Session(f"s{n:05}", f"/work/repo{n % CWDS}", at, at))


async def timed(run: Callable[[], Awaitable[object]], runs: int) -> list[float]:
    await run()  # warm the page cache and the statement cache
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await run()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


async def cursor_at(store: SqliteSessionStore, pages: int) -> str:
    cursor: str | None = None
    for _ in range(pages):
        cursor = (await store.list(None, cursor, PAGE)).next_cursor
        assert cursor is not None
    assert cursor is not None
    return cursor


async def bench_history(store: SqliteSessionStore, appends: int) -> float:
    at = T0
    await store.create(Session("long", "/work/long", at, at))
    for n in range(appends):  # every tool call recorded twice: pending, then done
        status = ToolStatus.PENDING if n % 2 == 0 else ToolStatus.COMPLETED
        call = ToolCall(f"t{n // 2}", "run", ToolKind.EXECUTE, status, {"n": n})
        await store.append("long", call if n % 2 == 0 else _done(call, n))
    start = time.perf_counter()
    count = 0
    async for _ in store.history("long"):
        count += 1
    assert count == appends // 2
    return (time.perf_counter() - start) * 1000


def _done(call: ToolCall, n: int) -> ToolCall:
    return ToolCall(
        call.tool_call_id,
        call.title,
        call.kind,
        call.status,
        call.raw_input,
        (TextOutput(f"output {n} " * 20),),
    )


async def main(sessions: int, runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteSessionStore(Path(tmp) / "sessions.sqlite3")
        started = time.perf_counter()
        await populate(store, sessions)
        fill_s = time.perf_counter() - started
        middle = await cursor_at(store, sessions // PAGE // 2)

        rows = [
            ("first page", await timed(lambda: store.list(None, None, PAGE), runs)),
            ("middle page", await timed(lambda: store.list(None, middle, PAGE), runs)),
            (
                "first page, cwd filter",
                await timed(lambda: store.list("/work/repo7", None, PAGE), runs),
            ),
        ]
        replay_ms = await bench_history(store, 10_000)
        await store.aclose()

    print(f"### Session list ({sessions:,} sessions, SQLite {sqlite3.sqlite_version})")
    print()
    print(
        f"Python {platform.python_version()} on {platform.machine()}; "
        f"`list(limit={PAGE})` through the async API, {runs} runs after one warm-up; "
        f"target < {TARGET_MS:.0f} ms."
    )
    print()
    print("| case | median (ms) | p95 (ms) | within target |")
    print("|---|---:|---:|---|")
    for name, samples in rows:
        median, p95 = summary(samples)
        verdict = "yes" if p95 < TARGET_MS else "NO"
        print(f"| {name} | {median:.2f} | {p95:.2f} | {verdict} |")
    print()
    print(
        f"Filling {sessions:,} sessions one committed insert at a time: {fill_s:.1f} s. "
        f"Replaying a 10,000-append history (5,000 tool calls, compacted): "
        f"{replay_ms:.0f} ms."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.sessions, args.runs)
