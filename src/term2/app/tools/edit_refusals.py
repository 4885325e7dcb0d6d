"""What a refused edit tells the model: the places it matched, or the closest lines, so the next call lands.

Only for files the model may read (ADR 0019, 0042): elsewhere an edit says only that it did not apply.
"""

from __future__ import annotations

from term2.app.tools import names
from term2.domain.near_match import closest_lines
from term2.domain.text_edits import Edit, Refused
from term2.domain.tolerant_match import Ambiguous
from term2.domain.truncation import ellipsize, keep_head

HINT_LINE_CHARS = 300  # of each line a near-match hint shows (a minified file's one line is megabytes)
HINT_CHARS = 8 * 1024  # of a whole hint


def forgiven(edits: tuple[Edit, ...], tolerances: tuple[tuple[int, str], ...]) -> str:
    """What the tolerance chain forgave, said first so the model checks the diff below against its intent."""
    said = "".join(
        f"{_which(edits, index)}old_string did not match exactly; it matched one place after {how}.\n"
        for index, how in tolerances
    )
    return said + "Check the diff below.\n"


def _which(edits: tuple[Edit, ...], index: int) -> str:
    return f"edit {index + 1}: " if len(edits) > 1 else ""


def refusal(path: str, edits: tuple[Edit, ...], refused: Refused) -> str:
    """Why an edit of a file the model may read failed, with the places or the closest lines to fix it by."""
    which = _which(edits, refused.index)
    tail = "; no edit was applied" if len(edits) > 1 else ""
    why = refused.why
    if isinstance(why, Ambiguous):
        return which + ambiguity(path, refused.text, why, "old_string") + tail
    message = not_found(path, refused.text, edits[refused.index].old)
    if why.why is not None:
        message += f" ({why.why})"
    if refused.index:
        message += f" (the {refused.index} edit{'s' if refused.index > 1 else ''} before it applied first)"
    return which + message + tail


def ambiguity(path: str, text: str, why: Ambiguous, subject: str) -> str:
    """A refusal naming every place found (as far as MAX_PLACES), with its lines: only where the model may read."""
    count = f"more than {why.count - 1}" if why.more else str(why.count)
    how = f" (after {why.tolerance})" if why.tolerance else ""
    lines = text.split("\n")
    spans = []
    shown = []
    for first, last in why.places:
        spans.append(f"{first}" if first == last else f"{first}-{last}")
        shown += [f"{n:>6}\t{ellipsize(lines[n - 1], HINT_LINE_CHARS)}" for n in range(first, min(last, first + 4) + 1)]
        if last > first + 4:
            shown.append("       [...]")
        shown.append("")
    listing = keep_head("\n".join(shown), HINT_CHARS, "\n[... more places]")
    times = "times" if why.tolerance is None else "places"
    return (
        f"{subject} matches {count} {times} in {names.shown(path)}{how}: lines {', '.join(spans)} "
        f"(line numbers are not part of the file):\n{listing}\n"
        "term2 does not guess which one was meant: include more surrounding lines to make it unique"
        + (", or set replace_all to true" if why.tolerance is None and subject == "old_string" else "")
    )


def not_found(path: str, text: str, old_string: str, subject: str = "old_string", tool: str = "edit_file") -> str:
    message = f"{subject} was not found in {names.shown(path)}"
    near = closest_lines(text, old_string)
    if near is None:
        return message + "; read the file and copy the text exactly"
    last = near.first_line + len(near.lines) - 1
    numbered = (f"{near.first_line + i:>6}\t{ellipsize(line, HINT_LINE_CHARS)}" for i, line in enumerate(near.lines))
    shown = keep_head("\n".join(numbered), HINT_CHARS, "\n[... more lines]")
    where = f"line {near.first_line}" if last == near.first_line else f"lines {near.first_line}-{last}"
    return (
        f"{message}. The closest text is at {where} (line numbers are not part of the file):\n{shown}\n"
        f"Copy the text exactly from there (whitespace included) and call {tool} again."
    )
