"""`term2 exec` run in a folder whose path is not UTF-8 (ADR 0034).

Sessions are kept and listed by their folder's path as text, which has no
exact form for such a path: the folder is refused before the turn, by its
escaped name (exit 2, stdout empty), as any other folder term2 cannot take,
and not failed in the session store with a traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import llm_env
from tests.fakes.llm_server import start_fake_llm
from tests.support.exec_process import exec_env, run_piped


def test_a_folder_whose_path_is_not_utf8_is_refused_by_its_escaped_name(tmp_path: Path) -> None:
    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(folder)
    with start_fake_llm() as llm:
        ran = run_piped(["hello"], exec_env(tmp_path / "home", llm_env(llm)), Path(os.fsdecode(folder)))
        assert llm.requests == []  # nothing reached the model
    assert ran.status == 2, ran.stderr
    assert ran.stdout == ""
    assert f"cwd {tmp_path}/caf\\xe9 cannot be a workspace: its path is not UTF-8" in ran.stderr
    assert "Traceback" not in ran.stderr and "UnicodeEncodeError" not in ran.stderr
