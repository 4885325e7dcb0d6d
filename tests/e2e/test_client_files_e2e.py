"""Issue 19 item 3 end to end: reads and edits through the editor's buffers, over a real `term2 acp`.

The test plays an editor that advertises `fs.readTextFile` and `fs.writeTextFile` (ACP v1) and serves
them from in-memory buffers that differ from the disk, as an editor's unsaved text does. What the
model saw is read from the fake LLM's recorded requests; what reached the editor, from its own log.
Every line term2 wrote is validated against the official v1 schema when each process closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e import test_tools_e2e as tools
from tests.fakes.client_files import line_range
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, ClientError, ClientMethod, Message

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}
RESOURCE_NOT_FOUND = -32002


class Editor:
    """Buffers by absolute path; paths in `refuse` are answered with an error, as outside a project."""

    def __init__(self) -> None:
        self.buffers: dict[str, str] = {}
        self.refuse: set[str] = set()
        self.requests: list[tuple[str, Message]] = []
        self._lock = threading.Lock()

    def methods(self) -> dict[str, ClientMethod]:
        return {"fs/read_text_file": self._read, "fs/write_text_file": self._write}

    def _read(self, params: Message) -> Message:
        with self._lock:
            self.requests.append(("fs/read_text_file", params))
            path = params["path"]
            if path in self.refuse or path not in self.buffers:
                raise ClientError(RESOURCE_NOT_FOUND, f"Resource not found: {path}")
            return {"content": line_range(self.buffers[path], params.get("line"), params.get("limit"))}

    def _write(self, params: Message) -> Message:
        with self._lock:
            self.requests.append(("fs/write_text_file", params))
            if params["path"] in self.refuse:
                raise ClientError(-32603, "invalid path")
            self.buffers[params["path"]] = params["content"]
            return {}

    def asked(self, method: str, path: Path | str | None = None) -> list[Message]:
        with self._lock:
            return [p for m, p in self.requests if m == method and (path is None or p["path"] == str(path))]


@contextlib.contextmanager
def _editor_agent(base: Path, version: int, capabilities: Message | None) -> Iterator[tuple[tools.Agent, Editor]]:
    root = base / "project"
    root.mkdir(exist_ok=True)
    editor = Editor()
    with start_fake_llm() as llm:
        answers = tools.Answers()
        proc = AcpProcess(base, env=llm_env(llm), permission=answers, client_methods=editor.methods())
        agent = tools.Agent(proc, llm, answers, base, root)
        try:
            if version == 1:
                proc.initialize(1, capabilities)
            else:
                proc.initialize(2)
            tools._warm_up(agent)
            yield agent, editor
        finally:
            if proc.proc.poll() is None:
                proc.close()
                proc.validate_schemas()
            proc.kill()


@pytest.fixture(scope="module")
def fs_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[tools.Agent, Editor]]:
    with _editor_agent(tmp_path_factory.mktemp("fs"), 1, FS) as started:
        yield started


@pytest.fixture
def with_fs(fs_process: tuple[tools.Agent, Editor]) -> Iterator[tuple[tools.Agent, Editor]]:
    """The shared v1 process whose client serves files; the model's script and the policy reset after."""
    yield fs_process
    agent, _editor = fs_process
    agent.llm.state.reset()
    agent.answers.policy = None


def results_seen(agent: tools.Agent) -> list[str]:
    """The tool results in the model's latest request, in order."""
    sent = agent.llm.requests[-1].body["messages"]
    return [m["content"] for m in sent if m["role"] == "tool"]


def provider_saw(agent: tools.Agent, text: str) -> bool:
    return any(text in json.dumps(r.body) for r in agent.llm.requests)


def canonical(path: Path) -> str:
    return os.path.realpath(path)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# --- reads and edits go through the editor -----------------------------------------------


def test_the_model_sees_the_editors_unsaved_text_not_the_disks(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "unsaved.py"
    target.write_text("on_disk = 1\n")
    editor.buffers[canonical(target)] = "in_buffer = 2\nsecond = 3\n"
    sid = agent.session()
    done = tools.only_call(agent.turn(sid, tools.read_call(target)))
    assert done["status"] == "completed"
    assert results_seen(agent)[-1] == "     1\tin_buffer = 2\n     2\tsecond = 3\n"  # read_file's own shape
    assert not provider_saw(agent, "on_disk")
    [asked] = editor.asked("fs/read_text_file", canonical(target))
    assert asked["sessionId"] == sid and asked["line"] == 1 and asked["limit"] >= 1


def test_a_read_range_is_numbered_from_its_first_line(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "ranged.txt"
    target.write_text("disk\n" * 10)
    editor.buffers[canonical(target)] = "".join(f"buffer line {n}\n" for n in range(1, 11))
    sid = agent.session()
    agent.turn(sid, call("read_file", path=str(target), offset=4, limit=2))
    assert results_seen(agent)[-1] == "     4\tbuffer line 4\n     5\tbuffer line 5\n"
    [asked] = editor.asked("fs/read_text_file", canonical(target))
    assert (asked["line"], asked["limit"]) == (4, 2)


def test_an_edit_arrives_as_the_editors_write_and_the_disk_is_untouched(
    with_fs: tuple[tools.Agent, Editor],
) -> None:
    agent, editor = with_fs
    target = agent.root / "edited.py"
    target.write_text("x = 1\n")
    editor.buffers[canonical(target)] = "x = 1\ny = 2\n"  # the user's unsaved line
    sid = agent.session()
    done = tools.only_call(agent.turn(sid, tools.edit_call(target, "y = 2", "y = 3")))
    assert done["status"] == "completed", done
    [written] = editor.asked("fs/write_text_file", canonical(target))
    assert written == {"sessionId": sid, "path": canonical(target), "content": "x = 1\ny = 3\n"}
    assert target.read_text() == "x = 1\n"
    assert "-y = 2\n+y = 3" in results_seen(agent)[-1]  # the patch, against the buffer's text


def test_a_new_file_is_written_by_the_editor(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "fresh" / "made.txt"
    sid = agent.session()
    done = tools.only_call(agent.turn(sid, tools.write_call(target, "hello\n")))
    assert done["status"] == "completed", done
    assert editor.asked("fs/write_text_file", canonical(agent.root) + "/fresh/made.txt")[0]["content"] == "hello\n"
    assert not target.exists()
    assert results_seen(agent)[-1].startswith(f"Created {canonical(agent.root)}/fresh/made.txt")


def test_a_near_miss_hint_comes_from_the_buffer(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "hinted.py"
    target.write_text("nothing here\n")
    editor.buffers[canonical(target)] = "def compute(a, b):\n    return a + b\n"
    sid = agent.session()
    missed = tools.only_call(agent.turn(sid, tools.edit_call(target, "def compute(a,b):", "def f(a, b):")))
    assert missed["status"] == "failed"
    assert "def compute(a, b):" in results_seen(agent)[-1]
    assert not editor.asked("fs/write_text_file", canonical(target))


# --- refusals fall back to the disk ----------------------------------------------------------


def test_an_editor_error_falls_back_to_the_disk_and_the_turn_goes_on(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "refused.txt"
    target.write_text("from the disk\n")
    editor.buffers[canonical(target)] = "never shown\n"
    editor.refuse.add(canonical(target))
    sid = agent.session()
    read = tools.only_call(agent.turn(sid, tools.read_call(target)))
    assert read["status"] == "completed"
    assert results_seen(agent)[-1] == "     1\tfrom the disk\n"
    edited = tools.only_call(agent.turn(sid, tools.edit_call(target, "from the disk", "edited on disk")))
    assert edited["status"] == "completed", edited
    assert target.read_text() == "edited on disk\n"
    assert len(editor.asked("fs/write_text_file", canonical(target))) == 1  # asked, refused, then the disk
    log = agent.proc.stderr()
    assert "term2 reads the disk" in log and "term2 writes the disk" in log


# --- the rules stay in front ------------------------------------------------------------------


def test_outside_the_root_is_asked_first_and_only_then_reaches_the_editor(
    with_fs: tuple[tools.Agent, Editor],
) -> None:
    agent, editor = with_fs
    target = agent.outside() / "notes.txt"
    target.write_text("outside disk\n")
    editor.buffers[canonical(target)] = "outside buffer\n"
    sid = agent.session()
    before = agent.asked()
    rejected = tools.only_call(agent.turn(sid, tools.read_call(target), policy=tools.select("reject")))
    assert rejected["status"] == "failed" and agent.asked() == before + 1
    assert not editor.asked("fs/read_text_file", canonical(target))
    allowed = tools.only_call(agent.turn(sid, tools.read_call(target), policy=tools.select("allow-once")))
    assert allowed["status"] == "completed"
    assert results_seen(agent)[-1] == "     1\toutside buffer\n"
    order = [m.get("method") for who, m in agent.proc.transcript if who == "agent" and "id" in m and "method" in m]
    last_ask = len(order) - 1 - order[::-1].index("session/request_permission")
    assert "fs/read_text_file" in order[last_ask:], "the editor was asked only after the user allowed it"


def test_a_secret_file_never_reaches_the_editor_without_approval(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    env = agent.root / ".env"
    env.write_text("API_KEY=disk-s3cr3t-9f\n")
    editor.buffers[canonical(env)] = "API_KEY=buf-s3cr3t-9f\n"
    sid = agent.session()
    for probe in (tools.read_call(env), tools.edit_call(env, "API_KEY=guess", "API_KEY=x")):
        failed = tools.only_call(agent.turn(sid, probe, policy=tools.select("reject")))
        assert failed["status"] == "failed"
    assert not editor.asked("fs/read_text_file", canonical(env))
    assert not editor.asked("fs/write_text_file", canonical(env))
    assert not provider_saw(agent, "s3cr3t-9f")
    allowed = tools.only_call(agent.turn(sid, tools.read_call(env), policy=tools.select("allow-once")))
    assert allowed["status"] == "completed" and len(editor.asked("fs/read_text_file", canonical(env))) == 1


def test_run_code_nested_calls_keep_to_the_disk(with_fs: tuple[tools.Agent, Editor]) -> None:
    agent, editor = with_fs
    target = agent.root / "nested.txt"
    target.write_text("nested disk\n")
    editor.buffers[canonical(target)] = "nested buffer\n"
    sid = agent.session()
    program = (
        "print(tools.read_file(path='nested.txt'))\ntools.write_file(path='nested.txt', content='by program\\n')\n"
    )
    calls = tools.tool_calls(agent.turn(sid, call("run_code", code=program), policy=tools.select("allow-once")))
    assert len(calls) == 3 and all(c["status"] == "completed" for c in calls.values()), calls
    assert "nested disk" in results_seen(agent)[-1]
    assert target.read_text() == "by program\n"
    assert not editor.asked("fs/read_text_file", canonical(target))
    assert not editor.asked("fs/write_text_file", canonical(target))


# --- clients that do not offer it ---------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_without_the_capability_the_disk_serves_everything(tmp_path: Path, version: int) -> None:
    with _editor_agent(tmp_path, version, None) as (agent, editor):
        target = agent.root / "plain.txt"
        target.write_text("disk text\n")
        editor.buffers[canonical(target)] = "buffer text\n"
        sid = agent.session()
        agent.turn(sid, tools.read_call(target))
        assert results_seen(agent)[-1] == "     1\tdisk text\n"
        done = tools.only_call(agent.turn(sid, tools.edit_call(target, "disk text", "changed")))
        assert done["status"] == "completed"
        assert target.read_text() == "changed\n"
        assert editor.requests == []
