"""Issue 30 items 1-2 end to end: no path term2 hands the editor is redirected by a command running beside it.

One real `term2 acp` (ACP v1) whose client serves `fs/read_text_file` and `fs/write_text_file` the
way an editor does: by opening the path string it is sent, following symlinks. Session A runs an
approved `run_shell` command in the real bwrap sandbox that keeps swapping the workspace's folder
`d` with a symlink to a folder outside (renameat2 RENAME_EXCHANGE, so `d` is always one or the
other). Session B, same workspace, has its model write and read `d/...`, which asks nothing.

The worst timing is made certain rather than hoped for: when the client receives a request on
`d/...` while the command runs, it cues the command (a file in the workspace), which swaps `d` for
the link and says so before the client opens the path, and swaps it back once the client is done.
Before ADR 0038, every request that got past term2's first walk therefore landed outside: new files
appeared there, an outside file was overwritten and its old text reached the model in the patch,
and the outside secret was read. Now the editor is not asked at all while the command runs (the
disk, by descriptors, serves the calls), and it is asked again once the command has ended.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e import test_tools_e2e as tools
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, ClientError, ClientMethod, Message

pytestmark = pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_shell needs /usr/bin/bwrap")

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}
RESOURCE_NOT_FOUND = -32002
ROUNDS = 8
SAFETY_S = 120.0  # only ever reached when something is broken: no assertion depends on it

SWAPPER = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)

def exchange():  # d <-> d.link in one step: d is always either the folder or the link outside
    if libc.renameat2(-100, b"d", -100, b"d.link", 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")

open(".ctl/started", "w").close()
while not os.path.exists(".ctl/stop"):
    if os.path.exists(".ctl/hold"):  # the editor got a request on d/...: d is the link while it acts
        exchange()
        open(".ctl/held", "w").close()
        while os.path.exists(".ctl/hold"):
            time.sleep(0.0005)
        exchange()
        os.unlink(".ctl/held")
    else:
        exchange()
        exchange()
        time.sleep(0.001)
"""


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.002)


class FollowingEditor:
    """Serves fs/* from the disk by path string, following symlinks, as an editor opens files.

    While `racing`, a request under `d/` first cues the sandboxed command to swap `d` for the link.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ctl = root / ".ctl"
        self.racing = False
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def methods(self) -> dict[str, ClientMethod]:
        return {"fs/read_text_file": self._read, "fs/write_text_file": self._write}

    @contextlib.contextmanager
    def _worst_timing(self, path: str) -> Iterator[None]:
        if not (self.racing and path.startswith(f"{os.path.realpath(self.root)}/d/")):
            yield
            return
        (self.ctl / "hold").touch()
        _until((self.ctl / "held").exists, "the command swapped d for the link")
        try:
            yield
        finally:
            (self.ctl / "hold").unlink()
            _until(lambda: not (self.ctl / "held").exists(), "the command swapped d back")

    def _read(self, params: Message) -> Message:
        with self._lock:
            self.requests.append(("read", params["path"]))
        with self._worst_timing(params["path"]):
            try:
                return {"content": Path(params["path"]).read_text()}
            except OSError as err:
                raise ClientError(RESOURCE_NOT_FOUND, f"Resource not found: {err}") from None

    def _write(self, params: Message) -> Message:
        with self._lock:
            self.requests.append(("write", params["path"]))
        with self._worst_timing(params["path"]):
            try:
                Path(params["path"]).write_text(params["content"])
            except OSError as err:
                raise ClientError(-32603, f"cannot write: {err}") from None
            return {}

    def asked_under(self, folder: str) -> list[tuple[str, str]]:
        with self._lock:
            return [(kind, path) for kind, path in self.requests if path.startswith(folder)]


def _process(base: Path, llm: Any, answers: tools.Answers, editor: FollowingEditor) -> AcpProcess:
    proc = AcpProcess(base, env=llm_env(llm), permission=answers, client_methods=editor.methods())
    proc.initialize(1, FS)
    return proc


@contextlib.contextmanager
def _agents(base: Path, count: int) -> Iterator[tuple[list[tools.Agent], FollowingEditor]]:
    """`count` term2 processes (own homes: nothing shared but the user) on one workspace, one fake model."""
    root = base / "project"
    root.mkdir()
    editor = FollowingEditor(root)
    with start_fake_llm() as llm:
        answers = tools.Answers()
        agents: list[tools.Agent] = []
        try:
            for n in range(count):
                home = base / f"proc-{n}"
                home.mkdir()
                agents.append(tools.Agent(_process(home, llm, answers, editor), llm, answers, base, root))
                tools._warm_up(agents[-1])
            yield agents, editor
        finally:
            (root / ".ctl" / "stop").touch()
            for agent in agents:
                if agent.proc.proc.poll() is None:
                    agent.proc.close()
                    agent.proc.validate_schemas()
                agent.proc.kill()


def _response(agent: tools.Agent, request_id: int) -> Message:
    """The answer to a request whose messages another call's collection may have taken from the inbox."""

    def answered() -> Message | None:
        for who, message in list(agent.proc.transcript):
            if who == "agent" and message.get("id") == request_id and "method" not in message:
                return dict(message)
        return None

    _until(lambda: answered() is not None, f"an answer to request {request_id}")
    found = answered()
    assert found is not None
    return found


def _workspace(root: Path, outside: Path) -> dict[str, str]:
    """`d` inside, `d.link` to the outside folder, the racer's program; what the outside folder holds."""
    (outside / "existing.txt").write_text("OUTSIDE-ORIGINAL-7c1\n")
    (outside / "secret.txt").write_text("OUTSIDE-SECRET-4e9\n")
    (root / "d").mkdir()
    (root / "d" / "existing.txt").write_text("inside original\n")
    (root / "d" / "secret.txt").write_text("inside secret\n")
    (root / "d.link").symlink_to(outside, target_is_directory=True)
    (root / ".ctl").mkdir()
    (root / ".ctl" / "swap.py").write_text(SWAPPER)
    return {p.name: p.read_text() for p in outside.iterdir()}


RACERS = {
    "run_shell": tools.shell_call("python3 .ctl/swap.py", timeout=600),
    "run_code": {"name": "run_code", "arguments": {"code": "exec(open('.ctl/swap.py').read())", "timeout": 600}},
}
CALLS = {
    "write": lambda n: [
        tools.write_call(f"d/new-{n}.txt", "planted\n"),
        tools.write_call("d/existing.txt", f"overwritten {n}\n"),
    ],
    "read": lambda n: [tools.read_call("d/secret.txt")],
}


def _race(racing: tools.Agent, model: tools.Agent, editor: FollowingEditor, racer: str, kind: str) -> None:
    root, outside = model.root, model.outside()
    before = _workspace(root, outside)
    command = racing.start_prompt(racing.session(), RACERS[racer], policy=tools.select("allow-once"))
    _until((root / ".ctl" / "started").exists, "the sandboxed racer started")
    editor.racing = True

    sid = model.session()
    # A call resolved while `d` is the link names an outside path, and asks the user: who says no here.
    model.turn(sid, *[c for n in range(ROUNDS) for c in CALLS[kind](n)], policy=tools.select("reject"), timeout=600)

    during = editor.asked_under(f"{os.path.realpath(root)}/d/")
    (root / ".ctl" / "stop").touch()
    assert "error" not in _response(racing, command)
    editor.racing = False

    assert {p.name: p.read_text() for p in outside.iterdir()} == before, "the editor acted outside"
    seen = json.dumps([r.body for r in model.llm.requests])
    assert "OUTSIDE-" not in seen, "outside text reached the model"
    assert during == [], "the editor was asked while a sandboxed program could move the path"

    model.turn(sid, tools.read_call("d/secret.txt"))  # the racer ended: the editor serves again
    assert editor.asked_under(f"{os.path.realpath(root)}/d/secret.txt")
    assert "inside secret" in json.dumps(model.llm.requests[-1].body)


@pytest.mark.parametrize("kind", ["write", "read"])
@pytest.mark.parametrize("racer", ["run_shell", "run_code"])
def test_a_program_in_another_session_never_redirects_the_editor(tmp_path: Path, racer: str, kind: str) -> None:
    with _agents(tmp_path, 1) as ([agent], editor):
        _race(agent, agent, editor, racer, kind)


@pytest.mark.parametrize("kind", ["write", "read"])
def test_a_command_in_another_term2_process_never_redirects_the_editor(tmp_path: Path, kind: str) -> None:
    with _agents(tmp_path, 2) as ([racing, model], editor):
        _race(racing, model, editor, "run_shell", kind)
