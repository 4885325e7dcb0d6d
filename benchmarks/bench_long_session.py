"""A long session through a real `term2 acp` against the fake model: what grows, what does not (issue 12).

Usage: python benchmarks/bench_long_session.py [--turns 200] [--window 64000] [--out FILE] [--nagle]

One `term2 acp` process (ACP v2), one session, a workspace holding a small
Python project (three modules of a few hundred lines and a test file). The
model is `tests/fakes/llm_server.py` run in this process, with a responder:
each turn it asks for one tool and answers in a few sentences once it has the
result. Turns cycle read_file, grep, edit_file (a real one-line change that
applies); every 10th turn is run_shell (`python3 -m unittest` and `ls -la`,
sandboxed).
The model is declared with `context_window = <window>` and the fake refuses
any prompt over window*4 characters (its token estimate), so an overrun would
show as a refused request. The compactor's summary requests (system prompt
"You are term2's context compactor") are answered with a summary.

Per turn, all on this process's time.monotonic() (the fake stamps its requests
with the same clock, it runs here):
  wall      `session/prompt` sent -> the idle `state_update` read;
  model     sum over the model requests the turn made (compaction's included)
            of finished_at - started_at as the fake records them;
  overhead  wall - model: term2 itself (the provider client's HTTP/SSE handling, the loop,
            compaction's own work, the tool runs, the store, the pipe).
Reported at turn 1, around turns 50 and 200 (median of turns 1-3, 48-52,
196-200), and over the whole run. Also: peak RSS of the term2 process tree
(summed /proc/<pid>/statm, sampled every 20 ms) and of the term2 process
alone (VmHWM), RSS after turns 1/50/200, model requests by kind, completed
`compaction_update`s, refused requests, and the store's size on disk.

The fake's sockets send with TCP_NODELAY here (--nagle leaves its default):
with Nagle on, each reply's tail waits ~40 ms for a delayed ACK after the fake
has stamped finished_at, and that wait lands in "overhead" (~85 ms a turn).

Prints a markdown table (stdout is not the protocol here); --out writes it too.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import llm_env
from tests.fakes.llm_accounting import prompt_chars
from tests.fakes.llm_server import RecordedRequest, start_fake_llm
from tests.support.acp_process import AcpProcess, Message, updates

COMPACTOR = "You are term2's context compactor"
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
TURN_TIMEOUT = 180.0
SHELL_EVERY = 10
MODULES = ("ledger/models.py", "ledger/parser.py", "ledger/report.py")
TEST_FILE = "tests/test_ledger.py"


# --------------------------------------------------------------------------- the project


def _module(name: str, topic: str, classes: list[str], functions: int) -> str:
    """A realistic-looking module: docstring, imports, tunables, a few classes, many small functions."""
    out = [
        f'"""{topic}."""',
        "",
        "from __future__ import annotations",
        "",
        "import dataclasses",
        "import datetime as dt",
        "from collections.abc import Iterable, Iterator",
        "from decimal import Decimal, InvalidOperation",
        "",
        "# tunables",
        f"MAX_ROWS_{name.upper()} = 500  # rows handled per page",
        f"RETRY_LIMIT_{name.upper()} = 3  # attempts before a row is given up",
        f"ROUNDING_{name.upper()} = 2  # decimal places kept",
        "",
    ]
    for cls in classes:
        out += [
            "",
            "@dataclasses.dataclass(frozen=True)",
            f"class {cls}:",
            f'    """One {cls.lower()} as the ledger keeps it."""',
            "",
            "    key: str",
            "    amount: Decimal",
            "    booked_on: dt.date",
            '    memo: str = ""',
            "",
            "    def signed(self) -> Decimal:",
            f'        """The amount with the sign a {cls.lower()} carries in a balance."""',
            "        return self.amount if self.amount >= 0 else -abs(self.amount)",
            "",
            "    def describe(self) -> str:",
            f'        return f"{cls} {{self.key}} {{self.amount:.2f}} on {{self.booked_on:%Y-%m-%d}}"',
            "",
        ]
    verbs = ("total", "filter", "group", "validate", "normalise", "merge", "split", "rank", "clamp", "index")
    nouns = ("rows", "amounts", "accounts", "entries", "dates", "memos", "keys", "batches", "pages", "totals")
    for n in range(functions):
        fn = f"{verbs[n % len(verbs)]}_{nouns[(n // len(verbs)) % len(nouns)]}_{n}"
        out += [
            "",
            f"def {fn}(items: Iterable[Decimal], limit: int = MAX_ROWS_{name.upper()}) -> list[Decimal]:",
            f'    """{verbs[n % len(verbs)].capitalize()} up to `limit` values, rounded to '
            f'ROUNDING_{name.upper()} places."""',
            "    kept: list[Decimal] = []",
            "    for value in items:",
            "        if len(kept) >= limit:",
            "            break",
            "        try:",
            f"            kept.append(round(Decimal(value) * {n % 7 + 1}, ROUNDING_{name.upper()}))",
            "        except InvalidOperation:",
            "            continue",
            "    return kept",
        ]
    out += [
        "",
        "",
        "def iter_chunks(values: list[Decimal], size: int) -> Iterator[list[Decimal]]:",
        '    """Successive slices of `size` values (the last may be shorter)."""',
        "    for start in range(0, len(values), size):",
        "        yield values[start : start + size]",
        "",
    ]
    return "\n".join(out)


TESTS = '''"""Tests of the ledger package (unittest, so that a bare python3 runs them; pytest does too)."""

import unittest
from decimal import Decimal

from ledger.models import iter_chunks, total_rows_0
from ledger.parser import filter_rows_1
from ledger.report import group_rows_2


class LedgerTests(unittest.TestCase):
    def test_total_rows_rounds_and_scales(self) -> None:
        self.assertEqual(total_rows_0([Decimal("1.005"), Decimal("2")]), [Decimal("1.00"), Decimal("2.00")])

    def test_filter_rows_stops_at_the_limit(self) -> None:
        self.assertEqual(len(filter_rows_1([Decimal(1)] * 10, limit=3)), 3)

    def test_group_rows_skips_garbage(self) -> None:
        self.assertEqual(group_rows_2(["x", Decimal(1)]), [Decimal(3)])

    def test_iter_chunks(self) -> None:
        self.assertEqual([len(c) for c in iter_chunks([Decimal(1)] * 5, 2)], [2, 2, 1])


if __name__ == "__main__":
    unittest.main()
'''


def make_project(root: Path) -> None:
    (root / "ledger").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "ledger" / "__init__.py").write_text('"""A small double-entry ledger."""\n')
    specs = {
        "models": ("Ledger records: accounts, entries and the balances they add up to", ["Account", "Entry"], 24),
        "parser": ("Reading bank exports (CSV) into ledger entries", ["Row", "Batch"], 22),
        "report": ("Monthly reports: totals per account, ranked and paged", ["Line", "Section"], 20),
    }
    for name, (topic, classes, functions) in specs.items():
        (root / "ledger" / f"{name}.py").write_text(_module(name, topic, classes, functions))
    (root / "tests" / "__init__.py").write_text("")
    (root / TEST_FILE).write_text(TESTS)
    (root / "pyproject.toml").write_text('[project]\nname = "ledger"\nversion = "0.1.0"\n')
    readme = "# ledger\n\nA small double-entry ledger; `python3 -m unittest discover -s tests` runs the tests.\n"
    (root / "README.md").write_text(readme)


# --------------------------------------------------------------------------- the fake model's work


GREPS = ("def total_", "class ", "MAX_ROWS_", "InvalidOperation", "def iter_chunks", "ROUNDING_")


@dataclass
class Plan:
    """What turn `turn` asks the model to do (the responder reads it)."""

    root: Path
    turn: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kind(self, turn: int) -> str:
        if turn % SHELL_EVERY == 0:
            return "shell"
        return ("read", "grep", "edit")[(turn - 1) % 3]

    def prompt(self, turn: int) -> str:
        kind, module = self.kind(turn), MODULES[turn % len(MODULES)]
        if kind == "read":
            path = (*MODULES, TEST_FILE)[turn % 4]
            return (
                f"Open {path} and tell me what it is responsible for. "
                "I am mostly interested in how invalid amounts are handled and where the row limit comes from."
            )
        if kind == "grep":
            return (
                f"Where is `{GREPS[turn % len(GREPS)]}` used across the package? "
                "List the places briefly so I can decide whether a rename is safe."
            )
        if kind == "edit":
            return (
                f"In {module}, raise the retry limit by one; the bank's export endpoint times out more often "
                "this month. Keep the comment as it is."
            )
        return "Run the test suite and tell me whether anything broke after these changes."

    def tool_call(self, turn: int) -> dict[str, Any]:
        kind, module = self.kind(turn), MODULES[turn % len(MODULES)]
        if kind == "read":
            return {"name": "read_file", "arguments": {"path": (*MODULES, TEST_FILE)[turn % 4]}}
        if kind == "grep":
            return {"name": "grep", "arguments": {"pattern": GREPS[turn % len(GREPS)], "include": "*.py"}}
        if kind == "edit":
            name = Path(module).stem.upper()
            text = (self.root / module).read_text()
            match = re.search(rf"^RETRY_LIMIT_{name} = (\d+)  # attempts before a row is given up$", text, re.M)
            assert match, f"no retry limit in {module}"
            old = match.group(0)
            new = old.replace(f"= {match.group(1)}", f"= {int(match.group(1)) + 1}")
            return {"name": "edit_file", "arguments": {"path": module, "old_string": old, "new_string": new}}
        # The sandbox sees /usr, not this virtualenv: its python3 has no pytest, so unittest runs the suite.
        command = "python3 -m unittest discover -s tests -t . && ls -la ledger"
        return {"name": "run_shell", "arguments": {"command": command, "timeout": 120}}

    def answer(self, turn: int, result: str) -> str:
        lines = result.count("\n") + 1
        kind = self.kind(turn)
        if kind == "read":
            return (
                f"The file is {lines} lines. It defines the tunables at the top (MAX_ROWS, RETRY_LIMIT, ROUNDING), "
                "two frozen dataclasses, and a family of small helpers that round and scale values; each helper "
                "skips an amount that does not parse (InvalidOperation) and stops at `limit`, which defaults to "
                "the module's MAX_ROWS constant."
            )
        if kind == "grep":
            return (
                f"The search returned {lines} lines. The uses are all inside the ledger package and its tests; "
                "none is reached through a string or getattr, so a rename done with a project-wide replace is safe."
            )
        if kind == "edit":
            return "Done: the retry limit went up by one and the comment is unchanged. Nothing else refers to it."
        summary = [line for line in result.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))]
        verdict = " / ".join(summary) or "no unittest summary"
        return f"The suite ran inside the sandbox: {verdict}. {lines} lines of output."

    def respond(self, request: RecordedRequest) -> dict[str, Any] | None:
        body = request.body if isinstance(request.body, dict) else {}
        messages = body.get("messages", [])
        if not messages:
            return None
        system = messages[0].get("content") if messages[0].get("role") == "system" else ""
        if isinstance(system, str) and system.startswith(COMPACTOR):
            return {
                "text": (
                    f"Summary (request {request.index}): the user is maintaining the `ledger` package "
                    "(ledger/models.py, parser.py, report.py, tests/test_ledger.py). So far the agent read the "
                    "modules, searched for the tunables and helpers, raised RETRY_LIMIT in each module several "
                    "times with edit_file, and ran the test suite, which passed. No open questions."
                )
            }
        with self.lock:
            turn = self.turn
        last = messages[-1]
        if last.get("role") == "tool":
            content = last.get("content")
            return {"text": self.answer(turn, content if isinstance(content, str) else str(content))}
        call = self.tool_call(turn)
        return {"text": "Let me look at that first.", "tool_calls": [call]}


# --------------------------------------------------------------------------- measuring


class TreeSampler(threading.Thread):
    """Sum RSS of `root` and its descendants every `interval` s; keep the peak and the last sample."""

    def __init__(self, root: int, interval: float = 0.02, discover_every: int = 3) -> None:
        super().__init__(daemon=True, name=f"rss-{root}")
        self.root, self.interval, self.discover_every = root, interval, discover_every
        self.pids: set[int] = {root}
        self.peak_kb = self.last_kb = 0
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
        self.last_kb = total
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


def own_rss_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of one process, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def allow(params: Message) -> Message:
    """An editor user who trusts the workspace: "always" when offered, else "once"."""
    options = params["options"]
    for kind in ("allow_always", "allow_once"):
        for option in options:
            if option["kind"] == kind:
                return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    raise AssertionError(f"no allow option: {options}")


@dataclass
class Turn:
    number: int
    kind: str
    wall: float
    model: float
    requests: int
    summaries: int
    refused: int
    stop_reason: str
    tool_status: str
    prompt_chars: int
    rss_kb: int
    gaps: tuple[float, float, float]  # prompt -> first request, between requests, last request -> idle

    @property
    def overhead(self) -> float:
        return self.wall - self.model


def _is_idle(message: Message, sid: str) -> bool:
    update = message.get("params", {}).get("update", {})
    return (
        message.get("method") == "session/update"
        and message["params"].get("sessionId") == sid
        and update.get("sessionUpdate") == "state_update"
        and update.get("state") == "idle"
    )


def is_summary(request: RecordedRequest) -> bool:
    messages = request.body.get("messages", []) if isinstance(request.body, dict) else []
    first = messages[0] if messages else {}
    return first.get("role") == "system" and str(first.get("content", "")).startswith(COMPACTOR)


def gaps(sent: float, made: list[RecordedRequest], idle: float) -> tuple[float, float, float]:
    """Where term2's time goes: before the first model request, between requests, after the last."""
    if not made:
        return (idle - sent, 0.0, 0.0)
    spans = sorted((r.started_at, r.finished_at or r.started_at) for r in made)
    between = sum(start - spans[i][1] for i, (start, _) in enumerate(spans[1:]))
    return (spans[0][0] - sent, between, idle - spans[-1][1])


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(turns: int, window: int, nagle: bool = False) -> tuple[list[Turn], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp, start_fake_llm(max_prompt_chars=window * 4) as llm:
        # The fake writes each SSE chunk with its own send() and stamps finished_at when the last one
        # returns; with Nagle on, the tail of a reply waits for the client's delayed ACK (~40 ms on
        # loopback) after that stamp, and the wait would be counted as term2's. Real provider
        # front ends send with TCP_NODELAY; so does the fake here, on this server's handler class only.
        llm.httpd.RequestHandlerClass.disable_nagle_algorithm = not nagle  # type: ignore[attr-defined]
        base = Path(tmp)
        root = base / "project"
        make_project(root)
        config = base / "xdg-config" / "term2"
        config.mkdir(parents=True)
        (config / "config.toml").write_text(f'[models."openai/fake-model"]\ncontext_window = {window}\n')
        plan = Plan(root)
        llm.responder = plan.respond
        env = {**llm_env(llm), "TERM2_LOG_LEVEL": "info"}  # the default level, as a user runs it
        client = AcpProcess(base, env=env, permission=allow)
        sampler = TreeSampler(client.proc.pid)
        sampler.start()
        results: list[Turn] = []
        compactions: Counter[str] = Counter()
        try:
            client.initialize(2)
            sid = client.new_session(root)
            for number in range(1, turns + 1):
                with plan.lock:
                    plan.turn = number
                before = len(llm.requests)
                sent = time.monotonic()
                client.request(
                    "session/prompt",
                    {"sessionId": sid, "prompt": [{"type": "text", "text": plan.prompt(number)}]},
                )
                messages = client.collect_until(lambda m: _is_idle(m, sid), TURN_TIMEOUT)
                wall = time.monotonic() - sent
                made = llm.requests[before:]
                model = sum((r.finished_at or r.started_at) - r.started_at for r in made)
                for u in updates(messages, "compaction_update"):
                    compactions[u["status"]] += 1
                idle = [u for u in updates(messages, "state_update") if u.get("state") == "idle"][-1]
                tool = [u for u in updates(messages) if u["sessionUpdate"] == "tool_call_update" and u.get("status")]
                turn_requests = [r for r in made if not is_summary(r)]
                results.append(
                    Turn(
                        number=number,
                        kind=plan.kind(number),
                        wall=wall,
                        model=model,
                        requests=len(made),
                        summaries=sum(1 for r in made if is_summary(r)),
                        refused=sum(1 for r in made if r.status == "error"),
                        stop_reason=str(idle.get("stopReason")),
                        tool_status=str(tool[-1]["status"]) if tool else "none",
                        prompt_chars=prompt_chars("openai", turn_requests[-1].body) if turn_requests else 0,
                        rss_kb=sampler.last_kb,
                        gaps=gaps(sent, made, sent + wall),
                    )
                )
                if results[-1].stop_reason != "end_turn" or results[-1].tool_status != "completed":
                    print(f"turn {number}: {results[-1]}", file=sys.stderr)
            between = len(llm.requests) - sum(t.requests for t in results)
            term2_rss, term2_hwm = own_rss_kb(client.proc.pid)
            store_bytes = dir_size(client.home)
            assert client.close() == 0, client.stderr()[-2000:]
        finally:
            sampler.stop()
            client.kill()
        requests = llm.requests
        facts = {
            "tree_peak_kb": sampler.peak_kb,
            "term2_rss_kb": term2_rss,
            "term2_hwm_kb": term2_hwm,
            "store_bytes": store_bytes,
            "requests": len(requests),
            "summary_requests": sum(1 for r in requests if is_summary(r)),
            "refused": sum(1 for r in requests if r.status == "error"),
            "compactions": dict(compactions),
            "between_turns": between,
            "permission_requests": len(client.permission_requests),
            "prompt_chars_limit": window * 4,
        }
        return results, facts


# --------------------------------------------------------------------------- reporting


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}" if values else "n/a"


def _split(turns: list[Turn]) -> str:
    return " / ".join(_ms([t.gaps[i] for t in turns]) for i in range(3))


def table(results: list[Turn], facts: dict[str, Any], window: int) -> str:
    n = len(results)
    windows = [("turn 1", [1]), ("turns 1-3", [1, 2, 3]), ("turns 48-52", list(range(48, 53)))]
    windows.append((f"turns {n - 4}-{n}", list(range(n - 4, n + 1))))
    windows.append((f"all {n} turns", list(range(1, n + 1))))
    rows = [
        f"| {n}-turn session, window {window:,} tokens | wall (ms) | model (ms) | term2 overhead (ms) | "
        "of which: before 1st request / between requests / after last (ms) | prompt sent (chars) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    by_number = {t.number: t for t in results}
    for label, numbers in windows:
        chosen = [by_number[k] for k in numbers if k in by_number]
        if not chosen:
            continue
        chars = statistics.median(t.prompt_chars for t in chosen)
        rows.append(
            f"| {label} (median) | {_ms([t.wall for t in chosen])} | {_ms([t.model for t in chosen])} | "
            f"{_ms([t.overhead for t in chosen])} | {_split(chosen)} | {chars:,.0f} |"
        )
    for kind in ("read", "grep", "edit", "shell"):
        for label, lo, hi in (("first half", 1, n // 2), ("second half", n // 2 + 1, n)):
            chosen = [t for t in results if t.kind == kind and lo <= t.number <= hi]
            if chosen:
                rows.append(
                    f"| {kind} turns, {label} ({len(chosen)}) | {_ms([t.wall for t in chosen])} | "
                    f"{_ms([t.model for t in chosen])} | {_ms([t.overhead for t in chosen])} | {_split(chosen)} | "
                    f"{statistics.median(t.prompt_chars for t in chosen):,.0f} |"
                )
    turn_requests = facts["requests"] - facts["summary_requests"]
    failed = [t.number for t in results if t.stop_reason != "end_turn" or t.tool_status != "completed"]
    rss_at = {k: by_number[k].rss_kb for k in (1, 50, n) if k in by_number}
    rows += [
        "",
        "| figure | value |",
        "|---|---:|",
        f"| peak RSS, term2 process tree (MB, 20 ms samples) | {facts['tree_peak_kb'] / 1024:.1f} |",
        f"| peak RSS, term2 process alone (VmHWM, MB) | {facts['term2_hwm_kb'] / 1024:.1f} |",
        "| RSS of the tree after turn "
        + ", ".join(str(k) for k in rss_at)
        + " (MB) | "
        + " / ".join(f"{v / 1024:.1f}" for v in rss_at.values())
        + " |",
        f"| model requests: turn requests | {turn_requests} |",
        f"| model requests: compaction summaries | {facts['summary_requests']} |",
        f"| model requests refused (over {facts['prompt_chars_limit']:,} chars, or a rule) | {facts['refused']} |",
        f"| model requests outside a turn | {facts['between_turns']} |",
        "| `compaction_update` by status | "
        + ", ".join(f"{k} {v}" for k, v in sorted(facts["compactions"].items()))
        + " |",
        f"| permission requests answered | {facts['permission_requests']} |",
        f"| turns not ending `end_turn` with a completed tool | {len(failed)}{f' {failed[:10]}' if failed else ''} |",
        f"| store on disk at the end (TERM2_HOME, KB) | {facts['store_bytes'] / 1024:.0f} |",
    ]
    return "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=64_000, help="declared context window (tokens)")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--nagle", action="store_true", help="leave Nagle on in the fake (its default)")
    args = parser.parse_args()
    started = time.monotonic()
    results, facts = run(args.turns, args.window, args.nagle)
    text = table(results, facts, args.window)
    nagle = "on (the fake's default)" if args.nagle else "off (TCP_NODELAY)"
    text += f"\n{args.turns} turns in {time.monotonic() - started:.0f} s; Nagle in the fake: {nagle}.\n"
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
