"""Spawn -> first reply chunk of `term2 acp`, on the native OpenAI wire and on litellm, in one interleaved run.

Usage: uv run --frozen python benchmarks/bench_first_reply.py [--runs 10]

Each run spawns a fresh process with its own TERM2_HOME against one in-process
fake model (tests/fakes/llm_server.py, OpenAI chat completions, empty queue:
it echoes), sends `initialize`, then `session/new` as soon as initialize is
answered, then a prompt as soon as session/new is answered, as an editor or
acpx does. The two wires alternate run by run, so machine load falls on both.

Figures (medians, milliseconds of time.monotonic() in this process):
  spawn->init        Popen -> the initialize response line read
  init->new          initialize answered -> session/new answered
  new->first chunk   session/new answered -> the first agent_message_chunk read
  spawn->first chunk the whole path
  idle RSS           VmRSS of term2 just after session/new (MB), or --settle seconds later
  RSS after a turn   VmHWM of term2 once the turn is idle (MB)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.llm_server import FakeLLMServer, start_fake_llm  # noqa: E402

FIGURES = (
    "spawn->init",
    "init->new",
    "new->first chunk",
    "spawn->first chunk",
    "idle RSS (MB)",
    "RSS after a turn (MB)",
)


def _status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def one_run(server: FakeLLMServer, wire: str, settle: float = 0.0) -> tuple[float, ...]:
    home = Path(tempfile.mkdtemp(prefix="t2-home-"))
    workspace = tempfile.mkdtemp(prefix="t2-ws-")
    (home / "config" / "term2").mkdir(parents=True)
    (home / "config" / "term2" / "config.toml").write_text(f'[providers.openai]\nwire = "{wire}"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
    env.update(
        {
            "TERM2_HOME": str(home / "data"),
            "XDG_CONFIG_HOME": str(home / "config"),
            "TERM2_MODEL": "openai/fake-model",
            "OPENAI_API_KEY": "sk-bench",
            "OPENAI_BASE_URL": server.base_url + "/v1",
        }
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "term2", "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    def until(match: Any) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            message = json.loads(proc.stdout.readline())
            if match(message):
                return message  # type: ignore[no-any-return]

    def kind(message: dict[str, Any]) -> Any:
        return message.get("params", {}).get("update", {})

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 2, "info": {"name": "b"}}})
    until(lambda m: m.get("id") == 0)
    initialized = time.monotonic()
    send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": workspace}})
    session = until(lambda m: m.get("id") == 1)["result"]["sessionId"]
    created = time.monotonic()
    idle = _status_kb(proc.pid, "VmRSS")
    if settle:
        time.sleep(settle)  # the adapter's background preparation done: the idle process a user waits with
        idle = _status_kb(proc.pid, "VmRSS")
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "hello"}]}
    send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
    until(lambda m: kind(m).get("sessionUpdate") == "agent_message_chunk")
    replied = time.monotonic()
    until(lambda m: kind(m).get("state") == "idle")
    after = _status_kb(proc.pid, "VmHWM")
    proc.stdin.close()
    proc.wait(timeout=15)
    ms = 1000.0
    return (
        (initialized - started) * ms,
        (created - initialized) * ms,
        (replied - created) * ms,
        (replied - started) * ms,
        idle / 1024,
        after / 1024,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait after session/new before prompting (idle RSS then includes the background "
        "preparation; the first-chunk figures then measure a prepared process)",
    )
    args = parser.parse_args()
    wires = ("openai", "litellm")
    results: dict[str, list[tuple[float, ...]]] = {wire: [] for wire in wires}
    with start_fake_llm() as server:
        for wire in wires:  # one warm-up each (page cache, bytecode), not counted
            one_run(server, wire)
        for _ in range(args.runs):
            for wire in wires:
                results[wire].append(one_run(server, wire, args.settle))
    print(f"| figure (median of {args.runs}) | native OpenAI wire | litellm wire |")
    print("|---|---:|---:|")
    for index, name in enumerate(FIGURES):
        cells = [f"{statistics.median(run[index] for run in results[wire]):.0f}" for wire in wires]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
