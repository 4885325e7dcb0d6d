"""`term2 acp` argument grammar and launcher refusals.

Every refusal is exit status 1, a diagnostic on stderr, nothing on stdout,
and stdin untouched: an editor that spawned term2 with a bad flag must never
see a half-written protocol stream.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from term2.app.config import EFFORTS, AcpArgs
from term2.app.entrypoints.acp_args import AcpUsageError, parse_acp_args
from term2.app.entrypoints.launcher import prepare

REPO_ROOT = Path(__file__).resolve().parents[2]


class _UnreadableStdin:
    """Stands in for sys.stdin: any attempt to read it fails the test."""

    def _refuse(self, *args: object, **kwargs: object) -> bytes:
        raise AssertionError("stdin must not be read while parsing the command line")

    read = readline = readlines = _refuse

    def __iter__(self) -> _UnreadableStdin:
        self._refuse()
        return self

    @property
    def buffer(self) -> _UnreadableStdin:
        self._refuse()
        return self

    def fileno(self) -> int:
        self._refuse()
        return -1


@pytest.fixture(autouse=True)
def no_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", _UnreadableStdin())


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with an empty config dir, so the user's own config never leaks in."""
    return {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}


def _refused(argv: list[str], env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        prepare(argv, env)
    assert info.value.code == 1
    out, err = capfd.readouterr()
    assert out == ""
    assert err.startswith("term2 acp: error: ")
    assert "usage: term2 acp" in err
    return err


# -- parse_acp_args -----------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], AcpArgs()),
        (["--model", "gpt-5"], AcpArgs(model="gpt-5")),
        (["--model=gpt-5"], AcpArgs(model="gpt-5")),
        (["--provider=openai", "--model", "x", "--effort=low"], AcpArgs("openai", "x", "low")),
        (["--model=a=b"], AcpArgs(model="a=b")),  # only the first '=' splits
        (["--model", "-odd"], AcpArgs(model="-odd")),  # a single-dash value is still a value
    ],
)
def test_accepted_command_lines(argv: list[str], expected: AcpArgs) -> None:
    assert parse_acp_args(argv) == expected


@pytest.mark.parametrize("effort", EFFORTS)
def test_every_documented_effort_is_accepted(effort: str) -> None:
    assert parse_acp_args(["--effort", effort]).effort == effort


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--auto-approve"], "unknown option: '--auto-approve'"),
        (["-y"], "unknown option: '-y'"),
        (["--provider-x", "openai"], "unknown option: '--provider-x'"),
        (["--yolo=1"], "unknown option: '--yolo'"),
        (["serve"], "unexpected argument: 'serve'"),
        (["-"], "unexpected argument: '-'"),
        (["--model", "gpt-5", "extra"], "unexpected argument: 'extra'"),
        (["--", "--model", "gpt-5"], "unknown option: '--'"),
        (["--model"], "option --model requires a value"),
        (["--model", "--effort", "low"], "option --model requires a value"),
        (["--model="], "option --model requires a non-empty value"),
        (["--model", ""], "option --model requires a non-empty value"),
        (["--model", "a", "--model=b"], "option --model given more than once"),
        (["--effort", "huge"], "invalid value for --effort: 'huge'"),
        (["--effort=HIGH"], "invalid value for --effort: 'HIGH'"),
    ],
)
def test_refused_command_lines(argv: list[str], fragment: str) -> None:
    with pytest.raises(AcpUsageError) as info:
        parse_acp_args(argv)
    assert fragment in str(info.value)


# -- prepare: exit status 1, stderr only -----------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--auto-approve"],
        ["-y"],
        ["--provider-x", "openai"],
        ["serve"],
        ["--", "anything"],
        ["--model"],
        ["--model="],
        ["--effort", "low", "--effort", "high"],
        ["--effort", "extreme"],
    ],
)
def test_prepare_refuses_bad_flags_with_status_1(
    argv: list[str], env: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    _refused(argv, env, capfd)


def test_ambiguous_model_lists_candidates_on_stderr(env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    err = _refused(["--model", "gpt"], env, capfd)
    assert "ambiguous" in err
    candidates = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    assert 1 < len(candidates) <= 20
    assert all("gpt" in c.lower() for c in candidates)


def test_unknown_provider_is_refused(env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    err = _refused(["--model", "nope/model"], env, capfd)
    assert "unknown provider 'nope'" in err


def test_bad_config_file_is_refused_like_a_bad_flag(env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    path = Path(env["XDG_CONFIG_HOME"]) / "term2" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("model = [")
    err = _refused([], env, capfd)
    assert str(path) in err


def test_model_from_environment_is_resolved_too(env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    _refused([], {**env, "TERM2_MODEL": "nope/model"}, capfd)


@pytest.mark.parametrize(
    ("argv", "model"),
    [
        (["--model", "gpt-5"], "gpt-5"),
        (["--model=openai/my-local-model"], "openai/my-local-model"),
        (["--model", "ollama_chat/qwen3"], "ollama_chat/qwen3"),
        (["--provider", "ollama_chat", "--model", "qwen3"], "qwen3"),
    ],
)
def test_exact_and_qualified_models_are_accepted(
    argv: list[str], model: str, env: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    settings = prepare(argv, env)
    assert settings.model == model
    assert capfd.readouterr() == ("", "")


def test_no_model_is_accepted_at_launch(env: dict[str, str], capfd: pytest.CaptureFixture[str]) -> None:
    """A missing model is reported when a prompt needs it, not at launch."""
    settings = prepare([], env)
    assert settings.model is None
    assert capfd.readouterr() == ("", "")


def test_flags_reach_the_settings(env: dict[str, str]) -> None:
    settings = prepare(["--effort=high", "--model", "gpt-5", "--provider", "openai"], env)
    assert (settings.provider, settings.model, settings.effort) == ("openai", "gpt-5", "high")


# -- the real command line, once ---------------------------------------------------


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"), NO_COLOR="1")
    env["PYTHONPATH"] = str(REPO_ROOT / "src")
    # stdin is an open pipe nobody writes to: a launcher that read it would hang into the timeout.
    with subprocess.Popen(
        [sys.executable, "-m", "term2", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    ) as proc:
        try:
            rc = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    return subprocess.CompletedProcess(proc.args, rc, out, err)


def test_cli_refuses_auto_approve(tmp_path: Path) -> None:
    result = _run("acp", "--auto-approve", tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "unknown option: '--auto-approve'" in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--version",), ("term2, version",)),
        (("--help",), ("Usage", "acp", "models")),
        (("acp", "--help"), ("Usage", "--provider", "--model", "--effort")),
    ],
)
def test_cli_version_and_help_exit_0(args: tuple[str, ...], expected: tuple[str, ...], tmp_path: Path) -> None:
    result = _run(*args, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    for fragment in expected:
        assert fragment in result.stdout


def test_cli_models_lists_id_provider_context_window_and_prices(tmp_path: Path) -> None:
    result = _run("models", "gpt-5", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split()[:3] == ["model", "provider", "window"] and "$/M in" in header
    rows = [line.split() for line in lines]
    gpt5 = next(row for row in rows if row[0] == "gpt-5")
    assert gpt5[:3] == ["gpt-5", "openai", "272000"]
    assert float(gpt5[3]) > 0 and float(gpt5[4]) > float(gpt5[3])  # output costs more than input
    assert all("gpt-5" in row[0] for row in rows)
