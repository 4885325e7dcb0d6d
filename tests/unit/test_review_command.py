"""`/review [ref]` (ADR 0044): the ref becomes one word of a fixed git command, or is refused.

The command runs in the sandbox without a question, so nothing the user (or a pasted
text) puts after `/review` may become an option of git or a word of the shell.
"""

from __future__ import annotations

import shlex

import pytest

from term2.app.commands import COMMANDS, invoked, review_command, review_prompt, review_ref
from term2.domain.content import TextBlock


@pytest.mark.parametrize("ref", ["main", "HEAD~2", "main..HEAD", "v1.2.3", "origin/feature-x", "HEAD^", "abc123"])
def test_plain_refs_are_one_quoted_word(ref: str) -> None:
    assert review_ref(ref) == ref
    words = shlex.split(review_command(ref))
    assert words[-1] == ref and words.count(ref) == 1
    assert "--no-ext-diff" in words and "--no-textconv" in words and "--no-pager" in words


@pytest.mark.parametrize(
    "typed", ["--output=/tmp/x", "-p", "main; rm -rf .", "$(id)", "`id`", "a b", "main|cat", "'x'", "x\ny", "../x>y"]
)
def test_anything_else_is_refused(typed: str) -> None:
    with pytest.raises(ValueError, match="one git ref"):
        review_ref(typed)


def test_no_ref_reviews_the_uncommitted_changes() -> None:
    assert review_ref("") is None
    command = review_command(None)
    assert "diff HEAD" in command and "status --short" in command
    assert "uncommitted changes" in review_prompt(None, command, "")


def test_commands_are_recognised_only_as_the_whole_prompt() -> None:
    found = invoked((TextBlock("/review main..HEAD"),))
    assert found is not None and (found.name, found.argument) == ("review", "main..HEAD")
    assert invoked((TextBlock("please /review"),)) is None and invoked((TextBlock("/reviewer"),)) is None
    hints = {c.name: c.hint for c in COMMANDS}
    assert hints["review"] and hints["init"] is None
