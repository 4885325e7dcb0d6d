"""`term2 doctor` prints its verdicts (sandbox, network by approval) on stdout and nothing else; logs go to stderr.

Its first-run checks (config, model, key, endpoint) are driven in tests/e2e/test_first_run_e2e.py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a socket in /opt (which doctor's probe masks and logs) needs root")
def test_doctor_stdout_is_the_verdict_alone(tmp_path: Path) -> None:
    folder = Path(f"/opt/term2-doctor-{uuid.uuid4().hex[:8]}")
    folder.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "agent.sock"))  # found and masked by the probe's first run: a log line
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TERM2_")}
        env.update(TERM2_LOG_LEVEL="debug", XDG_CONFIG_HOME=str(tmp_path / "config"), TERM2_HOME=str(tmp_path / "h"))
        env.update(OPENAI_API_KEY="sk-test", TERM2_MODEL="openai/gpt-5")
        result = subprocess.run(
            [sys.executable, "-m", "term2", "doctor", "--offline"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    *first_run, verdict, network, walks = result.stdout.splitlines()  # stdout is the verdicts alone
    assert [line.partition(":")[0] for line in first_run] == ["config", "log file", "model", "key", "endpoint"]
    assert verdict.startswith("sandbox (bubblewrap): ok: ")
    assert network.startswith("network by approval: ok: "), network  # the probe went through the proxy
    assert walks == "workspace walks: kept between commands with fanotify (one mark per file system): " + (
        "no workspace is too big"
    )
    assert "host_sockets_masked" in result.stderr


def test_doctor_says_how_far_inotify_keeps_the_walks_and_how_to_raise_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unprivileged, a folder takes a watch, then (past the watches, Linux 5.13) a fanotify inode mark: the user
    learns how many folders both limits keep, past which commands walk in full, and how to raise them."""
    from term2.adapters.sandbox import walk_watching
    from term2.adapters.sandbox.walk_watching import how_walks_are_kept

    watches = tmp_path / "max_user_watches"
    watches.write_text("65536\n")
    marks = tmp_path / "max_user_marks"
    marks.write_text("8192\n")
    said = how_walks_are_kept(("inotify",), str(watches), str(marks))
    assert said.startswith(
        "kept between commands with inotify, then fanotify inode marks, for up to 73,728 folders (65,536 inotify"
        " watches, then 8,192 fanotify inode marks): a workspace with more is walked in full"
    ), said
    assert said.endswith("sudo sysctl fs.inotify.max_user_watches=1048576 fs.fanotify.max_user_marks=1048576)")
    refused = "no fanotify group: Operation not permitted"  # a kernel before 5.13
    monkeypatch.setattr(walk_watching, "inode_marks_refused", lambda folder: refused)
    said = how_walks_are_kept(("inotify",), str(watches), str(marks))
    assert said.startswith("kept between commands with inotify, for up to 65,536 folders: a workspace with more")
    assert "sudo sysctl fs.inotify.max_user_watches=" in said and "no fanotify inode marks: no fanotify group" in said
    assert how_walks_are_kept(()) == (
        "walked in full before and after every command: neither fanotify nor inotify is available here"
    )
