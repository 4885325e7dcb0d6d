"""The log file (ADR 0045): private, bounded, never written through a planted link, and mute on stdout."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from term2.adapters import logging_setup
from term2.adapters.logging_setup import LOG_FILE_BACKUPS, configure_logging, log_file


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging sets process-wide state: put the test run's back afterwards."""
    handlers = logging.getLogger().handlers[:]
    yield
    for handler in logging.getLogger().handlers:
        if handler not in handlers:
            handler.close()
    logging.getLogger().handlers[:] = handlers
    structlog.reset_defaults()


def test_info_goes_to_the_file_and_only_warnings_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    assert configure_logging(None, env) == log_file(env)
    log = structlog.get_logger("term2.test")
    log.info("routine", n=1)
    log.warning("worth a look", n=2)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "worth a look" in captured.err and "routine" not in captured.err
    lines = [json.loads(line) for line in log_file(env).read_text().splitlines()]
    assert [(line["event"], line["level"], line["pid"]) for line in lines] == [
        ("routine", "info", os.getpid()),
        ("worth a look", "warning", os.getpid()),
    ]
    assert log_file(env).stat().st_mode & 0o777 == 0o600
    assert log_file(env).parent.stat().st_mode & 0o777 == 0o700


def test_term2_log_level_moves_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    configure_logging("error", env)
    structlog.get_logger("term2.test").warning("not now")
    assert capsys.readouterr().err == "" and log_file(env).read_text() == ""


def test_the_file_is_bounded_and_every_rotated_file_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logging_setup, "LOG_FILE_BYTES", 4096)
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    previous = os.umask(0o000)  # whatever the umask would allow, the files stay 0600
    try:
        configure_logging(None, env)
    finally:
        os.umask(previous)
    log = structlog.get_logger("term2.test")
    for i in range(2000):
        log.info("filler", i=i, text="x" * 100)
    files = sorted(log_file(env).parent.iterdir())
    assert len(files) == LOG_FILE_BACKUPS + 1
    assert all(f.stat().st_mode & 0o777 == 0o600 and f.stat().st_size <= 4096 + 400 for f in files)


def test_a_planted_link_is_not_followed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever could plant `term2.log -> ~/.bashrc` must not get term2 to append to the target."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    target = tmp_path / "bashrc"
    target.write_text("untouched\n")
    log_file(env).parent.mkdir(parents=True, mode=0o700)
    log_file(env).symlink_to(target)
    assert configure_logging(None, env) is None
    structlog.get_logger("term2.test").warning("still said")
    assert target.read_text() == "untouched\n"
    err = capsys.readouterr().err
    assert "no log file" in err and "still said" in err


@pytest.mark.skipif(os.geteuid() != 0, reason="a folder of another user needs root to make")
def test_a_folder_of_another_user_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    folder = log_file(env).parent
    folder.mkdir(parents=True, mode=0o777)
    os.chown(folder, 65534, 65534)
    assert configure_logging(None, env) is None
    assert not log_file(env).exists()
    assert "is not a folder of this user" in capsys.readouterr().err


def test_nothing_reaches_stdout_whatever_the_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    configure_logging("debug", env)
    structlog.get_logger("term2.test").debug("deep")
    logging.getLogger("some.library").warning("library says")
    captured = capsys.readouterr()
    assert captured.out == "" and "deep" in captured.err and "library says" in captured.err
    said = [json.loads(line) for line in log_file(env).read_text().splitlines()]
    assert [(line["event"], line.get("logger")) for line in said] == [("deep", None), ("library says", "some.library")]


def test_keys_are_replaced_wherever_a_line_would_carry_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A provider that quotes the refused key whole, or a library printing headers, leaks nothing."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    key = "sk-live-0123456789abcdef"
    configure_logging(None, env, secrets=(key, "short"))
    structlog.get_logger("term2.test").warning("provider error response", body=f"bad key {key}", word="short")
    logging.getLogger("httpx").warning("Authorization: Bearer %s", key)
    said = capsys.readouterr().err + log_file(env).read_text()
    assert key not in said
    assert said.count("bad key [redacted]") == 2  # stderr and the file
    # The httpx line: redacted by term2, or whole by litellm's own filter when litellm was imported in this
    # process before (it rewrites the httpx record to "Authorization: REDACTED"); never the key.
    assert said.count("Authorization: Bearer [redacted]") + said.count("Authorization: REDACTED") == 2
    assert '"word": "short"' in said  # too short to be a key: left alone
