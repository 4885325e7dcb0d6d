"""scripts/setup builds term2 on the distribution's optimised interpreter when it can run term2 (ADR 0055).

`scripts/pick-python` is run for real; the "distribution's interpreter" it looks at is pointed at
this test's own interpreter (which can run term2) or at small stand-ins that cannot.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "scripts" / "pick-python"


def pick(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("TERM2_PYTHON", "TERM2_DISTRO_PYTHON")}
    done = subprocess.run([str(PICK)], env={**base, **env}, capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == ""
    return done.stdout


def stand_in(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_an_interpreter_that_can_run_term2_is_taken() -> None:
    assert pick(TERM2_DISTRO_PYTHON=sys.executable) == sys.executable + "\n"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("exit 1", id="a version outside requires-python, or no ssl or sqlite3"),
        pytest.param("exit 127", id="an interpreter that does not start"),
    ],
)
def test_one_that_cannot_leaves_the_choice_to_uv(tmp_path: Path, body: str) -> None:
    assert pick(TERM2_DISTRO_PYTHON=str(stand_in(tmp_path, "python3", body))) == ""


def test_none_installed_leaves_the_choice_to_uv(tmp_path: Path) -> None:
    assert pick(TERM2_DISTRO_PYTHON=str(tmp_path / "absent")) == ""


def test_the_user_s_choice_wins(tmp_path: Path) -> None:
    mine = stand_in(tmp_path, "mine", "exit 1")
    assert pick(TERM2_PYTHON=str(mine), TERM2_DISTRO_PYTHON=sys.executable) == f"{mine}\n"


def test_the_versions_asked_are_requires_python_s() -> None:
    """The script's version test repeats pyproject.toml's range: the two must not drift apart."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        wanted = tomllib.load(f)["project"]["requires-python"]
    bounds = re.fullmatch(r">=(\d+)\.(\d+),<(\d+)\.(\d+)", wanted)
    assert bounds is not None, wanted
    low_major, low_minor, high_major, high_minor = bounds.groups()
    test = f"({low_major}, {low_minor}) <= sys.version_info[:2] < ({high_major}, {high_minor})"
    assert test in PICK.read_text()
