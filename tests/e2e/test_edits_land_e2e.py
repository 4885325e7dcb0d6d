"""Issue 21 end to end: tolerant edits, refusals, multi_edit and apply_patch over a real `term2 acp`.

Two processes: one on a model outside the GPT family (offered edit_file and
multi_edit), one on `openai/gpt-5` (offered apply_patch instead), each
against the fake OpenAI server, which records the tools every request
offered and the tool results the model was sent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import llm_env
from tests.e2e.test_tools_e2e import (
    WARM_UP_TIMEOUT,
    Agent,
    Answers,
    module_agent,
    only_call,
    select,
)
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess

agent, _clean_script = module_agent("edits-land")


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with _gpt_agent(tmp_path_factory.mktemp("edits-gpt")) as started:
        started.turn(started.session(), timeout=WARM_UP_TIMEOUT)
        yield started


@pytest.fixture(autouse=True)
def _clean_gpt(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "gpt" in request.fixturenames:
        started: Agent = request.getfixturevalue("gpt")
        started.llm.state.reset()
        started.answers.policy = None


@contextlib.contextmanager
def _gpt_agent(base: Path) -> Iterator[Agent]:
    root = base / "project"
    root.mkdir()
    with start_fake_llm() as llm:
        answers = Answers()
        proc = AcpProcess(base, env=llm_env(llm, model="openai/gpt-5"), permission=answers)
        try:
            proc.initialize(2)
            yield Agent(proc, llm, answers, base, root)
        finally:
            if proc.proc.poll() is None:
                proc.close()
                proc.validate_schemas()
            proc.kill()


def offered(started: Agent) -> list[str]:
    body = started.llm.requests[-1].body
    return [tool["function"]["name"] for tool in body["tools"]]


def told(started: Agent) -> str:
    """The last tool result the model was sent."""
    messages = started.llm.requests[-1].body["messages"]
    results = [m for m in messages if m.get("role") == "tool"]
    content = results[-1]["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


# --- edit_file and multi_edit -----------------------------------------------------------------


def test_a_tolerant_edit_is_applied_and_says_what_was_forgiven(agent: Agent) -> None:
    target = agent.root / "Makefile"
    target.write_bytes(b"all: app\r\n\tcc -o app main.c\r\n\tstrip app\r\n")
    messages = agent.turn(
        agent.session(),
        call("edit_file", path="Makefile", old_string="all: app\n    cc -o app main.c\n",
             new_string="all: app\n    cc -O2 -o app main.c\n"),
    )  # fmt: skip
    assert target.read_bytes() == b"all: app\r\n\tcc -O2 -o app main.c\r\n\tstrip app\r\n"
    assert only_call(messages)["status"] == "completed"
    text = told(agent)
    assert "did not match exactly; it matched one place after" in text and "tabs" in text
    assert "-\tcc -o app main.c\r\n+\tcc -O2 -o app main.c\r\n" in text
    assert offered(agent)[:7] == ["read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "multi_edit"]
    assert "apply_patch" not in offered(agent)


def test_an_ambiguous_edit_is_refused_with_every_place_named(agent: Agent) -> None:
    target = agent.root / "twice.py"
    original = "def a():\n    return 1\n\ndef b():\n    return 1\n"
    target.write_text(original)
    edit = call("edit_file", path="twice.py", old_string="return 1", new_string="return 2")
    messages = agent.turn(agent.session(), edit)
    assert only_call(messages)["status"] == "failed"
    text = told(agent)
    assert "matches 2 times" in text and "lines 2, 5" in text and "does not guess" in text
    assert target.read_text() == original


def test_a_multi_edit_applies_all_of_its_edits_or_none(agent: Agent) -> None:
    target = agent.root / "config.yaml"
    target.write_text("name: app\nport: 80\nhost: a\n")
    edits = [{"old_string": "port: 80", "new_string": "port: 8080"}, {"old_string": "host: a", "new_string": "host: b"}]
    messages = agent.turn(agent.session(), call("multi_edit", path="config.yaml", edits=edits))
    assert only_call(messages)["status"] == "completed"
    assert target.read_text() == "name: app\nport: 8080\nhost: b\n"
    broken = [{"old_string": "name: app", "new_string": "name: x"}, {"old_string": "absent", "new_string": "y"}]
    messages = agent.turn(agent.session(), call("multi_edit", path="config.yaml", edits=broken))
    assert only_call(messages)["status"] == "failed" and "no edit was applied" in told(agent)
    assert target.read_text() == "name: app\nport: 8080\nhost: b\n"


# --- apply_patch for the GPT family --------------------------------------------------------------


def test_a_gpt_model_is_offered_apply_patch_and_the_prompt_teaches_it(gpt: Agent) -> None:
    gpt.turn(gpt.session())
    names = offered(gpt)
    assert "apply_patch" in names and "edit_file" not in names and "multi_edit" not in names
    system = gpt.llm.requests[-1].body["messages"][0]["content"]
    system = system if isinstance(system, str) else "".join(part.get("text", "") for part in system)
    assert "`apply_patch`" in system and "`edit_file`" not in system


def test_a_patch_with_a_rejected_file_writes_nothing(gpt: Agent) -> None:
    inside = gpt.root / "app.py"
    inside.write_text("def greet():\n    print('Hi')\n")
    outside_folder = gpt.outside()
    outside = outside_folder / "notes.txt"
    outside.write_text("old\n")
    text = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: docs/new.txt",
            "+hello",
            "*** Update File: app.py",
            "@@ def greet():",
            "-    print('Hi')",
            "+    print('Hello')",
            f"*** Update File: {outside}",
            "-old",
            "+new",
            "*** End Patch",
        ]
    )
    messages = gpt.turn(gpt.session(), call("apply_patch", input=text), policy=select("reject"))
    state = only_call(messages)
    assert state["status"] == "failed" and "rejected" in told(gpt)
    [asked] = [m["params"] for m in gpt.proc.permission_requests if str(outside) in m["params"]["title"]]
    assert asked["title"] == f"Allow editing {outside}?"
    assert asked["subject"]["toolCall"]["toolCallId"] == state["toolCallId"]
    assert inside.read_text() == "def greet():\n    print('Hi')\n"
    assert outside.read_text() == "old\n" and not (gpt.root / "docs").exists()

    messages = gpt.turn(gpt.session(), call("apply_patch", input=text), policy=select("allow-once"))
    assert only_call(messages)["status"] == "completed"
    assert inside.read_text() == "def greet():\n    print('Hello')\n"
    assert outside.read_text() == "new\n" and (gpt.root / "docs" / "new.txt").read_text() == "hello\n"


def test_an_edit_grant_covers_later_patches_which_say_only_whether_they_applied(gpt: Agent) -> None:
    """Issue 30.10 for apply_patch: after "Allow edits to this file (session)" the later patches of that file
    apply without a second question, and the model learns only whether they applied, nothing of the file."""
    marker = "marker-c41d-not-for-the-model"
    target = gpt.outside() / "settings.ini"
    target.write_text(f"token = {marker}\nmode = a\nlevel = 1\n")

    def patch(old: str, new: str) -> dict[str, Any]:
        return call(
            "apply_patch", input=f"*** Begin Patch\n*** Update File: {target}\n@@\n-{old}\n+{new}\n*** End Patch"
        )

    sid = gpt.session()
    before = len(gpt.proc.permission_requests)
    first = gpt.turn(sid, patch("mode = a", "mode = b"), policy=select("allow-edit-file-session"))
    assert only_call(first)["status"] == "completed" and len(gpt.proc.permission_requests) == before + 1
    options = {o["optionId"] for o in gpt.proc.permission_requests[-1]["params"]["options"]}
    assert options == {"allow-once", "allow-edit-file-session", "allow-edit-folder-session", "reject"}
    told_back = []
    for old, new in (("mode = b", "mode = c"), ("level = 1", "level = 2")):
        done = only_call(gpt.turn(sid, patch(old, new), policy=select("reject")))
        assert done["status"] == "completed", told(gpt)
        told_back.append(told(gpt))
    assert len(gpt.proc.permission_requests) == before + 1, "the grant covers the later patches"
    assert target.read_text() == f"token = {marker}\nmode = c\nlevel = 2\n"
    missed = only_call(gpt.turn(sid, patch("token = guess", "x"), policy=select("reject")))
    assert missed["status"] == "failed" and len(gpt.proc.permission_requests) == before + 1
    said = told(gpt)
    assert "did not apply" in said and not any(w in said for w in ("nowhere", "closest", "more than once", "hunk 1"))
    assert target.read_text() == f"token = {marker}\nmode = c\nlevel = 2\n"
    assert not any(marker in json.dumps(r.body) for r in gpt.llm.requests), "nothing of the file reached the model"
    assert all(marker not in text for text in told_back)


@pytest.mark.parametrize("where", ["outside", "dotenv"])
def test_an_edit_grant_never_moves_a_file_the_model_may_not_read_where_it_may(gpt: Agent, where: str) -> None:
    """Red team of issue 30.10: an edit grant covers the edits of its file, not a read of it. A patch that
    moves the granted file (`*** Move to:`) to a name inside the workspace would put its text where read_file
    needs no approval; the move must be asked as the read it is (and refused here), so nothing of the file
    ever reaches the model."""
    marker = f"marker-{where}-9b2e-not-for-the-model"
    target = gpt.outside() / "settings.ini" if where == "outside" else gpt.root / ".env"
    target.write_text(f"token = {marker}\nmode = a\n")
    leak = gpt.root / f"leak-{where}.txt"
    sid = gpt.session()
    granted = call(
        "apply_patch", input=f"*** Begin Patch\n*** Update File: {target}\n@@\n-mode = a\n+mode = b\n*** End Patch"
    )
    first = gpt.turn(sid, granted, policy=select("allow-edit-file-session"))
    assert only_call(first)["status"] == "completed"
    asked = len(gpt.proc.permission_requests)
    moved = call("apply_patch", input=f"*** Begin Patch\n*** Update File: {target}\n*** Move to: {leak}\n*** End Patch")
    done = only_call(gpt.turn(sid, moved, policy=select("reject")))
    assert len(gpt.proc.permission_requests) == asked + 1, "the move is asked as a read of the granted file"
    assert gpt.proc.permission_requests[-1]["params"]["title"].startswith("Allow reading")
    assert done["status"] == "failed" and not leak.exists() and marker in target.read_text()
    only_call(gpt.turn(sid, {"name": "read_file", "arguments": {"path": str(leak)}}, policy=select("reject")))
    assert not any(marker in json.dumps(r.body) for r in gpt.llm.requests), "nothing of the file reached the model"


def test_an_added_file_under_an_edit_grant_says_nothing_of_whether_it_existed(gpt: Agent) -> None:
    """Red team of issue 30.10: where the model may not read a folder's files, `*** Add File:` tells it the
    same words whether a file was there or not (write_file already did; a deleted file's absence is hidden
    too), so an edit grant is no oracle for which files exist."""
    folder = gpt.outside()
    (folder / "anchor.txt").write_text("a\n")
    (folder / "present.txt").write_text("was here\n")
    sid = gpt.session()

    def add(name: str) -> dict[str, Any]:
        return call("apply_patch", input=f"*** Begin Patch\n*** Add File: {folder / name}\n+new\n*** End Patch")

    granted = gpt.turn(sid, add("anchor.txt"), policy=select("allow-edit-folder-session"))
    assert only_call(granted)["status"] == "completed"
    said = {}
    for name in ("present.txt", "absent.txt"):
        done = only_call(gpt.turn(sid, add(name), policy=select("reject")))
        assert done["status"] == "completed" and (folder / name).read_text() == "new\n"
        said[name] = told(gpt).replace(name, "NAME")
    assert said["present.txt"] == said["absent.txt"], said
