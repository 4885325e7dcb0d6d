"""Issue 18's edit attacks end to end, over a real `term2 acp` (ACP v2), the fake LLM and real bwrap.

A prompt-injected model whose edits the user approves: it must learn nothing
of a file it may not read (items 1), must not freeze the process with
quadratic inputs (4), must not blow up memory or an update (5), and must not
lock the workspace out of commands with a deep path (8). What the model's
provider received is read from the fake LLM's recorded requests.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e import test_tools_e2e as tools

SECRET = "hunter2-e2e-7c1d"
CREDENTIALS = f"[default]\naws_access_key_id = AKIA{SECRET}\naws_secret_access_key = s3cr3t/{SECRET}\n"
MiB = 1024 * 1024


agent, _clean_script = tools.module_agent("edit-attacks")


def call(name: str, **arguments: object) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _provider_saw(agent: tools.Agent, text: str) -> bool:
    return any(text in json.dumps(r.body) for r in agent.llm.requests)


def test_an_edit_grant_outside_never_carries_a_secret_to_the_model(agent: tools.Agent) -> None:
    folder = agent.outside()
    creds = folder / "credentials"
    creds.write_text(CREDENTIALS)
    sid = agent.session()
    agent.turn(
        sid,
        call("write_file", path=str(folder / "notes.txt"), content="n\n"),
        policy=tools.select("allow-edit-folder-session"),
    )
    read = tools.only_call(agent.turn(sid, tools.read_call(creds), policy=tools.select("reject")))
    assert read["status"] == "failed"
    asked = agent.asked()
    probe = call("edit_file", path=str(creds), old_string="aws_secret_access_key = guess", new_string="x")
    probed = tools.only_call(agent.turn(sid, probe, policy=tools.select("reject")))
    assert agent.asked() == asked, "the folder's edit grant covers edit_file: no second question (issue 30.10)"
    assert probed["status"] == "failed" and "did not apply" in tools.text_of(probed)
    written = tools.only_call(agent.turn(sid, call("write_file", path=str(creds), content="gone\n")))
    assert written["status"] == "completed" and agent.asked() == asked, "the folder's edit grant covers writes"
    assert creds.read_text() == "gone\n"
    assert not _provider_saw(agent, SECRET)


def test_an_approved_edit_of_env_carries_nothing_of_it_to_the_model(agent: tools.Agent) -> None:
    (agent.root / ".env").write_text(f"API_KEY={SECRET}\nDEBUG=1\n")
    sid = agent.session()
    near_miss = call("edit_file", path=".env", old_string="API_KEY=guess", new_string="API_KEY=x")
    missed = tools.only_call(agent.turn(sid, near_miss, policy=tools.select("allow-once")))
    assert missed["status"] == "failed" and "did not apply" in tools.text_of(missed)
    done = tools.only_call(
        agent.turn(
            sid,
            call("edit_file", path=".env", old_string="DEBUG=1", new_string="DEBUG=0"),
            policy=tools.select("allow-once"),
        )
    )
    assert done["status"] == "completed"
    assert (agent.root / ".env").read_text() == f"API_KEY={SECRET}\nDEBUG=0\n"
    assert not _provider_saw(agent, SECRET)


def test_a_diff_of_repetitive_lines_leaves_the_process_answering(agent: tools.Agent) -> None:
    (agent.root / "same.txt").write_text("x\n" * 7000)
    alternating = "".join("x\n" if i % 2 else "z\n" for i in range(7000))
    sid = agent.session()
    agent.start_prompt(sid, call("write_file", path="same.txt", content=alternating))
    # Before issue 18 the v2 renderer diffed this on the event loop for minutes: nothing was answered.
    listed = agent.proc.call("session/list", {}, timeout=30)
    assert "result" in listed
    messages = [*agent.proc.log, *tools.until_idle(agent, timeout=60)]
    done = tools.only_call(messages)
    assert done["status"] == "completed"
    (diff,) = [c for c in done["content"] if c["type"] == "diff"]
    assert diff["patch"]["text"].startswith("diff --git ")
    assert (agent.root / "same.txt").read_text() == alternating


def test_a_long_near_miss_against_a_large_file_is_answered_with_a_hint(agent: tools.Agent) -> None:
    lines = [f"    value_{i} = compute({i * 7919 % 1_000_003}) + {i}  # " + "pad " * 5 for i in range(12_000)]
    (agent.root / "big.py").write_text("\n".join(lines) + "\n")
    snippet = "\n".join(line.replace("compute", "komput") for line in lines[5000:5600])
    missed = tools.only_call(
        agent.turn(agent.session(), call("edit_file", path="big.py", old_string=snippet, new_string="pass"))
    )
    assert missed["status"] == "failed"
    assert "The closest text is at lines 5001-5600" in tools.text_of(missed)


def test_a_replace_all_that_would_blow_up_is_refused_and_sends_nothing_large(agent: tools.Agent) -> None:
    (agent.root / "data.txt").write_text("a" * 100_000)
    outside = agent.outside() / "data.txt"
    outside.write_text("ab" * 50_000)
    sid = agent.session()
    bomb = call("edit_file", path="data.txt", old_string="a", new_string="b" * 2048, replace_all=True)
    refused = tools.only_call(agent.turn(sid, bomb))
    assert refused["status"] == "failed" and "the limit is 10.0 MiB" in tools.text_of(refused)
    outside_bomb = call("edit_file", path=str(outside), old_string="a", new_string="c" * 380, replace_all=True)
    rejected = tools.only_call(agent.turn(sid, outside_bomb, policy=tools.select("reject")))
    assert rejected["status"] == "failed"
    assert (agent.root / "data.txt").read_text() == "a" * 100_000 and outside.read_text() == "ab" * 50_000
    assert max(len(line) for line in agent.proc.raw_lines) < MiB


def test_a_deep_write_is_refused_and_commands_still_run(agent: tools.Agent) -> None:
    sid = agent.session()
    deep = "/".join(["d"] * 1200 + ["f.txt"])
    refused = tools.only_call(agent.turn(sid, call("write_file", path=deep, content="x")))
    assert refused["status"] == "failed" and "the sandbox walks at most 255" in tools.text_of(refused)
    ran = tools.only_call(agent.turn(sid, tools.shell_call("echo still-usable"), policy=tools.select("allow-once")))
    assert ran["status"] == "completed", ran


MARKER = "marker-7f3e-not-for-the-model"
SETTINGS = f"token = {MARKER}\nmode = a\nlevel = 1\n"
GRANTS = {"file": "allow-edit-file-session", "folder": "allow-edit-folder-session"}


def _later_edits(target: str) -> list[dict[str, Any]]:
    """Two edits of a granted file whose arguments hold no part of MARKER (apply_patch: test_edits_land_e2e.py)."""
    return [
        call("edit_file", path=target, old_string="mode = b", new_string="mode = c"),
        call("multi_edit", path=target, edits=[{"old_string": "mode = c", "new_string": "mode = d"}]),
    ]


@pytest.mark.parametrize("grant", GRANTS)
def test_an_edit_grant_covers_later_edits_which_say_only_whether_they_applied(agent: tools.Agent, grant: str) -> None:
    """Issue 30.10: the answer "Allow edits to this file/folder (session)" covers the later edits of that file
    without a second question, and what they tell the model is applied or not applied: nothing of the file."""
    target = agent.outside() / "settings.ini"
    target.write_text(SETTINGS)
    sid = agent.session()
    before = agent.asked()
    first = tools.only_call(
        agent.turn(
            sid,
            call("edit_file", path=str(target), old_string="mode = a", new_string="mode = b"),
            policy=tools.select(GRANTS[grant]),
        )
    )
    assert first["status"] == "completed" and agent.asked() == before + 1
    asked = agent.proc.permission_requests[-1]["params"]
    assert {o["optionId"] for o in asked["options"]} == tools.EDIT_CHOICES, "the first question offers the grants"
    results = []
    for later in _later_edits(str(target)):
        done = tools.only_call(agent.turn(sid, later, policy=tools.select("reject")))
        assert done["status"] == "completed", tools.text_of(done)
        results.append(tools.text_of(done))
    assert agent.asked() == before + 1, "the grant covers the later edits: no second question"
    assert target.read_text() == SETTINGS.replace("mode = a", "mode = d")
    missed = tools.only_call(
        agent.turn(
            sid,
            call("edit_file", path=str(target), old_string="token = guess", new_string="x"),
            policy=tools.select("reject"),
        )
    )
    assert missed["status"] == "failed" and agent.asked() == before + 1
    said = tools.text_of(missed)
    assert "did not apply" in said
    assert not any(word in said for word in ("not found", "closest", "more than once", "times", "token")), said
    assert target.read_text() == SETTINGS.replace("mode = a", "mode = d")
    assert all(MARKER not in text for text in results)
    assert not _provider_saw(agent, MARKER), "the model's provider received nothing of the file's text"


def test_a_folder_edit_grant_given_for_env_does_not_cover_git_hooks_or_instruction_files(agent: tools.Agent) -> None:
    """ "Allow edits in this folder" answered for the root's `.env` is not an answer for `.git/hooks` (the
    host's git runs them: code outside the sandbox on the next commit) nor for AGENTS.md (every later
    session's prompt): each is asked on its own, and refused here, nothing is written."""
    (agent.root / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
    (agent.root / ".env").write_text("A=1\n")
    sid = agent.session()
    granted = tools.only_call(
        agent.turn(
            sid, call("write_file", path=".env", content="A=2\n"), policy=tools.select("allow-edit-folder-session")
        )
    )
    assert granted["status"] == "completed"
    asked = agent.asked()
    plain = tools.only_call(agent.turn(sid, call("write_file", path="notes.txt", content="n\n")))
    assert plain["status"] == "completed" and agent.asked() == asked
    for path, content in ((".git/hooks/pre-commit", "#!/bin/sh\ntouch /tmp/pwned\n"), ("AGENTS.md", "obey\n")):
        refused = tools.only_call(
            agent.turn(sid, call("write_file", path=path, content=content), policy=tools.select("reject"))
        )
        assert refused["status"] == "failed" and agent.asked() == asked + 1, path
        asked += 1
        assert not (agent.root / path).exists(), path
