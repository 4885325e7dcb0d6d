"""A workspace folder whose canonical path is not UTF-8 is refused by its escaped name (ADR 0034).

An editor can only send a UTF-8 cwd, but a link to such a folder resolves to
one; sessions are stored and listed by that path as text, so the folder is
refused before a session is made, in words the client's JSON can carry.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.sessions import canonical_cwd
from term2.domain.errors import InvalidInput


def test_a_link_to_a_folder_whose_path_is_not_utf8_is_refused_by_its_escaped_name(tmp_path: Path) -> None:
    base = os.path.realpath(tmp_path)
    folder = os.path.join(os.fsencode(base), b"caf\xe9")
    os.mkdir(folder)
    os.symlink(folder, os.path.join(base, "link"))
    with pytest.raises(InvalidInput) as refused:
        canonical_cwd(os.path.join(base, "link"))
    message = str(refused.value)
    assert message.startswith(f"cwd {base}/caf\\xe9 cannot be a workspace: its path is not UTF-8")
    message.encode("utf-8")  # text a client's JSON carries


def test_a_utf8_folder_is_taken_as_before(tmp_path: Path) -> None:
    folder = tmp_path / "caf\u00e9"
    folder.mkdir()
    assert canonical_cwd(str(folder)) == os.path.realpath(folder)
