"""A searched file swapped for a link to `.env` while grep runs, over a real `term2 acp` (issue 30, items 3-4).

grep judged `x.txt`, then rg opened the path `x.txt` itself and followed
whatever was there by then: with a sandboxed command (which cannot read
`.env`, it is masked there) exchanging `x.txt` and a link to `.env` in a tight
loop, some greps returned `x.txt:1:TOKEN=<the secret>`. Here the command runs
in a second session of the same process (item 3), or the swapping is a
thread of the `run_code` program whose own nested greps race it (item 4).
No result, update or model request may carry the secret, however the swaps
fall; some greps must have read the real file, so the race was run. Both
tests returned the secret on the code before grep handed rg the descriptor it
opened (and the loops are long enough for that to happen every time).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import test_run_code_e2e as rc
from tests.e2e import test_tools_e2e as tools

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="the sandbox needs /usr/bin/bwrap")

agent, _clean_script = tools.module_agent("search-swaps")

GREPS_PER_TURN = 40
TURNS = 10  # 400 greps: the old code leaked in the first turn or two of every run
PUBLIC = "TOKEN=public-value"

# Exchanges x.txt (a file) and x.link (a link to .env) atomically, as fast as it can, until told to stop.
SWAPPER = """python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open("{folder}/swapping", "w").close()
while not os.path.exists("{folder}/stop"):
    libc.renameat2(-100, b"{folder}/x.txt", -100, b"{folder}/x.link", 2)
'"""


def _plant(folder: os.PathLike[str] | str) -> str:
    """x.txt with a public line, .env with a secret one, and x.link pointing at .env; the secret."""
    secret = f"sk-swap-{uuid.uuid4().hex}"
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, ".env"), "w") as f:
        f.write(f"TOKEN={secret}\n")
    with open(os.path.join(folder, "x.txt"), "w") as f:
        f.write(f"{PUBLIC}\n")
    os.symlink(".env", os.path.join(folder, "x.link"))
    return secret


def _wait_for(marker: Path) -> None:
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline, "the swapping command never started"
        time.sleep(0.05)


def _nowhere(secret: str, messages: object, requests: list[object]) -> None:
    assert secret not in json.dumps(messages), "a grep result carried the secret"
    assert not any(secret in json.dumps(body) for body in requests), "the model was sent the secret"


def test_a_second_sessions_command_swapping_the_file_for_a_link_to_env_never_leaks_it(agent: tools.Agent) -> None:
    folder = agent.root / f"swap-{uuid.uuid4().hex[:8]}"
    secret = _plant(folder)
    swapping = agent.session()
    agent.start_prompt(swapping, tools.shell_call(SWAPPER.format(folder=folder)), policy=tools.select("allow-once"))
    searching = agent.session()
    seen = 0
    try:
        agent.proc.collect_until(lambda m: m.get("params", {}).get("update", {}).get("status") == "in_progress", 60)
        _wait_for(folder / "swapping")
        path = os.path.relpath(folder / "x.txt", agent.root)
        for _ in range(TURNS):
            calls = [{"name": "grep", "arguments": {"pattern": "TOKEN", "path": path}}] * GREPS_PER_TURN
            # x.txt resolved while it is the link names .env: that read asks, and is refused
            messages = agent.turn(searching, *calls, policy=tools.select("reject"))
            _nowhere(secret, messages, [r.body for r in agent.llm.requests])
            seen += sum(PUBLIC in tools.text_of(c) for c in tools.tool_calls(messages).values())
    finally:
        (folder / "stop").touch()
    tools.until_idle(agent, 60)
    assert seen > 0, "no grep ever read x.txt: the race was not run"


def test_folder_greps_through_a_kept_view_never_read_a_env_made_after_it(agent: tools.Agent) -> None:
    """rg lists x.txt in the folder, then opens the name: the swap lands in between. The .env is made
    after the kept view (the first grep made it), so no mask made with the view could cover it."""
    folder = agent.root / f"walk-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "x.txt").write_text(f"{PUBLIC}\n")
    searching = agent.session()
    path = os.path.relpath(folder, agent.root)
    grep = {"name": "grep", "arguments": {"pattern": "TOKEN", "path": path}}
    first = agent.turn(searching, grep)
    assert PUBLIC in tools.text_of(tools.only_call(first)), "the first grep did not run"
    (folder / "x.txt").unlink()
    secret = _plant(folder)  # now: .env, x.txt, x.link -> .env
    swapping = agent.session()
    agent.start_prompt(swapping, tools.shell_call(SWAPPER.format(folder=folder)), policy=tools.select("allow-once"))
    seen = 0
    try:
        _wait_for(folder / "swapping")
        for _ in range(TURNS):
            messages = agent.turn(searching, *[grep] * GREPS_PER_TURN)
            _nowhere(secret, messages, [r.body for r in agent.llm.requests])
            seen += sum(PUBLIC in tools.text_of(c) for c in tools.tool_calls(messages).values())
    finally:
        (folder / "stop").touch()
    tools.until_idle(agent, 60)
    assert seen > 0, "no grep ever read x.txt: the race was not run"


RACING_PROGRAM = """
import ctypes, threading
libc = ctypes.CDLL(None, use_errno=True)
stop = threading.Event()

def swap():
    while not stop.is_set():
        libc.renameat2(-100, b"{folder}/x.txt", -100, b"{folder}/x.link", 2)

threading.Thread(target=swap, daemon=True).start()
seen = 0
for attempt in range({greps}):
    try:
        found = str(tools.grep(pattern="TOKEN", path="{path}"))
    except ToolError:
        continue
    seen += "{public}" in found
    if "sk-swap" in found:
        print("LEAKED", found)
stop.set()
print("seen", seen)
"""


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Agent]:
    with rc._agent(tmp_path_factory.mktemp("swap-run-code"), 2) as started:
        rc._warm_up(started)
        yield started


def test_a_run_code_programs_own_nested_greps_racing_its_swaps_never_read_env(runner: rc.Agent) -> None:
    folder = runner.root / f"swap-{uuid.uuid4().hex[:8]}"
    secret = _plant(folder)
    path = os.path.relpath(folder / "x.txt", runner.root)
    program = RACING_PROGRAM.format(folder=folder, greps=300, path=path, public=PUBLIC)

    turn = runner.run(runner.session(), program, nested=rc.select("reject"))

    text = turn.result_text()
    assert "LEAKED" not in text, text[-2000:]
    _nowhere(secret, turn.messages, [r.body for r in runner.llm.requests])
    assert "seen " in text and "seen 0" not in text, text[-2000:]
