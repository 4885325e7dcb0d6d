"""Issue 31 item 2 end to end, `term2 login` and `term2 logout` through the real process with a fresh HOME.

The key is checked with one small request against the fake server standing in for the provider (its base-URL
variable honoured; a wrong key gets the provider's real 401), stored 0600 in a 0700 folder, read by a later
`term2 exec` that has no key variable, and removed by `term2 logout`. A planted symlink is never followed.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.exec_process import PtyExec
from tests.support.fresh_home import Fresh, fresh_home

KEY = "sk-stored-0123456789abcdef"


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Fresh]:
    with fresh_home(tmp_path) as made:
        made.llm.configure(require_key=KEY)
        yield made


def base_only(fresh: Fresh) -> dict[str, str]:
    """No key variable at all: only the provider's base URL, pointed at the fake server."""
    return fresh.env(OPENAI_BASE_URL=fresh.llm.base_url + "/v1")


def stored_file(fresh: Fresh) -> Path:
    return fresh.home / ".config" / "term2" / "credentials.json"


def test_login_stores_the_key_0600_and_a_later_exec_works_without_the_variable(fresh: Fresh) -> None:
    ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n")
    assert ran.returncode == 0, ran.stderr
    assert "openai: the key works (127.0.0.1 answered)" in ran.stderr and KEY not in ran.stderr + ran.stdout
    path = stored_file(fresh)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text()) == {"OPENAI_API_KEY": KEY}
    assert len(fresh.llm.requests) == 1  # the check: one small request

    fresh.llm.push({"text": "hello from the stored key"})
    answered = fresh.term2("exec", "hi", env=base_only(fresh))
    assert answered.returncode == 0, answered.stderr
    assert "hello from the stored key" in answered.stdout  # the fake requires KEY: the stored key was sent
    assert KEY not in fresh.log_file.read_text()

    # the environment wins over the stored key
    wins = fresh.term2("exec", "hi", env=fresh.keyed(OPENAI_API_KEY="sk-env-wrong-0123456789"))
    assert wins.returncode == 1 and "Incorrect API key provided" in wins.stderr

    out = fresh.term2("logout", env=base_only(fresh))
    assert out.returncode == 0 and "removed OPENAI_API_KEY" in out.stderr
    assert json.loads(path.read_text()) == {}
    gone = fresh.term2("exec", "hi", env=base_only(fresh))
    assert gone.returncode == 2 and "set OPENAI_API_KEY" in gone.stderr


def test_a_wrong_key_is_refused_at_login_and_nothing_is_stored(fresh: Fresh) -> None:
    wrong = "sk-wrong-0123456789abcdef"
    ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=wrong + "\n")
    assert ran.returncode == 1
    assert "the provider refused the key" in ran.stderr and "nothing was stored" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert fresh.llm.requests[-1].status == "error"  # the provider's real 401
    assert not stored_file(fresh).exists()
    assert wrong not in (fresh.log_file.read_text() if fresh.log_file.exists() else "")


def test_login_on_a_terminal_picks_a_provider_and_never_echoes_the_key(fresh: Fresh) -> None:
    shell = PtyLogin(base_only(fresh), fresh.root)
    try:
        shell.expect("Log in to which provider?")
        shell.expect("Provider")
        shell.send(b"1\n")
        shell.expect("not shown")
        shell.send(KEY.encode() + b"\n")
        assert shell.wait() == 0, shell.text()
        assert "the key works" in shell.text()
        assert KEY not in shell.text()  # never echoed
    finally:
        shell.kill()
    assert json.loads(stored_file(fresh).read_text()) == {"OPENAI_API_KEY": KEY}


def test_a_symlink_planted_for_the_folder_or_the_file_is_never_followed(fresh: Fresh, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = fresh.home / ".config"
    config.mkdir()
    (config / "term2").symlink_to(elsewhere)
    ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n")
    assert ran.returncode == 1 and "could not be stored" in ran.stderr and "symlink is refused" in ran.stderr
    assert list(elsewhere.iterdir()) == []

    (config / "term2").unlink()
    (config / "term2").mkdir(mode=0o755)
    target = elsewhere / "target.json"
    target.write_text("{}")
    stored_file(fresh).symlink_to(target)
    ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n")
    assert ran.returncode == 1 and "symlink is refused" in ran.stderr  # the read that precedes the write refuses
    assert target.read_text() == "{}"
    stored_file(fresh).unlink()
    ran = fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n")
    assert ran.returncode == 0, ran.stderr
    assert stat.S_IMODE((config / "term2").stat().st_mode) == 0o700  # tightened


def test_a_key_file_others_can_read_is_not_used(fresh: Fresh) -> None:
    folder = fresh.home / ".config" / "term2"
    folder.mkdir(parents=True, mode=0o700)
    stored_file(fresh).write_text(json.dumps({"OPENAI_API_KEY": KEY}))
    os.chmod(stored_file(fresh), 0o644)
    ran = fresh.term2("exec", "hi", env=base_only(fresh))
    assert ran.returncode == 2
    assert re.search(r"stored keys not used: .*credentials\.json can be read by others: chmod 600", ran.stderr)
    assert not fresh.llm.requests


def test_the_key_folder_is_never_a_workspace_wherever_term2_config_points(fresh: Fresh, tmp_path: Path) -> None:
    """A session in ~/.config would let its commands read the stored keys; TERM2_CONFIG elsewhere must not
    un-hide the folder the keys are in."""
    assert fresh.term2("login", "openai", env=base_only(fresh), stdin=KEY + "\n").returncode == 0
    config = tmp_path / "elsewhere.toml"
    config.write_text("")
    before = len(fresh.llm.requests)
    for folder in (fresh.home / ".config", fresh.home / ".config" / "term2"):
        ran = fresh.term2("exec", "-C", str(folder), "hi", env=base_only(fresh) | {"TERM2_CONFIG": str(config)})
        assert ran.returncode == 2, ran.stderr
        assert "cannot be a workspace" in ran.stderr
    assert len(fresh.llm.requests) == before


class PtyLogin(PtyExec):
    """`term2 login` on a pseudo-terminal, as a person runs it (and as a client's terminal auth method does)."""

    def __init__(self, env: dict[str, str], cwd: Path, args: tuple[str, ...] | list[str] = ("login",)) -> None:
        super().__init__(list(args), env, cwd, command=())
