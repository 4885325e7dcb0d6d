"""Spawn -> initialize response, exit after stdin closes, and peak RSS of `term2 acp`.

Usage: python benchmarks/bench_startup.py [--runs 20] [--command "term2 acp"]

Peak RSS is read from /proc/<pid>/status (VmHWM) just before stdin closes,
i.e. an idle connection that has answered initialize and listed sessions.
Prints a markdown table (stdout is fine here: this is not the protocol).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 2, "info": {"name": "bench", "version": "1"}},
}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {}}


def _hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def one_run(command: list[str], env: dict[str, str]) -> tuple[float, float, float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin and proc.stdout
    proc.stdin.write((json.dumps(INIT) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    init_ms = (time.perf_counter() - start) * 1000
    proc.stdin.write((json.dumps(LIST) + "\n").encode())
    proc.stdin.flush()
    proc.stdout.readline()
    ready_ms = (time.perf_counter() - start) * 1000
    rss_mb = _hwm_kb(proc.pid) / 1024
    closed = time.perf_counter()
    proc.stdin.close()
    proc.wait(30)
    exit_ms = (time.perf_counter() - closed) * 1000
    return init_ms, ready_ms, exit_ms, rss_mb


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--command", default=f"{sys.executable} -m term2 acp")
    args = parser.parse_args()
    command = shlex.split(args.command)
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, TERM2_HOME=home)
        one_run(command, env)  # warm the page cache and .pyc files
        runs = [one_run(command, env) for _ in range(args.runs)]
    cols = list(zip(*runs, strict=True))
    names = [
        "spawn → initialize response (ms)",
        "spawn → first session/list answered (ms)",
        "exit after stdin closes (ms)",
        "peak RSS, idle (MB)",
    ]
    print(f"| {args.runs} runs | median | p90 | max |")
    print("|---|---:|---:|---:|")
    for name, values in zip(names, cols, strict=True):
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        print(f"| {name} | {statistics.median(values):.1f} | {p90:.1f} | {max(values):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
