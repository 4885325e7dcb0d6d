"""The folder locks of ADR 0038 as term2 processes leave and use them, through the real `term2 acp`.

(a) What the lock folder costs: it holds one file however many folders the editor was asked about
    and commands ran on (it held three per folder, never removed, in the home where the user has no
    runtime folder).

Each process gets its own runtime folder through XDG_RUNTIME_DIR (there is no /run/user/<uid> on the
test machines), so nothing here meets the locks of other tests.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import llm_env
from tests.e2e import test_editor_race_e2e as race
from tests.e2e import test_tools_e2e as tools
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap"), reason="run_shell needs /usr/bin/bwrap"),
    pytest.mark.skipif(os.path.exists(f"/run/user/{os.getuid()}"), reason="term2 would use /run/user/<uid>"),
]


@contextlib.contextmanager
def _agents(base: Path, count: int) -> Iterator[tuple[list[tools.Agent], race.FollowingEditor, Path]]:
    """`count` term2 processes on one workspace sharing one runtime folder (so one lock folder)."""
    root = base / "project"
    root.mkdir()
    runtime = base / "runtime"
    runtime.mkdir(mode=0o700)
    editor = race.FollowingEditor(root)
    with start_fake_llm() as llm:
        answers = tools.Answers()
        agents: list[tools.Agent] = []
        try:
            for n in range(count):
                home = base / f"proc-{n}"
                home.mkdir()
                env = {**llm_env(llm), "XDG_RUNTIME_DIR": str(runtime)}
                proc = AcpProcess(home, env=env, permission=answers, client_methods=editor.methods())
                proc.initialize(1, race.FS)
                agents.append(tools.Agent(proc, llm, answers, base, root))
                tools._warm_up(agents[-1])
            yield agents, editor, runtime / "term2-locks"
        finally:
            with contextlib.suppress(FileNotFoundError):
                (root / ".ctl" / "stop").touch()
            for agent in agents:
                if agent.proc.proc.poll() is None:
                    agent.proc.close()
                    agent.proc.validate_schemas()
                agent.proc.kill()


def test_the_lock_folder_holds_one_file_whatever_was_used(tmp_path: Path) -> None:
    with _agents(tmp_path, 1) as ([agent], editor, locks):
        for n in range(12):
            folder = agent.root / f"f{n}" / "deeper"
            folder.mkdir(parents=True)
            (folder / "a.txt").write_text(f"text {n}\n")
        sid = agent.session()
        agent.turn(sid, *[tools.read_call(f"f{n}/deeper/a.txt") for n in range(12)])
        agent.turn(sid, tools.shell_call("true"), policy=tools.select("allow-once"))
        assert len(editor.asked_under(os.path.realpath(agent.root))) == 12, "the editor served the reads"
        assert len(list(locks.iterdir())) == 1, sorted(p.name for p in locks.iterdir())[:9]


def _answered(agent: tools.Agent, request_id: int) -> bool:
    return any(
        who == "agent" and message.get("id") == request_id and "method" not in message
        for who, message in list(agent.proc.transcript)
    )
