"""Contract for every Sandbox adapter: the same suite runs against each.

BubblewrapSandbox runs the real shell commands below; ScriptedSandbox is
configured with scripts that behave like them. The suite is what makes
substituting the scripted fake in callers' tests honest.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from term2.adapters.sandbox import BubblewrapSandbox, Script, ScriptedSandbox
from term2.ports.sandbox import (
    CommandRequest,
    CommandResult,
    Sandbox,
    SandboxFailed,
    SandboxUnavailable,
)

pytestmark = pytest.mark.anyio

HAVE_BWRAP = os.path.exists("/usr/bin/bwrap")

EXIT_3 = "exit 3"
TRUE = "true"
BOTH_STREAMS = "echo out; echo err >&2"
STREAMED = "echo first; until [ -e go ]; do sleep 0.01; done; echo second"  # `go`: made on seeing "first"
FLOOD = "yes"
HANG = "sleep 30"
FOREVER = "sleep infinity"
GUARD = 120  # seconds: a guard against a hang only
PLANT = "git init -q planted && echo made"
SCRIPTS = {
    EXIT_3: Script(exit_code=3),
    TRUE: Script(),
    BOTH_STREAMS: Script(chunks=(b"out\n", b"err\n")),
    STREAMED: Script(chunks=(b"first\n", b"second\n"), wait_for="go"),
    FLOOD: Script(chunks=(b"y\n" * 1_000_000,), hang=True),
    HANG: Script(hang=True),
    FOREVER: Script(hang=True),
    PLANT: Script(
        chunks=(b"made\n",),
        notices=(
            "term2 quarantined planted/.git: this command created a .git entry; renamed to "
            "planted/.git.term2-quarantined",
        ),
    ),
}


@dataclass
class Harness:
    sandbox: Sandbox
    root: str
    make_unavailable: Callable[[], Sandbox]
    make_broken_setup: Callable[[str], str]  # returns a command whose setup fails

    def request(self, command: str, **kwargs: float | int) -> CommandRequest:
        return CommandRequest(command=command, root=self.root, cwd=self.root, **kwargs)  # type: ignore[arg-type]


def _bwrap_broken_setup(root: str) -> str:
    # A protected path that is a symlink: the adapter must refuse, not run.
    os.symlink("/etc", os.path.join(root, ".git"))
    return TRUE


def _scripted_broken_setup(sandbox: ScriptedSandbox) -> Callable[[str], str]:
    def make(_root: str) -> str:
        sandbox.add("broken", Script(setup_failure="refusing to run: .git is a symlink"))
        return "broken"

    return make


@pytest.fixture(params=["bubblewrap", "scripted"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    root = str(tmp_path.resolve())
    if request.param == "bubblewrap":
        if not HAVE_BWRAP:
            pytest.skip("/usr/bin/bwrap is not installed")
        return Harness(
            sandbox=BubblewrapSandbox(),
            root=root,
            make_unavailable=lambda: BubblewrapSandbox(bwrap=str(tmp_path / "no-such-bwrap")),
            make_broken_setup=_bwrap_broken_setup,
        )
    scripted = ScriptedSandbox(SCRIPTS)
    return Harness(
        sandbox=scripted,
        root=root,
        make_unavailable=lambda: ScriptedSandbox(SCRIPTS, unavailable="no bubblewrap here"),
        make_broken_setup=_scripted_broken_setup(scripted),
    )


async def test_reports_available(harness: Harness) -> None:
    status = await harness.sandbox.status()
    assert status.available, status.detail


async def test_exit_codes(harness: Harness) -> None:
    ok = await harness.sandbox.run(harness.request(TRUE))
    failed = await harness.sandbox.run(harness.request(EXIT_3))
    assert (ok.exit_code, ok.timed_out, ok.truncated) == (0, False, False)
    assert (failed.exit_code, failed.signal) == (3, None)


async def test_a_planted_repository_is_reported_in_notices(harness: Harness) -> None:
    """Callers show notices to the model and the user; every adapter reports a plant the same way."""
    result = await harness.sandbox.run(harness.request(PLANT))
    assert result.exit_code == 0 and b"made" in result.output
    assert len(result.notices) == 1
    assert "quarantined planted/.git" in result.notices[0] and "planted/.git.term2-quarantined" in result.notices[0]
    ordinary = await harness.sandbox.run(harness.request(TRUE))
    assert ordinary.notices == ()


async def test_stdout_and_stderr_are_both_captured(harness: Harness) -> None:
    result = await harness.sandbox.run(harness.request(BOTH_STREAMS))
    assert result.exit_code == 0
    assert b"out\n" in result.output and b"err\n" in result.output


async def test_output_streams_to_sink_as_it_arrives(harness: Harness) -> None:
    """The command prints its second line only after the sink has had the first (the sink makes `go`): a
    sandbox that held output back until the command ended would never end it (the guard says so)."""
    arrivals: list[bytes] = []

    async def sink(chunk: bytes) -> None:
        arrivals.append(chunk)
        if b"first" in b"".join(arrivals):
            Path(harness.root, "go").touch()

    with anyio.fail_after(GUARD):
        result = await harness.sandbox.run(harness.request(STREAMED, timeout_s=100_000), sink)
    assert b"".join(arrivals) == result.output == b"first\nsecond\n"


async def test_output_cap_truncates_and_returns_promptly(harness: Harness) -> None:
    streamed = bytearray()

    async def sink(chunk: bytes) -> None:
        streamed.extend(chunk)

    result = await harness.sandbox.run(harness.request(FLOOD, output_limit=4096, timeout_s=20), sink)
    assert result.truncated and not result.timed_out  # `yes` never ends: the cap ended it, not the timeout
    assert len(result.output) == 4096 and bytes(streamed) == result.output
    assert result.output.startswith(b"y\ny\n")


async def test_timeout_reports_timed_out(harness: Harness) -> None:
    result = await harness.sandbox.run(harness.request(HANG, timeout_s=0.5))
    assert result.timed_out and result.exit_code is None  # `sleep 30` would have exited 0: the timeout ended it


async def test_cancellation_returns_promptly(harness: Harness) -> None:
    outcome: list[CommandResult] = []
    # A command that never ends and a run with no timeout of its own: only the cancel can end the run, so a
    # run that waited for its command would hang (the guard says so) whenever the cancel lands.
    with anyio.fail_after(GUARD), anyio.move_on_after(0.5) as scope:
        outcome.append(await harness.sandbox.run(harness.request(FOREVER, timeout_s=100_000)))
    assert scope.cancelled_caught and not outcome
    # The sandbox is still usable after a cancelled run.
    assert (await harness.sandbox.run(harness.request(TRUE))).exit_code == 0


async def test_unavailable_raises_and_never_runs(harness: Harness) -> None:
    sandbox = harness.make_unavailable()
    status = await sandbox.status()
    assert not status.available and status.detail
    with pytest.raises(SandboxUnavailable):
        await sandbox.run(harness.request(TRUE))


async def test_setup_failure_is_not_a_command_result(harness: Harness) -> None:
    command = harness.make_broken_setup(harness.root)
    with pytest.raises(SandboxFailed):
        await harness.sandbox.run(harness.request(command))


def test_scripted_sandbox_executes_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    async def main() -> CommandResult:
        return await ScriptedSandbox().run(
            CommandRequest(command=f"touch {marker}", root=str(tmp_path), cwd=str(tmp_path))
        )

    result = anyio.run(main)
    assert result.exit_code == 127 and not marker.exists()


# -- extra roots (ACP additionalDirectories, ADR 0050) ------------------------------------------------------

MARK = "touch ran"  # what a refused run must not have done


@pytest.fixture
def extra(harness: Harness, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A second root beside the harness's, of the same owner."""
    folder = tmp_path_factory.mktemp("extra-root")
    os.chown(folder, *_owner(harness.root))
    return str(folder.resolve())


def _owner(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_uid, info.st_gid


def _refused_extra(kind: str, root: str, extra: str) -> tuple[str, ...]:
    """An extra root list the adapters must refuse, made on the disk as ``kind`` says."""
    if kind == "same":
        return (root,)
    if kind == "inside":
        os.mkdir(os.path.join(root, "sub"))
        return (os.path.join(root, "sub"),)
    if kind == "holding":
        return (os.path.dirname(root),)
    if kind == "twice":
        return (extra, extra)
    if kind == "missing":
        return (os.path.join(extra, "gone"),)
    if kind == "file":
        Path(extra, "file").write_text("")
        return (os.path.join(extra, "file"),)
    if kind == "non-canonical":
        link = os.path.join(os.path.dirname(extra), os.path.basename(extra) + "-link")
        os.symlink(extra, link)
        return (link,)
    if kind == "relative":
        return (os.path.relpath(extra),)
    if kind == "other-owner":
        uid, gid = _owner(root)
        os.chown(extra, 65534 if uid == 0 else 0, 65534 if gid == 0 else 0)
        return (extra,)
    return (kind,)  # an unsafe folder itself


REFUSED_KINDS = [
    "same",
    "inside",
    "holding",
    "twice",
    "missing",
    "file",
    "non-canonical",
    "relative",
    "/",
    "/tmp",
    "/etc",
    os.path.realpath(os.path.expanduser("~")),
    pytest.param("other-owner", marks=pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")),
]


async def test_an_extra_root_is_accepted(harness: Harness, extra: str) -> None:
    request = CommandRequest(command=TRUE, root=harness.root, cwd=harness.root, extra_roots=(extra,))
    assert (await harness.sandbox.run(request)).exit_code == 0


@pytest.mark.parametrize("kind", REFUSED_KINDS)
async def test_a_bad_extra_root_is_refused_before_anything_runs(harness: Harness, extra: str, kind: str) -> None:
    """Each extra root is judged exactly as the root is, and must not overlap it or another, nor belong to
    another user: every adapter refuses the same lists, and the command (which would make `ran`) never ran."""
    if isinstance(harness.sandbox, ScriptedSandbox):
        harness.sandbox.add(MARK, Script())
    extras = _refused_extra(kind, harness.root, extra)
    request = CommandRequest(command=MARK, root=harness.root, cwd=harness.root, extra_roots=extras)
    with pytest.raises(SandboxFailed):
        await harness.sandbox.run(request)
    assert not os.path.exists(os.path.join(harness.root, "ran"))
    if isinstance(harness.sandbox, ScriptedSandbox):
        assert harness.sandbox.calls == []
