"""The file-tool attacks end to end, over a real `term2 acp` (ACP v2) and the fake LLM.

One attack per class (races, special files, secrets in searches, git plants,
malformed paths): each turn must end normally, and nothing may leak, block,
or be written where the user did not allow. The harnesses are the ones of
test_tools_e2e.py (direct tool calls) and test_run_code_e2e.py (a program in
the sandbox racing its own nested calls); each gets its own process here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import test_run_code_e2e as rc
from tests.e2e import test_tools_e2e as tools
from tests.support.acp_process import updates

agent, _clean_script = tools.module_agent("attacks")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_read_file_on_a_fifo_fails_at_once_and_the_turn_goes_on(agent: tools.Agent) -> None:
    os.mkfifo(agent.root / "pipe")
    messages = agent.turn(agent.session(), call("read_file", path="pipe"))
    done = tools.only_call(messages)
    assert done["status"] == "failed"
    assert "pipe is a FIFO, not a regular file; it is not read" in tools.text_of(done)
    assert tools.idle(messages)["stopReason"] == "end_turn"


def test_grep_over_a_root_with_a_secret_never_carries_it(agent: tools.Agent) -> None:
    (agent.root / ".env").write_text("API_KEY=sk-e2e-hunter2\n")
    (agent.root / "config.py").write_text("key = 'sk-e2e-public'\n")
    messages = agent.turn(agent.session(), call("grep", pattern="sk-e2e"))
    done = tools.only_call(messages)
    assert done["status"] == "completed"
    assert "config.py:1:" in tools.text_of(done) and "secret files (.env) skipped" in tools.text_of(done)
    assert "hunter2" not in json.dumps(messages)
    assert not any("hunter2" in json.dumps(r.body) for r in agent.llm.requests)


def test_writing_the_last_piece_of_a_git_directory_asks_and_a_rejection_writes_nothing(agent: tools.Agent) -> None:
    planted = agent.root / "plant"
    (planted / "objects").mkdir(parents=True)
    (planted / "refs").mkdir()
    before = agent.asked()
    head = call("write_file", path="plant/HEAD", content="ref: refs/heads/main\n")
    messages = agent.turn(agent.session(), head, policy=tools.select("reject"))
    assert agent.asked() == before + 1
    request = agent.proc.permission_requests[-1]["params"]
    assert "a git directory" in request.get("description", "")
    assert tools.only_call(messages)["status"] == "failed"
    assert not (planted / "HEAD").exists()


def test_a_path_of_thousands_of_components_fails_the_call_not_the_turn(agent: tools.Agent) -> None:
    messages = agent.turn(agent.session(), call("read_file", path="a/" * 5000))
    done = tools.only_call(messages)
    assert done["status"] == "failed"
    assert "invalid arguments for read_file" in tools.text_of(done)
    assert tools.idle(messages)["stopReason"] == "end_turn"


# --- a run_code program racing its own nested writes ------------------------------


RACE = """
import ctypes, threading, time
libc = ctypes.CDLL(None, use_errno=True)
sub, link = "{root}/race/sub", "{root}/race/sub.link"
stop = threading.Event()

def swap():
    while not stop.is_set():  # sub is a folder, then a symlink outside, then a folder again
        libc.renameat2(-100, sub.encode(), -100, link.encode(), 2)
        time.sleep(0.001)

threading.Thread(target=swap, daemon=True).start()
refused = 0
for attempt in range(40):
    try:
        tools.write_file(path=f"race/sub/made{{attempt}}/new.txt", content="x")
    except ToolError:
        refused += 1
stop.set()
print("refused", refused)
"""


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[rc.Agent]:
    with rc._agent(tmp_path_factory.mktemp("race"), 2) as started:
        rc._warm_up(started)
        yield started


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_code needs /usr/bin/bwrap")
def test_a_program_swapping_a_folder_for_a_symlink_never_gets_a_write_outside(runner: rc.Agent) -> None:
    outside = runner.outside()
    (runner.root / "race" / "sub").mkdir(parents=True)
    (runner.root / "race" / "sub.link").symlink_to(outside)

    turn = runner.run(runner.session(), RACE.format(root=runner.root), nested=rc.select("reject"))

    assert list(Path(outside).iterdir()) == []
    assert "refused" in turn.result_text()
    assert [u for u in updates(turn.messages, "state_update") if u["state"] == "idle"][-1]["stopReason"] == "end_turn"
