"""Side-by-side ACP benchmarks: term2 and peer agents against the same local fake model.

Usage (from the repo root, peers installed with benchmarks/peers/install_peers.sh):

    uv run python benchmarks/peers/bench_peers.py [--runs 10] [--out FILE]
        [--preset term2,term2-litellm,codex,claude,gemini] [--peers-prefix /tmp/term2-peers]
        [--agent 'NAME=COMMAND ARGS'] [--env 'NAME:KEY=VALUE'] [--authenticate 'NAME:METHOD_ID']
        [--exit-cap 5] [--step-timeout 30] [--prompt-timeout 60] [--give-up-after 2] [--verbose]
        [--dump-requests FILE] [--keep]

This is an optional extra, not part of the pytest suite. Every agent is spoken to
in ACP v1 (`protocolVersion: 1`, `clientCapabilities.fs` read/write false,
`terminal: false`, `mcpServers: []`) and every agent talks to the SAME in-process
fake model (tests/fakes/llm_server.py: OpenAI `/v1/chat/completions`, OpenAI
Responses `/v1/responses`, Anthropic `/v1/messages` and Gemini
`/v1beta/models/{m}:streamGenerateContent` / `:generateContent` / `:countTokens`,
streaming; it refuses with the provider's real 400 what the provider would refuse;
with an empty queue it answers "echo: <last user text>" with no artificial delay).

`term2` is served by the native OpenAI adapter (httpx, no litellm import);
`term2-litellm` is the same process with `[providers.openai] wire = "litellm"` in
its own $XDG_CONFIG_HOME/term2/config.toml (the pre-issue-13 path).

Agents run interleaved: one warm-up run per agent (not counted), then run i spawns
every agent once, the order rotated by one each round, so machine load falls on
all of them alike. Each agent gets its own scratch HOME / config dir (shared by its
runs) and its own empty workspace as `cwd`.

Figures, per run (all clocks are time.monotonic() of this process; the fake model
runs in-process, so its request arrival stamps share that clock):
  init       spawn (just before Popen) -> `initialize` response line read.
  new        `session/new` sent -> its response read (after `authenticate`, if one is
             configured for the agent; that call is timed separately as `auth`).
  rss idle   peak of the summed RSS of the agent and all its descendants, sampled
             every 10 ms (/proc/<pid>/statm; the tree is re-discovered from
             /proc/*/stat every 50 ms), from spawn until `session/new` answered.
  prompt->request  `session/prompt` sent -> arrival at the fake model of the model
             request that produced the first chunk (the last model request, on the
             fake's model routes, that arrived before that chunk).
  first chunk (agent overhead)  that request's arrival -> first `session/update`
             with `agent_message_chunk` read by this client. It is the agent's own
             overhead (SSE parsing, its loop, serialisation, the pipe) plus the fake
             model's first byte, which is sent as soon as the request is parsed (no
             delay is scripted; < 1 ms on an idle machine).
  prompt->first chunk  the sum of the two above, end to end.
  spawn->first chunk  spawn (just before Popen) -> that first chunk of the first prompt,
             which is sent as soon as `session/new` answered: the whole cold path
             (init + authenticate + new + prompt->first chunk, plus the client's gaps).
  rss peak   the same tree sample, over the whole run (through the prompt turns).
  2nd prompt the same three prompt figures for a second prompt in the same session
             (--prompts 2, the default): the agent is warm (lazy imports done).
  exit       stdin closed (after the prompt turn ended or gave up) -> the spawned
             process exits; after --exit-cap seconds it is killed (with its process
             group) and the run counts as "did not exit".
A step an agent cannot do within the timeout (or answers with an error) is "n/a",
and the reason (the error, or the tail of its stderr) goes to the notes. After
--give-up-after consecutive failures of a step with no success, later runs skip it.

Output: a markdown table (metrics as rows, agents as columns, "median / p90"),
followed by notes, on stdout and, with --out, in FILE.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import queue
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fakes.llm_server import FakeLLMServer, start_fake_llm  # noqa: E402

Message = dict[str, Any]
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
PROMPT_TEXT = "bench ping"
MODEL_PROTOCOLS = {"openai", "anthropic", "responses", "gemini"}  # the fake's model routes

# Placeholders usable in commands and env values: {python} {repo} {peers} {base_url} {home}
PRESETS: dict[str, dict[str, Any]] = {
    "term2": {
        "argv": ["{python}", "-m", "term2", "acp"],
        "env": {
            "TERM2_MODEL": "openai/fake-model",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": "{base_url}/v1",
            "TERM2_HOME": "{home}/term2-home",
            "XDG_CONFIG_HOME": "{home}/.config",  # no config file: the default (native) wire
        },
    },
    "term2-litellm": {
        "argv": ["{python}", "-m", "term2", "acp"],
        "env": {
            "TERM2_MODEL": "openai/fake-model",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": "{base_url}/v1",
            "TERM2_HOME": "{home}/term2-home",
            "XDG_CONFIG_HOME": "{home}/.config",
        },
        "files": {".config/term2/config.toml": '[providers.openai]\nwire = "litellm"\n'},
    },
    # Not agents: the least a Python program does to reach a first reply (floor_agent.py), alone and
    # after importing term2's stack, so the table shows what any Python agent starts from.
    "floor": {
        "argv": ["{python}", "{repo}/benchmarks/peers/floor_agent.py"],
        "env": {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "{base_url}/v1"},
    },
    "floor-stack": {
        "argv": ["{python}", "{repo}/benchmarks/peers/floor_agent.py", "--libs", "stack"],
        "env": {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "{base_url}/v1"},
    },
    "codex": {
        # A custom provider (no login needed). codex 0.16 only speaks the OpenAI Responses
        # API (`wire_api = "chat"` is rejected at startup); the fake serves /v1/responses.
        "argv": [
            "{peers}/node_modules/.bin/codex-acp",
            "-c",
            'model_provider="fake"',
            "-c",
            'model="fake-model"',
            "-c",
            'model_providers.fake={name="fake", base_url="{base_url}/v1", '
            'env_key="OPENAI_API_KEY", wire_api="responses"}',
        ],
        "env": {
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": "{base_url}/v1",
            "CODEX_HOME": "{home}/codex-home",
        },
        "mkdirs": ["{home}/codex-home"],  # codex refuses a CODEX_HOME that does not exist
    },
    "claude": {
        "argv": ["{peers}/node_modules/.bin/claude-agent-acp"],
        "env": {
            "ANTHROPIC_API_KEY": "sk-ant-test",
            "ANTHROPIC_BASE_URL": "{base_url}",
            "CLAUDE_CONFIG_DIR": "{home}/claude-config",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            # We run as root in a container: without this the bundled Claude Code refuses
            # to start a session ("--dangerously-skip-permissions cannot be used with
            # root/sudo privileges"). It only makes bypass mode *available*; the session
            # starts in its default mode and our client rejects every permission request.
            "IS_SANDBOX": "1",
        },
    },
    "gemini": {
        "argv": ["{peers}/node_modules/.bin/gemini", "--acp"],
        "env": {
            "GEMINI_API_KEY": "fake-gemini-key",
            # honoured by @google/genai; the fake serves the Gemini routes.
            "GOOGLE_GEMINI_BASE_URL": "{base_url}",
        },
        "authenticate": "gemini-api-key",
        "files": {
            ".gemini/settings.json": json.dumps(
                {
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "privacy": {"usageStatisticsEnabled": False},
                    "telemetry": {"enabled": False},
                    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
                }
            ),
        },
    },
}

METRICS = [
    ("init", "spawn → `initialize` response (ms)"),
    ("auth", "`authenticate` (ms)"),
    ("new", "`session/new` (ms)"),
    ("rss_idle", "peak RSS of the tree, idle after `session/new` (MB)"),
    ("to_request", "`session/prompt` → first request arrives at the fake, any route (ms)"),
    ("overhead", "first chunk: agent overhead after model request arrival (ms)"),
    ("to_chunk", "`session/prompt` → first `agent_message_chunk` (ms)"),
    ("spawn_to_chunk", "spawn → first reply chunk, prompt sent right after `session/new` (ms)"),
    ("model_requests", "model requests per prompt turn"),
    ("to_request_warm", "2nd prompt, same session: `session/prompt` → first request at the fake (ms)"),
    ("overhead_warm", "2nd prompt: agent overhead after model request arrival (ms)"),
    ("to_chunk_warm", "2nd prompt: `session/prompt` → first chunk (ms)"),
    ("rss_peak", "peak RSS of the tree, whole run (MB)"),
    ("exit", "exit after stdin closes (ms)"),
]


@dataclass
class Agent:
    name: str
    argv: list[str]
    env: dict[str, str]
    authenticate: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    home: Path = Path()
    workspace: Path = Path()
    runs: list[dict[str, Any]] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)  # step -> distinct reasons
    failures: dict[str, int] = field(default_factory=dict)  # step -> consecutive failures, -1 once it succeeded
    agent_info: Any = None


class StepFailed(Exception):
    def __init__(self, step: str, reason: str) -> None:
        super().__init__(f"{step}: {reason}")
        self.step, self.reason = step, reason


# --------------------------------------------------------------------------- structured-output side requests


def _schema_value(schema: Any, depth: int = 0) -> Any:
    """A minimal value valid against a JSON schema (OpenAPI-style upper-case types too)."""
    if not isinstance(schema, dict) or depth > 8:
        return "bench"
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _schema_value(schema[key][0], depth + 1)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "string")
    kind = str(kind).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        names = schema.get("required") or list(props)
        return {name: _schema_value(props.get(name), depth + 1) for name in names}
    if kind == "array":
        return [_schema_value(schema.get("items"), depth + 1)] if schema.get("minItems") else []
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    return "bench"


def _json_schema_of(protocol: str, body: Any) -> Any:
    """The schema a request asks its answer to follow (structured output), or None for free text."""
    if not isinstance(body, dict):
        return None
    if protocol == "gemini":
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":
            return config.get("responseJsonSchema") or config.get("responseSchema") or {}
    elif protocol == "anthropic":
        fmt = (body.get("output_config") or {}).get("format") or {}
        if fmt.get("type") == "json_schema":
            return fmt.get("schema") or {}
    elif protocol == "openai":
        fmt = body.get("response_format") or {}
        if fmt.get("type") in ("json_schema", "json_object"):
            return (fmt.get("json_schema") or {}).get("schema") or {}
    elif protocol == "responses":
        fmt = (body.get("text") or {}).get("format") or {}
        if fmt.get("type") in ("json_schema", "json_object"):
            return fmt.get("schema") or {}
    return None


def structured_output_responder(request: Any) -> dict[str, Any] | None:
    """Answer a structured-output request (a side request: gemini's model router, claude's
    session title) with JSON valid against its schema; everything else gets the fake's echo.

    Without it gemini-cli's classifier gets "echo: ..." where it expects JSON and retries
    with back-off (5, 8, 16, 30 s, ...) before the turn's real request is ever sent."""
    schema = _json_schema_of(request.protocol, request.body)
    if schema is None:
        return None
    return {"text": json.dumps(_schema_value(schema)), "chunks": 1}


# --------------------------------------------------------------------------- process tree RSS


class TreeSampler(threading.Thread):
    """Sum RSS of `root` and its descendants every `interval` s; keep the running peak."""

    def __init__(self, root: int, interval: float = 0.01, discover_every: int = 5) -> None:
        super().__init__(daemon=True, name=f"rss-{root}")
        self.root, self.interval, self.discover_every = root, interval, discover_every
        self.pids: set[int] = {root}
        self.peak_kb = 0
        self.samples = 0
        self._halt = threading.Event()

    def _discover(self) -> None:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        found, todo = {self.root}, [self.root]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        self.pids = found

    def sample(self) -> None:
        total = 0
        for pid in list(self.pids):
            try:
                with open(f"/proc/{pid}/statm", "rb") as handle:
                    total += int(handle.read().split()[1]) * PAGE_KB
            except (OSError, ValueError, IndexError):
                self.pids.discard(pid)
        self.samples += 1
        self.peak_kb = max(self.peak_kb, total)

    def run(self) -> None:
        tick = 0
        while not self._halt.is_set():
            if tick % self.discover_every == 0:
                self._discover()
            self.sample()
            tick += 1
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(2)


# --------------------------------------------------------------------------- ACP client


class Client:
    """Newline-delimited JSON-RPC over the agent's stdio; answers agent->client requests."""

    def __init__(self, agent: Agent, run_dir: Path, verbose: bool) -> None:
        self.agent, self.verbose = agent, verbose
        self.stderr_path = run_dir / "stderr.log"
        self._stderr = self.stderr_path.open("wb")
        self.inbox: queue.Queue[tuple[float, Message | None]] = queue.Queue()
        self.noise: list[str] = []
        self._next_id = 0
        self._write_lock = threading.Lock()
        self.spawned_at = time.monotonic()
        self.proc = subprocess.Popen(
            agent.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=agent.env,
            cwd=agent.workspace,
            start_new_session=True,
        )
        self.sampler = TreeSampler(self.proc.pid)
        self.sampler.start()
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"read-{agent.name}")
        self._reader.start()

    # ---- wire

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            stamp = time.monotonic()
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.noise.append(line[:200])
                continue
            if self.verbose:
                print(f"  [{self.agent.name} <-] {line[:300]}", file=sys.stderr)
            if isinstance(message, dict) and "method" in message and "id" in message:
                self._answer(message)
            if isinstance(message, dict):
                self.inbox.put((stamp, message))
        self.inbox.put((time.monotonic(), None))  # EOF

    def send(self, message: Message) -> float:
        data = (json.dumps(message) + "\n").encode()
        if self.verbose:
            print(f"  [{self.agent.name} ->] {data[:300]!r}", file=sys.stderr)
        with self._write_lock:
            stamp = time.monotonic()
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        return stamp

    def request(self, method: str, params: Any) -> tuple[int, float]:
        self._next_id += 1
        try:
            sent = self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        except (BrokenPipeError, OSError) as exc:
            raise StepFailed(method, f"could not write to the agent ({exc}); {self.stderr_tail()}") from None
        return self._next_id, sent

    def _answer(self, message: Message) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "session/request_permission":
            options = params.get("options") or []
            chosen = next((o for o in options if o.get("kind") == "reject_once"), None) or next(
                (o for o in options if str(o.get("kind", "")).startswith("reject")), None
            )
            outcome = {"outcome": "selected", "optionId": chosen["optionId"]} if chosen else {"outcome": "cancelled"}
            reply: Message = {"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}
        else:  # fs/* and terminal/* are not offered; anything else is unknown to this client
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": f"{method} not supported by the bench client"},
            }
        with contextlib.suppress(OSError, ValueError):
            self.send(reply)

    def wait_response(
        self, request_id: int, step: str, timeout: float, on_message: Any = None
    ) -> tuple[float, Message]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StepFailed(step, f"no response within {timeout:.0f} s; {self.stderr_tail()}")
            try:
                stamp, message = self.inbox.get(timeout=remaining)
            except queue.Empty:
                continue
            if message is None:
                code = self.proc.poll()
                raise StepFailed(step, f"agent closed stdout (exit code {code}); {self.stderr_tail()}")
            if on_message is not None:
                on_message(stamp, message)
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise StepFailed(step, f"error {json.dumps(message['error'])[:300]}")
                return stamp, message

    def stderr_tail(self, chars: int = 300) -> str:
        with contextlib.suppress(OSError):
            self._stderr.flush()
        try:
            text = self.stderr_path.read_bytes()[-4000:].decode("utf-8", "replace")
        except OSError:
            return "stderr: (unreadable)"
        text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
        text = text.split("Stack backtrace:")[0]  # Rust (codex): keep the error, not the frames
        text = " ".join(text.split())
        return f"stderr tail: {text[-chars:]!r}" if text else "stderr: (empty)"

    # ---- shutdown

    def close_and_time_exit(self, cap: float) -> float | None:
        closed = time.monotonic()
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(cap)
            exited: float | None = (time.monotonic() - closed) * 1000
        except subprocess.TimeoutExpired:
            exited = None
        self.kill()
        return exited

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(5)
        self.sampler.stop()
        self._reader.join(2)
        self._stderr.close()


# --------------------------------------------------------------------------- one run


def _skip(agent: Agent, step: str, give_up: int) -> bool:
    return give_up > 0 and agent.failures.get(step, 0) >= give_up


def _failed(agent: Agent, result: dict[str, Any], exc: StepFailed) -> None:
    result.setdefault("failed", []).append(exc.step)
    reasons = agent.notes.setdefault(exc.step, [])
    short = re.sub(r"\d+(\.\d+)? ?ms", "N ms", exc.reason)
    short = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "<time>", short)  # log timestamps would defeat dedup
    short = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", short)
    if short not in reasons:
        reasons.append(short)
    if agent.failures.get(exc.step, 0) >= 0:
        agent.failures[exc.step] = agent.failures.get(exc.step, 0) + 1


def _ok(agent: Agent, step: str) -> None:
    agent.failures[step] = -1


def _chunk_text(message: Message) -> str | None:
    if message.get("method") != "session/update":
        return None
    update = (message.get("params") or {}).get("update") or {}
    if update.get("sessionUpdate") != "agent_message_chunk":
        return None
    content = update.get("content") or {}
    return str(content.get("text", "")) if isinstance(content, dict) else ""


def one_run(agent: Agent, server: FakeLLMServer, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if _skip(agent, "initialize", args.give_up_after):
        result["failed"] = ["initialize (skipped)"]
        return result
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        client = Client(agent, run_dir, args.verbose)
    except OSError as exc:
        _failed(agent, result, StepFailed("initialize", f"cannot spawn: {exc}"))
        return result
    try:
        init_params = {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "term2-bench-peers", "version": "1"},
        }
        rid, _ = client.request("initialize", init_params)
        stamp, message = client.wait_response(rid, "initialize", args.step_timeout)
        result["init"] = (stamp - client.spawned_at) * 1000
        agent.agent_info = agent.agent_info or (message.get("result") or {}).get("agentInfo")
        _ok(agent, "initialize")

        if agent.authenticate and not _skip(agent, "authenticate", args.give_up_after):
            rid, sent = client.request("authenticate", {"methodId": agent.authenticate})
            stamp, _ = client.wait_response(rid, "authenticate", args.step_timeout)
            result["auth"] = (stamp - sent) * 1000
            _ok(agent, "authenticate")

        if _skip(agent, "session/new", args.give_up_after):
            raise StepFailed("session/new (skipped)", "")
        rid, sent = client.request("session/new", {"cwd": str(agent.workspace), "mcpServers": []})
        stamp, message = client.wait_response(rid, "session/new", args.step_timeout)
        result["new"] = (stamp - sent) * 1000
        result["rss_idle"] = client.sampler.peak_kb / 1024
        session_id = (message.get("result") or {}).get("sessionId")
        _ok(agent, "session/new")

        for turn in range(1, args.prompts + 1):
            step = "session/prompt" if turn == 1 else f"session/prompt #{turn}"
            if _skip(agent, step, args.give_up_after):
                break
            prompt_step(agent, client, server, session_id, args, result, step, "" if turn == 1 else "_warm")
    except StepFailed as exc:
        if exc.reason:
            _failed(agent, result, exc)
    finally:
        if client.noise:
            agent.notes.setdefault("stdout", [])
            note = f"wrote {len(client.noise)} non-JSON line(s) to stdout, e.g. {client.noise[0][:120]!r}"
            if not agent.notes["stdout"]:
                agent.notes["stdout"].append(note)
        client.sampler.sample()
        result["rss_peak"] = client.sampler.peak_kb / 1024
        result["exit"] = client.close_and_time_exit(args.exit_cap)
        result["did_not_exit"] = result["exit"] is None
        result["rss_samples"] = client.sampler.samples
    return result


def prompt_step(
    agent: Agent,
    client: Client,
    server: FakeLLMServer,
    session_id: Any,
    args: argparse.Namespace,
    result: dict[str, Any],
    step: str,
    suffix: str,
) -> None:
    before = len(server.requests)
    chunks: list[tuple[float, str]] = []

    def watch(stamp: float, message: Message) -> None:
        chunk = _chunk_text(message)
        if chunk is not None:
            chunks.append((stamp, chunk))

    rid, sent = client.request(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": PROMPT_TEXT}]}
    )
    error: StepFailed | None = None
    try:
        _, message = client.wait_response(rid, step, args.prompt_timeout, on_message=watch)
        result["stop_reason" + suffix] = (message.get("result") or {}).get("stopReason")
    except StepFailed as exc:
        error = exc
    turn = server.requests[before:]
    model_reqs = [r for r in turn if r.protocol in MODEL_PROTOCOLS]
    if turn:
        result["to_request" + suffix] = (turn[0].started_at - sent) * 1000
    result["model_requests" + suffix] = len(model_reqs)
    other = sorted({f"{r.path} ({r.protocol})" for r in turn if r.protocol not in MODEL_PROTOCOLS})
    rejected = sorted({f"{r.path}: {r.rejection}" for r in model_reqs if r.rejection})
    for note in (["requests on routes the fake does not serve (404): " + ", ".join(other)] if other else []) + [
        "refused by the fake's provider rules (400): " + item for item in rejected
    ]:
        agent.notes.setdefault("fake model", [])
        if note not in agent.notes["fake model"]:
            agent.notes["fake model"].append(note)
    # The first chunk of the model's text: the agent's own notices sent before it (codex:
    # "Model metadata for `fake-model` not found...") are not model output and do not count.
    first: dict[str, Any] = {}
    for i, (stamp, _) in enumerate(chunks):
        if "".join(t for _, t in chunks[i:]).lstrip().startswith("echo"):
            first["at"] = stamp
            notices = "".join(t for _, t in chunks[:i]).strip()
            if notices:
                agent.notes.setdefault(step + ", before the model's text", [])
                note = f"the agent's own agent_message_chunk (not counted): {notices[:140]!r}"
                if note not in agent.notes[step + ", before the model's text"]:
                    agent.notes[step + ", before the model's text"].append(note)
            break
    text = [t for _, t in chunks]
    if "at" not in first and not chunks:
        if error is None:
            error = StepFailed(
                step,
                f"turn ended (stopReason {result.get('stop_reason' + suffix)!r}) without an agent_message_chunk; "
                + client.stderr_tail(),
            )
        if not model_reqs and turn:
            error = StepFailed(step, error.reason + "; no request reached the fake's model routes")
        raise error
    joined = "".join(text)
    source = [r for r in model_reqs if r.started_at <= first["at"]] if "at" in first else []
    if not source:
        raise StepFailed(
            step, f"first chunk did not come from the fake model (text {joined[:120]!r}); {client.stderr_tail()}"
        )
    arrival = source[-1].started_at
    result["overhead" + suffix] = (first["at"] - arrival) * 1000
    result["to_chunk" + suffix] = (first["at"] - sent) * 1000
    if not suffix:
        result["spawn_to_chunk"] = (first["at"] - client.spawned_at) * 1000
    _ok(agent, step)
    if error is not None:  # chunk seen, but the turn did not end cleanly
        agent.notes.setdefault(step, [])
        if error.reason not in agent.notes[step]:
            agent.notes[step].append("after the first chunk: " + error.reason)


# --------------------------------------------------------------------------- table


def _fmt(values: list[float], unit_digits: int = 1) -> str:
    if not values:
        return "n/a"
    ordered = sorted(values)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]  # nearest rank
    return f"{statistics.median(values):.{unit_digits}f} / {p90:.{unit_digits}f}"


def render(agents: list[Agent], args: argparse.Namespace, header: str) -> str:
    lines = [
        header,
        "",
        "| figure (median / p90) | " + " | ".join(a.name for a in agents) + " |",
        "|---|" + "---:|" * len(agents),
    ]
    for key, label in METRICS:
        if key == "auth" and not any(a.authenticate for a in agents):
            continue
        cells = []
        for agent in agents:
            if key == "auth" and not agent.authenticate:
                cells.append("—")
                continue
            values = [r[key] for r in agent.runs if r.get(key) is not None]
            digits = 0 if key.startswith("model_requests") else 1
            cell = _fmt(values, digits)
            if key == "exit":
                stuck = sum(1 for r in agent.runs if r.get("did_not_exit"))
                if stuck:
                    cell = f"did not exit ({stuck}/{len(agent.runs)})" + ("" if not values else f"; exited: {cell}")
            elif values and len(values) < len(agent.runs):
                cell += f" ({len(values)}/{len(agent.runs)} runs)"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Notes:", ""]
    for agent in agents:
        info = agent.agent_info
        version = f" (agentInfo: {info.get('name')} {info.get('version')})" if isinstance(info, dict) else ""
        lines.append(f"- **{agent.name}**{version}: `{shlex.join(agent.display_argv)}`")  # type: ignore[attr-defined]
        if agent.env_display:  # type: ignore[attr-defined]
            lines.append(f"  - env: {agent.env_display}")  # type: ignore[attr-defined]
        for rel, content in agent.files.items():
            lines.append(f"  - file `$HOME/{rel}`: `{' '.join(content.split())}`")
        if not agent.notes:
            lines.append("  - every step measured in every run")
        for step, reasons in agent.notes.items():
            for reason in reasons[:3]:
                lines.append(f"  - {step}: {reason}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def build_agents(args: argparse.Namespace, base_url: str, scratch: Path) -> list[Agent]:
    specs: dict[str, dict[str, Any]] = {}
    for name in [n for n in args.preset.split(",") if n]:
        if name not in PRESETS:
            raise SystemExit(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
        specs[name] = json.loads(json.dumps(PRESETS[name]))
    for item in args.agent:
        name, _, command = item.partition("=")
        specs[name] = {"argv": shlex.split(command), "env": {}}
    for item in args.env:
        name, _, assignment = item.partition(":")
        key, _, value = assignment.partition("=")
        specs.setdefault(name, {"argv": [], "env": {}})["env"][key] = value
    for item in args.authenticate:
        name, _, method = item.partition(":")
        specs[name]["authenticate"] = method or None
    # PYTHONDONTWRITEBYTECODE (set in some shells and CI images) would have every run compile from source
    # whatever changed since the last bytecode was written: a user's install has it written (ADR 0053).
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_") and k != "PYTHONDONTWRITEBYTECODE"}
    base_env.update({"NO_UPDATE_NOTIFIER": "1", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"})
    compile_installed()
    agents = []
    for name, spec in specs.items():
        if not spec.get("argv"):
            raise SystemExit(f"agent {name!r} has no command")
        home = scratch / name / "home"
        workspace = scratch / name / "workspace"
        workspace.mkdir(parents=True)
        home.mkdir(parents=True)
        values = {
            "python": sys.executable,
            "repo": str(REPO),
            "peers": args.peers_prefix,
            "base_url": base_url,
            "home": str(home),
        }

        def fill(text: str, values: dict[str, str] = values) -> str:
            return re.sub(r"\{(python|repo|peers|base_url|home)\}", lambda m: values[m.group(1)], text)

        own_env = {k: fill(v) for k, v in spec.get("env", {}).items()}
        env = dict(base_env, HOME=str(home), **own_env)
        for directory in spec.get("mkdirs", []):
            Path(fill(directory)).mkdir(parents=True, exist_ok=True)
        for rel, content in spec.get("files", {}).items():
            target = home / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        agent = Agent(
            name, [fill(a) for a in spec["argv"]], env, spec.get("authenticate"), spec.get("files", {}), home, workspace
        )
        agent.display_argv = [a.replace(str(home), "$HOME").replace(base_url, "$FAKE") for a in agent.argv]  # type: ignore[attr-defined]
        shown = {**own_env, "HOME": "(scratch dir)"}
        agent.env_display = " ".join(  # type: ignore[attr-defined]
            f"{k}={shlex.quote(v.replace(str(home), '$HOME').replace(base_url, '$FAKE'))}" for k, v in shown.items()
        )
        agents.append(agent)
    return agents


def compile_installed() -> None:
    """Write the bytecode of term2 and of its environment's libraries, as installing them (or their first
    run) does for a user: measured without it, Python compiles each changed module from source every run."""
    import compileall
    import sysconfig

    import term2

    for folder in (Path(term2.__file__).parent, Path(sysconfig.get_paths()["purelib"])):
        compileall.compile_dir(folder, quiet=2, workers=0)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument(
        "--preset",
        default="term2,term2-litellm,codex,claude,gemini,floor,floor-stack",
        help="comma-separated built-in agents ('' for none)",
    )
    parser.add_argument("--peers-prefix", default=os.environ.get("PEERS_PREFIX", "/tmp/term2-peers"))
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        help="NAME=COMMAND (shell-quoted argv; placeholders {python} {repo} {peers} {base_url} {home})",
    )
    parser.add_argument("--env", action="append", default=[], help="NAME:KEY=VALUE for an agent's environment")
    parser.add_argument(
        "--authenticate", action="append", default=[], help="NAME:METHOD_ID: call authenticate before session/new"
    )
    parser.add_argument(
        "--prompts", type=int, default=2, help="prompt turns per run in one session (the 2nd+ are 'warm')"
    )
    parser.add_argument("--exit-cap", type=float, default=5.0, help="seconds to wait for exit after stdin closes")
    parser.add_argument(
        "--step-timeout", type=float, default=30.0, help="seconds for initialize/authenticate/session/new"
    )
    parser.add_argument("--prompt-timeout", type=float, default=60.0, help="seconds for a prompt turn")
    parser.add_argument(
        "--give-up-after",
        type=int,
        default=2,
        help="skip a step after N consecutive failures with no success (0: never)",
    )
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir (stderr logs per run)")
    parser.add_argument("--out")
    parser.add_argument("--verbose", action="store_true", help="echo the ACP traffic on stderr")
    parser.add_argument(
        "--dump-requests", help="write every request the fake model recorded to FILE (JSON lines), for diagnosis"
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="term2-bench-peers-"))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    loads = [_load()]
    with start_fake_llm() as server:
        server.responder = structured_output_responder
        agents = build_agents(args, server.base_url, scratch)
        if not args.no_warmup:
            for agent in agents:
                print(f"warm-up: {agent.name}", file=sys.stderr)
                one_run(agent, server, args, scratch / agent.name / "run-warmup")
                agent.notes.clear()
                agent.failures = {k: v for k, v in agent.failures.items() if v == -1}
        for i in range(args.runs):
            order = agents[i % len(agents) :] + agents[: i % len(agents)]
            for agent in order:
                result = one_run(agent, server, args, scratch / agent.name / f"run-{i}")
                agent.runs.append(result)
                brief = {
                    k: (round(v, 1) if isinstance(v, float) else v) for k, v in result.items() if k != "rss_samples"
                }
                print(f"run {i + 1}/{args.runs} {agent.name}: {brief}", file=sys.stderr)
            loads.append(_load())
        if args.dump_requests:
            with open(args.dump_requests, "w", encoding="utf-8") as dump:
                for rec in list(server.requests):
                    dump.write(json.dumps(rec.to_json(), default=str) + "\n")
    header = (
        f"{args.runs} interleaved runs per agent, started {started}; load average (1/5/15 min) "
        f"before: {loads[0]}, after: {loads[-1]}, highest 1-min seen between rounds: "
        f"{max(float(x.split()[0]) for x in loads):.2f}; nproc {os.cpu_count()}."
    )
    report = render(agents, args, header)
    sys.stdout.write(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    if args.keep:
        print(f"scratch kept in {scratch}", file=sys.stderr)
    else:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
