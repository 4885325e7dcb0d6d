"""What a file change shows: the client, a bounded diff; the model, only what it may read.

Two audiences, two rules (ADR 0019):

* The model's provider learns whatever a tool result holds. An edit
  permission is not a read permission, so a result carries old content (a
  patch's context and removed lines, the closest lines to a missed
  old_string) only where the model could read the file without asking.
  Elsewhere it says what was done and that the old text is not shown.
* The client is the user's own editor, which may show the user the file
  anyway; it gets the diff, but never more than DIFF_CONTENT_BYTES of it in
  one update or permission request: a larger change is one line of counts.

Everything here blocks (it diffs): callers run it in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from term2.app.tools import names
from term2.domain.diff import Change, describe_change, fits_an_update, too_large_note
from term2.domain.history import DiffOutput, TextOutput, ToolOutput
from term2.domain.truncation import keep_head
from term2.domain.workspace import Access
from term2.ports.tools import ToolContext

PATCH_LIMIT = 8 * 1024  # patch text echoed back to the model


def may_read(ctx: ToolContext, path: str) -> bool:
    """Whether the model could read `path` now without asking: only then may a result show its old text."""
    return not ctx.access.workspace.needs_approval(Access.READ, path)


@dataclass(frozen=True, slots=True)
class ShownChange:
    text: str  # the model's
    content: ToolOutput  # the client's


def client_content(path: str, old: str | None, new: str, change: Change | None = None) -> ToolOutput:
    """The diff for the client, or a line of counts when it is too large for one update.

    `path` is the canonical one. The diff's path is what an editor acts on (shows, reviews, reverts), so it
    is the exact name (names.for_editor), not the shown one the model is given; a name that is not UTF-8 has
    no exact form, so its diff names the file as shown and is marked so (`exact_path=False`): an ACP client
    gets it as text, a terminal draws it as any diff. `change` is the model's, named as shown, reused where
    the names agree.
    """
    name = names.shown(path)
    exact = names.for_editor(path)
    if fits_an_update(old, new):
        if exact is None or exact == name:
            change = change or describe_change(name, old, new)
        else:
            change = describe_change(exact, old, new)
        if change.patch is not None:
            return DiffOutput(exact or name, old, new, patch=change.patch, exact_path=exact is not None)
    return TextOutput(too_large_note(name, change or describe_change(name, old, new, max_chars=0)))


def not_applied(path: str, what: str, rule: str) -> str:
    """Why an edit of a file the model may not read failed, in the same words whatever the reason (ADR 0042).

    Missing, ambiguous, too large, not text, absent: each of these would tell the model something of the
    file, so it learns one bit, that the edit did not apply, and the rule its call must keep.
    """
    name = names.shown(path)
    return (
        f"{what} did not apply to {name}; nothing was written. term2 says no more, not even why, because reading "
        f"{name} needs the user's approval (ask for it with read_file). {rule}"
    )


def show_change(path: str, old: str | None, new: str, verb: str, *, old_readable: bool) -> ShownChange:
    """The model's one-line summary (with the patch where it may read the file) and the client's diff."""
    name = names.shown(path)
    change = describe_change(name, old, new)
    content = client_content(path, old, new, change)
    if old is not None and not old_readable:
        text = f"{verb} {name}; what it held before is not shown: reading {name} needs the user's approval\n"
        return ShownChange(text, content)
    summary = f"{verb} {name} (+{change.added} -{change.removed})\n"
    if change.patch is None:
        return ShownChange(summary + "(the diff is too large to show)\n", content)
    if not change.patch:
        return ShownChange(summary + "(no change)\n", content)
    return ShownChange(summary + keep_head(change.patch, PATCH_LIMIT, "\n[patch truncated]\n"), content)
