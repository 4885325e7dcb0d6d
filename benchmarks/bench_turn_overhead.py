"""term2's own share of the first-chunk latency, with the provider taken out of the picture.

Usage: python benchmarks/bench_turn_overhead.py [--runs 200]

An in-process turn over the real server stack (session methods, prompt use
case, agent loop, v2 renderer, JSON-RPC connection, stdio transport writing to
a pipe) with a scripted provider that stamps the moment it yields its first
text delta. A reader thread stamps the moment the `agent_message_chunk` line
arrives on the pipe. The difference is what term2 adds after the provider
hands over a chunk; litellm's own HTTP/SSE work is measured end to end by
bench_streaming.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
from dependency_injector import providers

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from term2.adapters.acp.connection import JsonRpcConnection
from term2.adapters.acp.server import AcpServer, AgentInfo
from term2.adapters.acp.session_methods import SessionMethods
from term2.adapters.acp.stdio import StdioTransport
from term2.adapters.acp.updates import AcpUpdateSink
from term2.adapters.acp.wire_v2 import V2Renderer
from term2.adapters.store.memory_store import InMemorySessionStore
from term2.app.config import Settings
from term2.app.entrypoints.container import build_container
from term2.domain.turn import FinishReason
from term2.ports.llm import CompletionRequest, Finished, LLMEvent, TextDelta


class StampingProvider:
    def __init__(self) -> None:
        self.stamps: list[float] = []

    async def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        self.stamps.append(time.perf_counter())
        yield TextDelta("hello")
        yield Finished(FinishReason.STOP)

    async def aclose(self) -> None:
        return None


async def main(runs: int) -> list[float]:
    llm = StampingProvider()
    container = build_container(Settings(model="openai/bench"), {})
    container.store.override(providers.Singleton(InMemorySessionStore))
    container.llm.override(providers.Object(llm))
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    arrivals: list[float] = []

    def read() -> None:
        with os.fdopen(out_r, "rb") as pipe:
            for line in pipe:
                if b'"agent_message_chunk"' in line:
                    arrivals.append(time.perf_counter())

    threading.Thread(target=read, daemon=True).start()
    transport = StdioTransport(os.fdopen(in_r, "rb"), out_w)

    async def methods(connection: JsonRpcConnection, version: int) -> SessionMethods:
        sink = AcpUpdateSink(connection, V2Renderer())
        c = container
        return SessionMethods(c.sessions(), c.prompts(), connection, version, sink)

    server = AcpServer(AgentInfo("term2", "term2", "bench"), True, methods)
    server.initialized(2)
    connection = JsonRpcConnection(transport, server)
    server.attach(connection)
    with tempfile.TemporaryDirectory() as workspace:
        async with anyio.create_task_group() as tg:
            tg.start_soon(connection.serve)
            new, prompt = server.request_handler("session/new"), server.request_handler("session/prompt")
            assert new is not None and prompt is not None
            session_id = (await new({"cwd": workspace}))["sessionId"]
            for n in range(runs):
                reply = await prompt({"sessionId": session_id, "prompt": [{"type": "text", "text": f"go {n}"}]})
                await reply.then()
                while len(arrivals) <= n:
                    await anyio.sleep(0.0005)
            os.close(in_w)
            tg.cancel_scope.cancel()
    return [(a - s) * 1000 for s, a in zip(llm.stamps, arrivals, strict=True)]


if __name__ == "__main__":
    from term2.adapters.logging_setup import configure_logging

    configure_logging("warning")  # stdout carries the table
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    figures = anyio.run(main, parser.parse_args().runs)
    ordered = sorted(figures)
    print("| figure | median | p90 |")
    print("|---|---:|---:|")
    print(
        f"| provider yields first text → `agent_message_chunk` on the pipe (ms) | "
        f"{statistics.median(figures):.2f} | {ordered[int(0.9 * (len(ordered) - 1))]:.2f} |"
    )
    print(json.dumps({"runs": len(figures)}), file=sys.stderr)
