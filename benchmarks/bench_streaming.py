"""Streaming figures of a real `term2 acp` against the local fake LLM (litellm loaded).

Usage: python benchmarks/bench_streaming.py [--runs 15]

- throughput: a reply streamed as 2,000 chunks; chunks forwarded per second,
  measured between the first and the last `agent_message_chunk` the client reads;
- first-chunk overhead: the fake server holds its first byte for a fixed delay;
  overhead = client receives the first chunk - (request arrival + delay). It
  includes litellm's SSE parsing, term2, and the pipe to the client;
- cancel -> settled: `session/cancel` after the first chunk of a slow stream,
  until the idle `cancelled` update arrives.
Prints a markdown table (stdout is fine here: this is not the protocol).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import llm_env
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess

FIRST_BYTE_DELAY = 0.2


def _chunk(message: dict, sid: str) -> bool:
    update = message.get("params", {}).get("update", {})
    return message.get("method") == "session/update" and update.get("sessionUpdate") == "agent_message_chunk"


def _idle(message: dict) -> bool:
    update = message.get("params", {}).get("update", {})
    return update.get("sessionUpdate") == "state_update" and update.get("state") == "idle"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, start_fake_llm() as server:
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        client = AcpProcess(root, env=llm_env(server))
        client.initialize(2)
        sid = client.new_session(workspace)
        server.push({"text": "warm up"})
        client.prompt_v2(sid, "warm up", timeout=120)

        words = " ".join(f"w{i}" for i in range(2000))
        server.push({"text": words, "chunks": 2000})
        client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        first = last = 0.0
        count = 0
        while True:
            message = client.next(60)
            if _chunk(message, sid):
                last = time.monotonic()
                first = first or last
                count += 1
            elif _idle(message):
                break
        throughput = (count - 1) / (last - first) if last > first else float("nan")

        overheads: list[float] = []
        for _ in range(args.runs):
            server.push({"text": "hello there", "delay_first_byte": FIRST_BYTE_DELAY})
            before = len(server.requests)
            client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
            seen = client.collect_until(lambda m: _chunk(m, sid), 60)
            received = time.monotonic()
            del seen
            started = server.requests[before].started_at
            overheads.append((received - (started + FIRST_BYTE_DELAY)) * 1000)
            client.collect_until(_idle, 60)

        cancels: list[float] = []
        for _ in range(max(3, args.runs // 2)):
            server.push({"text": " ".join(["slow"] * 400), "chunk_delay": 0.05})
            client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
            client.collect_until(lambda m: _chunk(m, sid), 60)
            sent = time.monotonic()
            client.notify("session/cancel", {"sessionId": sid})
            client.collect_until(_idle, 60)
            cancels.append((time.monotonic() - sent) * 1000)
        client.close()

    print("| figure | median | p90 |")
    print("|---|---:|---:|")
    print(f"| chunks forwarded per second (2,000-chunk reply) | {throughput:.0f} | |")
    for name, values in (
        ("first-chunk overhead after provider's first byte (ms)", overheads),
        ("session/cancel → idle `cancelled` (ms)", cancels),
    ):
        ordered = sorted(values)
        print(f"| {name} | {statistics.median(values):.1f} | {ordered[int(0.9 * (len(ordered) - 1))]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
