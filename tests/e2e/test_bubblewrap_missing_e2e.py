"""Issue 31 item 6: without bubblewrap, `term2 acp` and `term2 exec` say so at start in one line naming the
package to install, and still run nothing unsandboxed. bwrap is hidden from the real process by a mount
namespace that binds /dev/null over /usr/bin/bwrap (`unshare -rm`), as on a machine without the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.fresh_home import Fresh

LINE = (
    "term2: bubblewrap is not installed (/usr/bin/bwrap), so every command will be refused: "
    "install the bubblewrap package"
)


def _can_hide() -> bool:
    if shutil.which("unshare") is None or not os.path.exists("/usr/bin/bwrap"):
        return False
    probe = ["unshare", "-rm", "sh", "-c", "mount --bind /dev/null /usr/bin/bwrap && test ! -x /usr/bin/bwrap"]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


pytestmark = pytest.mark.skipif(not _can_hide(), reason="needs unshare with user and mount namespaces")


def without_bwrap(fresh: Fresh, args: list[str], env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    script = 'mount --bind /dev/null /usr/bin/bwrap && exec "$@"'
    command = ["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "term2", *args]
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=env, cwd=fresh.root, timeout=120, check=False
    )


def test_exec_says_which_package_to_install_once_and_runs_no_command(fresh: Fresh) -> None:
    fresh.llm.push({"tool_calls": [{"name": "run_shell", "arguments": {"command": "touch ran-unsandboxed"}}]})
    fresh.llm.push({"text": "done"})
    ran = without_bwrap(fresh, ["exec", "--mode", "auto", "make a file"], fresh.keyed(), "")
    assert ran.stderr.count(LINE) == 1, ran.stderr
    assert not (fresh.root / "ran-unsandboxed").exists()


def test_acp_says_it_on_stderr_and_keeps_stdout_for_the_protocol(fresh: Fresh) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    ran = without_bwrap(fresh, ["acp"], fresh.keyed(), json.dumps(hello) + "\n")
    assert ran.stderr.count(LINE) == 1, ran.stderr
    assert [json.loads(line)["id"] for line in ran.stdout.splitlines()] == [1]
