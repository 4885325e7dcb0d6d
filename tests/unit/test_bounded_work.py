"""Every hint and diff term2 computes for the model is bounded in steps, whatever the input (issue 18.4).

The bound is counted in the matcher's own steps, so these tests hold on any
machine: the inputs that froze term2 for seconds (7,000 identical lines; a
600-line snippet against a 0.7 MB file) must finish inside the budget, and
the answers must stay correct (a coarse patch still applies with git).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

import pytest

from term2.domain import diff, near_match
from term2.domain.bounded_match import BoundedMatcher, Budget, OverBudget


class _Recording(Budget):
    made: ClassVar[list[_Recording]] = []

    def __init__(self, steps: int) -> None:
        super().__init__(steps)
        self.limit = steps
        _Recording.made.append(self)


@pytest.fixture
def budgets(monkeypatch: pytest.MonkeyPatch) -> list[_Recording]:
    _Recording.made = []
    monkeypatch.setattr(diff, "Budget", _Recording)
    monkeypatch.setattr(near_match, "Budget", _Recording)
    return _Recording.made


def test_a_matcher_refuses_a_search_before_doing_more_than_its_budget() -> None:
    budget = Budget(50_000)
    with pytest.raises(OverBudget):
        BoundedMatcher(["x"] * 1000, ["x"] * 1000, budget).get_opcodes()
    assert budget.spent <= 50_000  # the search that would overrun was refused before it ran


IDENTICAL = "x\n" * 7000
ALTERNATING = "".join("x\n" if i % 2 else "z\n" for i in range(7000))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (IDENTICAL, "x\n" * 3500 + "y\n" + "x\n" * 3500),
        (IDENTICAL, ALTERNATING),
        ("".join(f"v{i % 37}\n" for i in range(5000)), "".join(f"v{i % 41}\n" for i in range(5000))),
    ],
)
def test_repetitive_diffs_stay_within_their_budget(budgets: list[_Recording], old: str, new: str) -> None:
    change = diff.describe_change("/w/f", old, new)
    assert budgets and all(b.spent <= b.limit for b in budgets)
    assert change.patch and change.added >= 1


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_a_diff_past_its_budget_is_one_hunk_that_still_applies(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text(IDENTICAL)
    change = diff.describe_change(str(target), IDENTICAL, ALTERNATING, steps=10_000)
    assert change.patch is not None and change.patch.count("@@ -") == 1
    subprocess.run(["git", "apply", "--unsafe-paths", "-"], input=change.patch.encode(), cwd="/", check=True)
    assert target.read_text() == ALTERNATING


def test_only_the_changed_middle_is_split_into_lines() -> None:
    head = "line\n" * 2_000_000  # 10 MB that both sides share
    change = diff.describe_change("/w/f", head + "old\n" + head, head + "new\n" + head)
    assert (change.added, change.removed) == (1, 1)
    assert change.patch is not None and "@@ -1999998,7 +1999998,7 @@" in change.patch


def test_a_change_too_large_to_render_is_counted_not_patched() -> None:
    change = diff.describe_change("/w/f", "a\n" * 600_000, "b\n" * 600_000)
    assert change == diff.Change(600_000, 600_000, None)


def test_a_long_snippet_against_a_large_file_stays_within_the_hint_budget(budgets: list[_Recording]) -> None:
    lines = [f"    value_{i} = compute({i * 7919 % 1_000_003}) + {i}  # " + "pad " * 5 for i in range(12_000)]
    snippet = "\n".join(line.replace("compute", "komput") for line in lines[5000:5600])
    near = near_match.closest_lines("\n".join(lines), snippet)
    assert near is not None and near.first_line == 5001
    assert budgets and all(b.spent <= b.limit for b in budgets)


def test_a_hint_that_runs_out_of_budget_answers_with_what_it_found() -> None:
    lines = ["".join("ab "[(i * j) % 3] for j in range(300)) for i in range(2000)]
    near = near_match.closest_lines("\n".join(lines), "\n".join(lines[100:700]), steps=200_000)
    assert near is None or 1 <= near.first_line <= 2000


def test_hint_line_numbers_count_newlines_as_read_file_does() -> None:
    text = "one\ftwo\nthree = 3\n"  # a form feed is not a line break for read_file
    near = near_match.closest_lines(text, "three = 4")
    assert near is not None and near.first_line == 2
