"""What a user waits for, term2 and codex-acp side by side in one run (issue 32, ADR 0048).

Usage (from the repo root; codex-acp installed with benchmarks/peers/install_peers.sh):

    uv run --frozen python benchmarks/peers/bench_warm_start.py [--rounds 8] [--preset term2,codex]
        [--peers-prefix /tmp/term2-peers] [--out FILE]

An optional extra, not part of the pytest suite. Every agent talks ACP v1 to the same
in-process fake model (tests/fakes/llm_server.py), reusing bench_peers.py's client,
presets and RSS sampler. Each round spawns every agent three times, the order rotated
by one each round so machine load falls on all alike:

  typed      `initialize`; `session/new` sent the moment `initialize` is answered;
             the prompt sent 1 s after `session/new` is answered, as a user types.
             Figures: spawn → `initialize` answered; `session/new` sent → answered;
             spawn → `session/new` answered (what a user waits for as a thread opens);
             `session/prompt` → first chunk of the model's text; peak RSS of the
             process tree over the run (through the turn).
  handshake  the same, through a TCP relay in front of the fake that holds every new
             connection's first bytes until 150 ms after it was accepted: a stand-in
             for a real network's TCP and TLS handshakes, which a connection opened
             ahead has already paid.
  b2b        back to back: each request sent the moment the previous one is answered;
             spawn → first chunk.

Medians (and p90) over the rounds, one table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers import Agent, Client, StepFailed, _chunk_text, _load, build_agents

from tests.fakes.llm_server import start_fake_llm
from tests.fakes.recording_relay import RecordingRelay

HANDSHAKE_S = 0.150
TYPING_S = 1.0
STEP_TIMEOUT = 60.0


def _first_chunk(client: Client, rid: int) -> float:
    """When the first chunk of the model's text ("echo: ...") arrived; the turn is then read to its end."""
    seen: list[tuple[float, str]] = []
    first: list[float] = []

    def watch(stamp: float, message: dict[str, Any]) -> None:
        text = _chunk_text(message)
        if text is not None:
            seen.append((stamp, text))
            if not first and "".join(t for _, t in seen).find("echo") >= 0:
                first.append(stamp)

    client.wait_response(rid, "session/prompt", STEP_TIMEOUT, on_message=watch)
    if not first:
        raise StepFailed("session/prompt", f"no model text in the reply; {client.stderr_tail()}")
    return first[0]


def one(agent: Agent, run_dir: Path, pause: float | None) -> dict[str, float]:
    """One process: initialize, session/new at once, the prompt after ``pause`` (None: at once)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    client = Client(agent, run_dir, verbose=False)
    out: dict[str, float] = {}
    try:
        init = {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "term2-bench-warm", "version": "1"},
        }
        rid, _ = client.request("initialize", init)
        stamp, _ = client.wait_response(rid, "initialize", STEP_TIMEOUT)
        out["init"] = (stamp - client.spawned_at) * 1000
        rid, sent = client.request("session/new", {"cwd": str(agent.workspace), "mcpServers": []})
        stamp, message = client.wait_response(rid, "session/new", STEP_TIMEOUT)
        out["new"] = (stamp - sent) * 1000
        out["open"] = (stamp - client.spawned_at) * 1000
        session = (message.get("result") or {}).get("sessionId")
        if pause:
            time.sleep(pause)
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "bench ping"}]}
        rid, sent = client.request("session/prompt", prompt)
        at = _first_chunk(client, rid)
        out["to_chunk"] = (at - sent) * 1000
        out["spawn_to_chunk"] = (at - client.spawned_at) * 1000
    finally:
        client.sampler.sample()
        out["rss_peak"] = client.sampler.peak_kb / 1024
        client.close_and_time_exit(5.0)
    return out


ROWS = [
    ("typed", "init", "spawn → `initialize` answered (ms)"),
    ("typed", "new", "`session/new` sent as `initialize` is answered → answered (ms)"),
    ("typed", "open", "spawn → `session/new` answered: the thread opening (ms)"),
    ("typed", "to_chunk", "first reply chunk, prompt sent 1 s after `session/new` (ms)"),
    ("handshake", "to_chunk", "the same through an endpoint taking 150 ms to open a connection (ms)"),
    ("b2b", "spawn_to_chunk", "spawn → first reply chunk, back to back (ms)"),
    ("typed", "rss_peak", "peak RSS of the process tree, through the turn (MB)"),
]


def _cell(values: list[float]) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):.0f} / {p90:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--preset", default="term2,codex")
    parser.add_argument("--peers-prefix", default=os.environ.get("PEERS_PREFIX", "/tmp/term2-peers"))
    parser.add_argument("--out")
    args = parser.parse_args()
    args.agent, args.env, args.authenticate = [], [], []
    load_before = _load()
    names = [n for n in args.preset.split(",") if n]
    results: dict[tuple[str, str], list[dict[str, float]]] = {
        (n, s): [] for n in names for s in ("typed", "handshake", "b2b")
    }
    failures: dict[str, list[str]] = {}
    with start_fake_llm() as llm, tempfile.TemporaryDirectory(prefix="bench-warm-") as scratch:
        relay = RecordingRelay(
            ("127.0.0.1", llm.port), hold_s=HANDSHAKE_S
        )  # a new connection: 150 ms to its first bytes
        fast = {a.name: a for a in build_agents(args, llm.base_url, Path(scratch) / "fast")}
        slow = {a.name: a for a in build_agents(args, f"http://127.0.0.1:{relay.port}", Path(scratch) / "slow")}
        for round_no in range(-1, args.rounds):  # round -1: a warm-up, not counted
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                for scenario, agent, pause in (
                    ("typed", fast[name], TYPING_S),
                    ("handshake", slow[name], TYPING_S),
                    ("b2b", fast[name], None),
                ):
                    try:
                        figures = one(agent, Path(scratch) / "runs" / f"{name}-{scenario}-{round_no}", pause)
                    except StepFailed as exc:
                        failures.setdefault(name, []).append(f"{scenario}: {exc}"[:300])
                        continue
                    if round_no >= 0:
                        results[(name, scenario)].append(figures)
            print(f"round {round_no + 1}/{args.rounds} done", file=sys.stderr)
        relay.close()
    lines = [
        f"Rounds: {args.rounds} (+1 warm-up), medians / p90; load average before {load_before}, after {_load()}; "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; term2 on Python "
        f"{sys.version.split()[0]} ({os.path.realpath(sys.executable)}, the interpreter running this script)",
        "",
        "| | " + " | ".join(names) + (" | ratio |" if len(names) == 2 else " |"),
        "|---|" + "---|" * (len(names) + (1 if len(names) == 2 else 0)),
    ]
    for scenario, key, label in ROWS:
        cells = [[r[key] for r in results[(n, scenario)] if key in r] for n in names]
        row = f"| {label} | " + " | ".join(_cell(c) for c in cells)
        if len(names) == 2:
            ratio = (
                f"{statistics.median(cells[0]) / statistics.median(cells[1]):.2f}"
                if all(cells) and statistics.median(cells[1])
                else "n/a"
            )
            row += f" | {ratio}"
        lines.append(row + " |")
    for name, items in failures.items():
        lines.append(f"\n{name} failures: " + "; ".join(sorted(set(items))[:5]))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
