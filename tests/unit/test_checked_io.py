"""The file tools open the path they judged, never one swapped in after the decision."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.tools.anchored import open_folder, open_regular, read_upto, write_whole
from term2.app.tools.failure import ToolFailed


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
    root, outside, judged = swapped
    with pytest.raises(ToolFailed, match="changed while it was being opened"):
        write_whole(str(judged), str(root), b"overwritten")
    assert (outside / "victim.txt").read_text() == "precious\n"


def test_nothing_is_created_through_a_swapped_folder(swapped: tuple[Path, Path, Path]) -> None:
    root, outside, _judged = swapped
    with pytest.raises(ToolFailed, match="sub is now a symlink to"):
        write_whole(str(root / "sub" / "new" / "new.txt"), str(root), b"x")
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_read_through_a_swapped_folder_is_refused(swapped: tuple[Path, Path, Path]) -> None:
    root, _outside, judged = swapped
    with pytest.raises(ToolFailed):
        open_regular(str(judged), str(root))


def test_a_swapped_folder_outside_the_root_is_refused_too(swapped: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _root, _outside, judged = swapped
    with pytest.raises(ToolFailed):
        open_folder(str(judged.parent), str(tmp_path / "elsewhere"), readable=True)


def test_a_symlink_as_the_last_component_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_text("t")
    os.symlink(tmp_path / "target", tmp_path / "link")
    with pytest.raises(ToolFailed):
        write_whole(str(tmp_path / "link"), str(tmp_path), b"x")
    assert (tmp_path / "target").read_text() == "t"


def test_canonical_paths_read_and_write_normally(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "f.txt"
    assert write_whole(str(path), str(tmp_path), b"first version, long")
    assert not write_whole(str(path), str(tmp_path), b"second")
    fd = open_regular(str(path), str(tmp_path))
    try:
        assert read_upto(fd, 100) == b"second"
    finally:
        os.close(fd)
