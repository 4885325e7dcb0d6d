"""Project instructions: which files are read, in what order, how much of them, and when again.

The pure rules (order, choice, caps, rendering) are driven directly; discovery
and the cache run against real folders, with FIFOs and symlinks planted where
an AGENTS.md would be.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from term2.app import instructions as loader
from term2.app.instructions import ProjectInstructions, git_root
from term2.domain.instructions import (
    FILE_LIMIT,
    TOTAL_LIMIT,
    InstructionFile,
    chosen_name,
    cut_utf8,
    folders_down,
    render_instructions,
)


def section_paths(text: str) -> list[str]:
    return [line.split('"')[1] for line in text.splitlines() if line.startswith("<project_instructions path=")]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "a" / "b").mkdir(parents=True)
    return root


# --------------------------------------------------------------------------- the pure rules


def test_folders_run_from_the_top_down_to_the_cwd() -> None:
    assert folders_down("/r", "/r/a/b") == ("/r", "/r/a", "/r/a/b")
    assert folders_down("/r", "/r") == ("/r",)
    with pytest.raises(ValueError):
        folders_down("/r/a", "/r")


def test_agents_md_wins_and_the_fallbacks_come_in_order() -> None:
    assert chosen_name({"AGENTS.md", "CLAUDE.md", "GEMINI.md"}) == "AGENTS.md"
    assert chosen_name({"CLAUDE.md", "GEMINI.md"}) == "CLAUDE.md"
    assert chosen_name({"GEMINI.md"}) == "GEMINI.md"
    assert chosen_name({"README.md"}) is None


def test_no_files_no_section() -> None:
    assert render_instructions([]) == ""


def test_a_long_file_is_cut_at_its_cap_with_a_visible_note() -> None:
    text = render_instructions([InstructionFile("AGENTS.md", b"x" * (FILE_LIMIT + 1))])
    assert "x" * FILE_LIMIT + "\n[term2: AGENTS.md cut at 32 KiB]\n</project_instructions>" in text
    assert "x" * (FILE_LIMIT + 1) not in text


def test_a_file_at_its_cap_is_whole_and_unmarked() -> None:
    text = render_instructions([InstructionFile("AGENTS.md", b"x" * FILE_LIMIT)])
    assert "[term2:" not in text


def test_the_total_is_capped_and_what_is_left_out_is_named() -> None:
    files = [
        InstructionFile(f"{d}/AGENTS.md", mark.encode() * (FILE_LIMIT - 10))
        for d, mark in zip("abcd", "QWXZ", strict=True)
    ]
    text = render_instructions(files)
    assert section_paths(text) == ["a/AGENTS.md", "b/AGENTS.md", "c/AGENTS.md"]
    assert text.count("X") == TOTAL_LIMIT - 2 * (FILE_LIMIT - 10)
    assert "Z" not in text
    assert "[term2: project instructions cut at 64 KiB in total]" in text
    assert "[term2: not included, over the total cap: d/AGENTS.md]" in text


def test_a_cut_never_splits_a_character() -> None:
    data = "é".encode() * 10  # two bytes each
    assert cut_utf8(data, 5) == "é".encode() * 2
    assert cut_utf8("😀".encode(), 3) == b""
    assert cut_utf8(data, 100) == data


# --------------------------------------------------------------------------- discovery


def test_the_git_root_is_the_nearest_folder_with_a_git_entry(repo: Path) -> None:
    assert git_root(str(repo / "a" / "b")) == str(repo)
    (repo / "a" / ".git").write_text("gitdir: elsewhere\n")  # a worktree or submodule pointer counts too
    assert git_root(str(repo / "a" / "b")) == str(repo / "a")


def test_without_a_repository_only_the_cwd_speaks(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("above\n")
    cwd = tmp_path / "plain"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("here\n")
    text = ProjectInstructions(str(cwd)).current()
    assert section_paths(text) == ["AGENTS.md"]
    assert "here" in text and "above" not in text


def test_files_come_from_the_git_root_down_to_the_cwd(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("root rules\n")
    (repo / "a" / "AGENTS.md").write_text("a rules\n")
    (repo / "a" / "b" / "AGENTS.md").write_text("b rules\n")
    (repo / "a" / "b" / "c").mkdir()
    (repo / "a" / "b" / "c" / "AGENTS.md").write_text("below the cwd: not read\n")
    text = ProjectInstructions(str(repo / "a" / "b")).current()
    assert section_paths(text) == ["AGENTS.md", "a/AGENTS.md", "a/b/AGENTS.md"]
    assert text.index("root rules") < text.index("a rules") < text.index("b rules")
    assert "below the cwd" not in text


def test_fallbacks_are_read_only_where_no_agents_md_stands_beside_them(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("agents at root\n")
    (repo / "CLAUDE.md").write_text("claude at root\n")
    (repo / "a" / "CLAUDE.md").write_text("claude in a\n")
    (repo / "a" / "GEMINI.md").write_text("gemini in a\n")
    (repo / "a" / "b" / "GEMINI.md").write_text("gemini in b\n")
    text = ProjectInstructions(str(repo / "a" / "b")).current()
    assert section_paths(text) == ["AGENTS.md", "a/CLAUDE.md", "a/b/GEMINI.md"]
    assert "claude at root" not in text and "gemini in a" not in text


def test_a_fifo_named_agents_md_is_skipped_without_hanging(repo: Path) -> None:
    os.mkfifo(repo / "AGENTS.md")
    (repo / "CLAUDE.md").write_text("not the fallback either\n")
    (repo / "a" / "AGENTS.md").write_text("a rules\n")
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.append(ProjectInstructions(str(repo / "a")).current()))
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # unblock the thread before failing, so the run does not hang
        os.close(os.open(repo / "AGENTS.md", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading instructions blocked on a FIFO")
    assert section_paths(result[0]) == ["a/AGENTS.md"]


def test_a_symlink_named_agents_md_is_not_followed(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_text("outside the project\n")
    (repo / "AGENTS.md").symlink_to(secret)
    (repo / "a" / "AGENTS.md").symlink_to(repo / "a" / "real.md")
    (repo / "a" / "real.md").write_text("inside, but through a link\n")
    text = ProjectInstructions(str(repo / "a")).current()
    assert text == ""


def test_a_folder_named_agents_md_is_skipped(repo: Path) -> None:
    (repo / "AGENTS.md").mkdir()
    assert ProjectInstructions(str(repo)).current() == ""


def test_a_long_file_on_disk_is_read_only_up_to_its_cap(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "AGENTS.md").write_bytes(b"y" * (10 * FILE_LIMIT))
    asked: list[int] = []
    real = loader.read_upto
    monkeypatch.setattr(loader, "read_upto", lambda fd, limit: asked.append(limit) or real(fd, limit))
    text = ProjectInstructions(str(repo)).current()
    assert asked == [FILE_LIMIT + 1]
    assert "[term2: AGENTS.md cut at 32 KiB]" in text


# --------------------------------------------------------------------------- re-reading


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = loader._read

    def counting(top: str, entry: loader._Entry) -> object:
        reads.append(entry.path)
        return real(top, entry)

    monkeypatch.setattr(loader, "_read", counting)
    return reads


def test_unchanged_files_are_not_read_again(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "AGENTS.md").write_text("rules\n")
    reads = count_reads(monkeypatch)
    found = ProjectInstructions(str(repo))
    first = found.current()
    assert found.current() == first
    assert reads == ["AGENTS.md"]


def test_a_change_of_size_is_read_again(repo: Path) -> None:
    agents = repo / "AGENTS.md"
    agents.write_text("old\n")
    found = ProjectInstructions(str(repo))
    assert "old" in found.current()
    stat = agents.stat()
    agents.write_text("newer\n")
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime: only the size tells
    assert "newer" in found.current()


def test_a_change_of_mtime_alone_is_read_again(repo: Path) -> None:
    agents = repo / "AGENTS.md"
    agents.write_text("aaa\n")
    found = ProjectInstructions(str(repo))
    assert "aaa" in found.current()
    stat = agents.stat()
    agents.write_text("bbb\n")  # same size
    os.utime(agents, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert "bbb" in found.current()


def test_a_file_that_appears_or_goes_is_noticed(repo: Path) -> None:
    found = ProjectInstructions(str(repo / "a"))
    assert found.current() == ""
    (repo / "a" / "CLAUDE.md").write_text("claude\n")
    assert section_paths(found.current()) == ["a/CLAUDE.md"]
    (repo / "a" / "AGENTS.md").write_text("agents\n")
    assert section_paths(found.current()) == ["a/AGENTS.md"]
    (repo / "a" / "AGENTS.md").unlink()
    (repo / "a" / "CLAUDE.md").unlink()
    assert found.current() == ""
