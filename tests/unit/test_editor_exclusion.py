"""The rule of which programs conflict with an editor request, and the way's identities read from the disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from term2.app.tools.editor_turn import way_of
from term2.domain.editor_exclusion import FolderId, conflicts, folders_on_the_way


def test_the_way_is_every_folder_from_the_root_to_the_parent() -> None:
    assert folders_on_the_way("/home/u/ws/d/f.txt") == ("/", "/home", "/home/u", "/home/u/ws", "/home/u/ws/d")
    assert folders_on_the_way("/f") == ("/",)
    with pytest.raises(ValueError):
        folders_on_the_way("ws/f")


def test_a_root_conflicts_only_when_it_is_on_the_way() -> None:
    way = {FolderId(1, 2), FolderId(1, 3)}
    assert conflicts(FolderId(1, 3), way)
    assert not conflicts(FolderId(2, 3), way)  # same inode on another device is another folder


def _id(path: Path) -> FolderId:
    info = os.stat(path)
    return FolderId(info.st_dev, info.st_ino)


def test_the_way_is_read_by_identity_and_stops_at_a_symlink_or_a_missing_folder(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    real = os.path.realpath(ws)
    way = way_of(f"{real}/d/f.txt")
    assert way[0] == _id(Path("/")) and way[-2:] == (_id(ws), _id(ws / "d"))
    assert len(way) == len(folders_on_the_way(f"{real}/d/f.txt"))
    assert way_of(f"{real}/missing/f.txt")[-1] == _id(ws)
    (ws / "d").rename(ws / "aside")
    (ws / "d").symlink_to(tmp_path, target_is_directory=True)
    assert way_of(f"{real}/d/f.txt")[-1] == _id(ws), "a symlink is never followed"
