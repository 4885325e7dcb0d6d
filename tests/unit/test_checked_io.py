"""The file tools open the path they judged, never one swapped in after the decision."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.tools.base import ToolFailed
from term2.app.tools.files import open_checked, write_checked


@pytest.fixture
def swapped(tmp_path: Path) -> tuple[Path, Path, Path]:
    """root/sub was a folder when judged; it is now a symlink leading outside."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "victim.txt").write_text("precious\n")
    (root / "sub").symlink_to(outside)
    return root, outside, root / "sub" / "victim.txt"


def test_write_through_a_swapped_folder_is_refused_and_changes_nothing(swapped: tuple[Path, Path, Path]) -> None:
    _root, outside, judged = swapped
    with pytest.raises(ToolFailed, match="changed while it was being opened"):
        write_checked(str(judged), b"overwritten")
    assert (outside / "victim.txt").read_text() == "precious\n"


def test_a_file_created_in_the_wrong_place_is_removed(swapped: tuple[Path, Path, Path]) -> None:
    root, outside, _judged = swapped
    with pytest.raises(ToolFailed):
        write_checked(str(root / "sub" / "new.txt"), b"x")
    assert not (outside / "new.txt").exists()


def test_read_through_a_swapped_folder_is_refused(swapped: tuple[Path, Path, Path]) -> None:
    _root, _outside, judged = swapped
    with pytest.raises(ToolFailed):
        open_checked(str(judged))


def test_a_symlink_as_the_last_component_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("t")
    os.symlink(tmp_path / "target", tmp_path / "link")
    with pytest.raises(OSError):
        write_checked(str(tmp_path / "link"), b"x")
    assert (tmp_path / "target").read_text() == "t"


def test_canonical_paths_read_and_write_normally(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    write_checked(str(path), b"first version, long")
    write_checked(str(path), b"second")
    with open_checked(str(path)) as handle:
        assert handle.read() == b"second"
