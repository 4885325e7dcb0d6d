"""Bounding what a tool result costs in the transcript, without losing any of it.

Every result enters the model's transcript at most ``RESULT_LIMIT``
characters long: a build log or a test run that printed a megabyte would
otherwise fill the context window on its own, in this request and in every
later one. The head and the tail are kept (the tail is where a log says what
failed), and the whole text goes to the session's output archive, outside the
workspace, with the marker naming the id `read_output` pages through.
"""

from __future__ import annotations

from term2.app.clock import new_id
from term2.domain.truncation import keep_ends
from term2.ports.outputs import OutputArchive
from term2.support.deferred_log import get_logger

RESULT_LIMIT = 40_000  # characters (~10k tokens); read_file's cap stays below it

log = get_logger("term2.results")


async def bounded_result(text: str, session_id: str, outputs: OutputArchive | None) -> str:
    if len(text) <= RESULT_LIMIT:
        return text
    lines = text.count("\n") + 1
    output_id = new_id("out")
    marker = "\n[... {cut} characters cut for the context window ...]\n"
    if outputs is not None:
        try:
            await outputs.keep(session_id, output_id, text)
        except (OSError, ValueError) as exc:
            log.warning("could not keep a long tool result", session_id=session_id, error=str(exc))
        else:
            marker = (
                "\n[... {cut} characters cut for the context window; the whole output "
                f'({lines:,} lines) is kept: call read_output with output_id "{output_id}" '
                "and offset/limit to read it ...]\n"
            )
    return keep_ends(text, RESULT_LIMIT, marker)
