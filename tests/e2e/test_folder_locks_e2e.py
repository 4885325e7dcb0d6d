"""The folder locks of ADR 0038 as term2 processes leave and use them, through the real `term2 acp`.

(a) What the lock folder costs: it holds one file however many folders the editor was asked about
    and commands ran on (it held three per folder, never removed, in the home where the user has no
    runtime folder).
(b) A term2 process that found the lock folder unusable once must not run its programs unlocked
    afterwards: another term2 process of the user, finding the folder usable, asks the editor beside
    them. Its commands fail to start instead (fail closed), until the folder is usable; so do those of
    a process whose lock folder sits where another user could move it away.
(c) A command arriving in the middle of an edit through the editor waits for the whole edit, which
    neither fails nor is left half made in the editor's buffers.

Each process gets its own runtime folder through XDG_RUNTIME_DIR (there is no /run/user/<uid> on the
test machines), so nothing here meets the locks of other tests.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from term2.adapters.locks.flock_folders import FlockFolderLocks
from term2.app.tools.editor_turn import way_of
from tests.conftest import llm_env
from tests.e2e import test_editor_race_e2e as race
from tests.e2e import test_tools_e2e as tools
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, ClientMethod, Message

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_shell needs /usr/bin/bwrap"),
    pytest.mark.skipif(os.path.exists(f"/run/user/{os.getuid()}"), reason="term2 would use /run/user/<uid>"),
]


@contextlib.contextmanager
def _agents(
    base: Path, count: int, runtime_owner: int | None = None
) -> Iterator[tuple[list[tools.Agent], race.FollowingEditor, Path]]:
    """`count` term2 processes on one workspace sharing one runtime folder (so one lock folder)."""
    root = base / "project"
    root.mkdir()
    runtime = base / "runtime"
    runtime.mkdir(mode=0o700)
    if runtime_owner is not None:
        os.chown(runtime, runtime_owner, runtime_owner)
    editor = race.FollowingEditor(root)
    with start_fake_llm() as llm:
        answers = tools.Answers()
        agents: list[tools.Agent] = []
        try:
            for n in range(count):
                home = base / f"proc-{n}"
                home.mkdir()
                env = {**llm_env(llm), "XDG_RUNTIME_DIR": str(runtime)}
                proc = AcpProcess(home, env=env, permission=answers, client_methods=editor.methods())
                proc.initialize(1, race.FS)
                agents.append(tools.Agent(proc, llm, answers, base, root))
                tools._warm_up(agents[-1])
            yield agents, editor, runtime / "term2-locks"
        finally:
            with contextlib.suppress(FileNotFoundError):
                (root / ".ctl" / "stop").touch()
            for agent in agents:
                if agent.proc.proc.poll() is None:
                    agent.proc.close()
                    agent.proc.validate_schemas()
                agent.proc.kill()


def test_the_lock_folder_holds_one_file_whatever_was_used(tmp_path: Path) -> None:
    with _agents(tmp_path, 1) as ([agent], editor, locks):
        for n in range(12):
            folder = agent.root / f"f{n}" / "deeper"
            folder.mkdir(parents=True)
            (folder / "a.txt").write_text(f"text {n}\n")
        sid = agent.session()
        agent.turn(sid, *[tools.read_call(f"f{n}/deeper/a.txt") for n in range(12)])
        agent.turn(sid, tools.shell_call("true"), policy=tools.select("allow-once"))
        assert len(editor.asked_under(os.path.realpath(agent.root))) == 12, "the editor served the reads"
        assert len(list(locks.iterdir())) == 1, sorted(p.name for p in locks.iterdir())[:9]


def test_a_process_that_found_the_lock_folder_unusable_runs_no_program_unlocked(tmp_path: Path) -> None:
    with _agents(tmp_path, 2) as ([racing, model], editor, locks):
        locks.mkdir(mode=0o755)
        locks.chmod(0o755)  # e.g. made by hand; any error opening it did the same (EMFILE, ENOMEM)
        root, outside = model.root, model.outside()
        before = race._workspace(root, outside)
        started = root / ".ctl" / "started"
        command = racing.start_prompt(racing.session(), race.RACERS["run_shell"], policy=tools.select("allow-once"))
        race._until(lambda: started.exists() or _answered(racing, command), "the command started or failed to")
        locks.chmod(0o700)  # usable again, for any process that looks now
        editor.racing = started.exists()

        sid = model.session()
        calls = [c for n in range(race.ROUNDS) for k in ("write", "read") for c in race.CALLS[k](n)]
        model.turn(sid, *calls, policy=tools.select("reject"), timeout=600)
        (root / ".ctl" / "stop").touch()
        answer = race._response(racing, command)
        editor.racing = False

        assert {p.name: p.read_text() for p in outside.iterdir()} == before, "the editor acted outside"
        assert "OUTSIDE-" not in json.dumps([r.body for r in model.llm.requests]), "outside text reached the model"
        assert not started.exists(), "a command ran without its folder lock"
        assert "error" not in answer
        told = json.dumps([r.body for r in racing.llm.requests])
        assert "lock folder" in told, "the model is told why the command did not run"


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")
def test_a_runtime_folder_another_user_controls_is_not_trusted_with_the_locks(tmp_path: Path) -> None:
    # They could move term2-locks away while a command holds its lock in it: the next editor request would
    # lock a fresh folder that knows of no command (the issue 30 swap attack again).
    with _agents(tmp_path, 1, runtime_owner=54321) as ([agent], editor, locks):
        (agent.root / "d").mkdir()
        (agent.root / "d" / "a.txt").write_text("on the disk\n")
        sid = agent.session()
        agent.turn(sid, tools.shell_call("echo RAN-7f3"), policy=tools.select("allow-once"))
        told = json.dumps(agent.llm.requests[-1].body)
        assert "RAN-7f3" not in told.replace("echo RAN-7f3", ""), "the command ran without a lock anyone can trust"
        assert "another user can move" in told
        agent.turn(sid, tools.read_call("d/a.txt"))
        assert "on the disk" in json.dumps(agent.llm.requests[-1].body)
        assert editor.asked_under(os.path.realpath(agent.root)) == [], "the editor was asked without locks"
        assert not locks.exists() or not any(locks.iterdir())


def _answered(agent: tools.Agent, request_id: int) -> bool:
    return any(
        who == "agent" and message.get("id") == request_id and "method" not in message
        for who, message in list(agent.proc.transcript)
    )


class BufferEditor:
    """An editor with buffers: it reads a buffer where it has one, and writes into buffers without saving.

    A hook in `on_write` runs once, when that path is written, before the answer.
    """

    def __init__(self) -> None:
        self.buffers: dict[str, str] = {}
        self.on_write: dict[str, Any] = {}

    def methods(self) -> dict[str, ClientMethod]:
        return {"fs/read_text_file": self._read, "fs/write_text_file": self._write}

    def _read(self, params: Message) -> Message:
        path = params["path"]
        return {"content": self.buffers[path] if path in self.buffers else Path(path).read_text()}

    def _write(self, params: Message) -> Message:
        self.buffers[params["path"]] = params["content"]
        hook = self.on_write.pop(params["path"], None)
        if hook is not None:
            hook()
        return {}


def test_a_command_arriving_mid_patch_waits_and_the_patch_is_not_left_half_in_the_editor(tmp_path: Path) -> None:
    # One session's apply_patch of two files through the editor; another session's command starts once the
    # first file is in the editor's buffer. The command waited for the patch (ADR 0038), but the second file's
    # own editor turn saw it waiting and failed the patch: "undone" on the disk, while the first file's change
    # stayed in the buffer. Now the patch's requests reuse the turns it holds, and the command runs after it.
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.txt").write_text("a = 1\n")
    (root / "b.txt").write_text("b = 1\n")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    editor = BufferEditor()
    with start_fake_llm() as llm:
        answers = tools.Answers()
        env = {**llm_env(llm), "XDG_RUNTIME_DIR": str(runtime), "TERM2_EDIT_TOOLS": "both"}
        proc = AcpProcess(tmp_path, env=env, permission=answers, client_methods=editor.methods())
        try:
            proc.initialize(1, race.FS)
            agent = tools.Agent(proc, llm, answers, tmp_path, root)
            tools._warm_up(agent)
            commands, patching = agent.session(), agent.session()
            agent.turn(commands, tools.shell_call("true"), policy=tools.select("allow-folder-session"))
            first = os.path.realpath(root / "a.txt")
            started: list[int] = []

            def start_a_command_and_see_it_wait() -> None:
                started.append(agent.start_prompt(commands, tools.shell_call("echo COMMAND-RAN-5d2")))
                way = way_of(first)

                async def command_waits() -> bool:
                    async with FlockFolderLocks(runtime / "term2-locks").editor(way) as held:
                        return not held

                race._until(lambda: anyio.run(command_waits), "the command holds its root's lock, waiting")

            editor.on_write[first] = start_a_command_and_see_it_wait
            patch = (
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a = 1\n+a = 2\n"
                "*** Update File: b.txt\n@@\n-b = 1\n+b = 2\n*** End Patch\n"
            )
            agent.turn(patching, {"name": "apply_patch", "arguments": {"input": patch}}, policy=tools.select("reject"))
            assert started, "the patch wrote its first file through the editor"
            assert "error" not in race._response(agent, started[0])

            told = json.dumps([r.body for r in llm.requests])
            assert "were undone" not in told and "nothing was written" not in told, "the patch failed half made"
            assert editor.buffers == {first: "a = 2\n", os.path.realpath(root / "b.txt"): "b = 2\n"}
            assert "COMMAND-RAN-5d2\\n" in told, "the command ran once the patch was made"
        finally:
            if proc.proc.poll() is None:
                proc.close()
                proc.validate_schemas()
            proc.kill()
