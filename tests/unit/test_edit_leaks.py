"""An edit permission is not a read permission (issue 18.1, ADR 0019).

A prompt-injected model that may edit somewhere it may not read must learn
nothing of what the files there hold: not from a missed old_string's closest
lines, not from a patch's context or removed lines, not from a count of
matches, not from which edit missed: an edit there says only whether it applied (ADR 0042).
The client, the user's own editor, still gets the diff. Each case reads the
model's text (what its provider would receive) for a planted secret.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.domain.approval import Choice
from term2.domain.history import DiffOutput
from term2.ports.approval import ApprovalDecision
from tests.unit.test_tools import Harness, new_harness

pytestmark = pytest.mark.anyio

SECRET = "hunter2-0f3a"
CREDENTIALS = f"[default]\naws_access_key_id = AKIA{SECRET}\naws_secret_access_key = s3cr3t/{SECRET}\nregion = eu\n"


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    made = new_harness(tmp_path)
    (made.outside / "credentials").write_text(CREDENTIALS)
    (made.root / ".env").write_text(f"API_KEY={SECRET}\nDEBUG=1\n")
    return made


async def _grant_edits_outside(h: Harness) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_EDIT_FOLDER_SESSION)
    await h.call("write_file", path=str(h.outside / "notes.txt"), content="granted\n")
    assert len(h.approver.requests) == 1


async def test_an_edit_grant_covers_edit_file_which_says_only_whether_it_applied(h: Harness) -> None:
    await _grant_edits_outside(h)
    h.approver.answer = ApprovalDecision(Choice.REJECT)  # would reject, were it asked
    probes = [
        {"old_string": "aws_access_key_id = AKIA", "new_string": "x"},  # matches once: applies
        {"old_string": "aws_access_key_id = AKIAhunter3", "new_string": "x"},  # nowhere
        {"old_string": "=", "new_string": ":"},  # several places
        {"old_string": "=", "new_string": "=" * 6_000_000, "replace_all": True},  # too large
    ]
    texts = [await h.call("edit_file", path=str(h.outside / "credentials"), **probe) for probe in probes]
    assert len(h.approver.requests) == 1, "the edit grant is the answer: no question to read"
    assert texts[0].startswith(f"Edited {h.outside / 'credentials'};") and SECRET not in texts[0]
    assert texts[1] == texts[2] == texts[3], "a miss, an ambiguity and a size refusal say the same"
    assert "did not apply" in texts[1] and SECRET not in texts[1]
    assert (h.outside / "credentials").read_text() == CREDENTIALS.replace("aws_access_key_id = AKIA", "x")


async def test_a_multi_edit_under_an_edit_grant_says_not_which_edit_missed(h: Harness) -> None:
    await _grant_edits_outside(h)
    first = [{"old_string": "region = eu", "new_string": "r"}, {"old_string": "absent", "new_string": "y"}]
    second = [{"old_string": "absent", "new_string": "y"}, {"old_string": "region = eu", "new_string": "r"}]
    texts = [await h.call("multi_edit", path=str(h.outside / "credentials"), edits=e) for e in (first, second)]
    assert texts[0] == texts[1] and "did not apply" in texts[0] and "edit 2" not in texts[0]
    assert (h.outside / "credentials").read_text() == CREDENTIALS


@pytest.mark.parametrize("old_string", ["aws_access_key_id = AKIAhunter3", "no such text at all", "="])
async def test_an_edit_approved_once_answers_without_the_files_text(h: Harness, old_string: str) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_ONCE)
    text = await h.call("edit_file", path=str(h.outside / "credentials"), old_string=old_string, new_string="y")
    assert SECRET not in text
    assert "AKIA" not in text.replace(old_string, "")
    assert "times" not in text, "no count of matches either"


async def test_a_write_over_a_file_it_may_not_read_shows_nothing_of_the_old_text(h: Harness) -> None:
    await _grant_edits_outside(h)
    text = await h.call("write_file", path=str(h.outside / "credentials"), content="replaced\n")
    assert SECRET not in text and "Overwrote" not in text
    assert text.startswith(f"Wrote {h.outside / 'credentials'};")
    (diff,) = h.last().content
    assert isinstance(diff, DiffOutput) and diff.old_text == CREDENTIALS, "the user's client still gets the diff"


async def test_an_approved_edit_of_env_answers_without_its_text(h: Harness) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_ONCE)
    text = await h.call("edit_file", path=".env", old_string="DEBUG=1", new_string="DEBUG=0")
    assert text.startswith(f"Edited {h.root / '.env'};") and SECRET not in text
    assert (h.root / ".env").read_text() == f"API_KEY={SECRET}\nDEBUG=0\n"
    missed = await h.call("edit_file", path=".env", old_string="API_KEY=hunter3", new_string="x")
    assert SECRET not in missed and "did not apply" in missed


async def test_with_a_read_grant_the_hints_and_patches_come_back(h: Harness) -> None:
    await _grant_edits_outside(h)
    h.approver.answer = ApprovalDecision(Choice.ALLOW_FOLDER_SESSION)  # read the folder, for the session
    await h.call("read_file", path=str(h.outside / "notes.txt"))
    missed = await h.call(
        "edit_file", path=str(h.outside / "credentials"), old_string="aws_access_key_id = AKIAhunter3", new_string="x"
    )
    assert "closest text" in missed and SECRET in missed, "the user allowed reading: the hint is the point"
    done = await h.call("edit_file", path=str(h.outside / "credentials"), old_string="region = eu", new_string="r")
    assert "@@" in done and SECRET in done


async def test_inside_the_root_nothing_changes(h: Harness) -> None:
    (h.root / "a.py").write_text("def f():\n    return 1\n")
    missed = await h.call("edit_file", path="a.py", old_string="def f():\n    return 7", new_string="x")
    assert "closest text is at lines 1-2" in missed
    done = await h.call("edit_file", path="a.py", old_string="return 1", new_string="return 2")
    assert "-    return 1\n+    return 2\n" in done
    assert not h.approver.requests


async def test_without_a_read_a_write_says_the_same_whether_the_file_existed_or_held_text(h: Harness) -> None:
    await _grant_edits_outside(h)
    (h.outside / "binary").write_bytes(b"\x00\x01" + SECRET.encode())
    texts = [
        await h.call("write_file", path=str(h.outside / name), content="new\n")
        for name in ("credentials", "absent.txt", "binary")
    ]
    assert [t.replace(name, "X") for t, name in zip(texts, ("credentials", "absent.txt", "binary"), strict=True)] == [
        texts[0].replace("credentials", "X")
    ] * 3
    assert all(SECRET not in t and "+" not in t for t in texts)


async def test_without_a_read_a_size_refusal_tells_no_count(h: Harness) -> None:
    h.approver.answer = ApprovalDecision(Choice.ALLOW_ONCE)
    text = await h.call(
        "edit_file", path=str(h.outside / "credentials"), old_string="=", new_string="=" * 4_000_000, replace_all=True
    )
    assert "did not apply" in text and "MiB long" not in text and "larger" not in text
