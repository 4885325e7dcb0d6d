"""What an empty answer from a model server is reported as (issue 33).

Some servers (llama-cpp-python among them) raise inside the stream after the
200 and the event-stream headers, so every server-side failure reaches term2
as the same empty body: a prompt too long for the window, a tool_choice the
chat format cannot stream, an assertion. Only the numbers tell them apart, so
the message follows them: the overflow wording only when term2's estimate is
above the window, otherwise "the server sent an empty answer" with what may
have caused it and where the real cause is (the server's log).
"""

from __future__ import annotations

from term2.ports.llm import ContextWindowExceeded, IncompleteResponse, LLMError

# Chat formats the docs know to fail this way (docs/configuration.md § Local models): the message names them.
_TOOL_CHOICE_CAUSE = (
    "llama-cpp-python's chatml-function-calling and functionary chat formats cannot stream a tool call and answer "
    'such a request with nothing; set stream = false under [models."<id>"] for a server that cannot stream tool calls, '
    "or use a server whose tool calls stream (docs/configuration.md, Local models)"
)


def empty_answer_error(
    exc: IncompleteResponse, tokens: int, window: int | None, too_long: str, *, near: bool = False
) -> LLMError:
    """The turn's end after an empty answer; ``too_long`` is the overflow wording, for an estimate above the window,
    and ``near`` says the estimate is close enough to the window that the server's own count may pass it."""
    if window is not None and tokens > window:
        return ContextWindowExceeded(too_long)
    size = f"about {tokens:,} of its {window:,} tokens" if window is not None else f"about {tokens:,} tokens"
    answer = "an empty answer" if exc.empty else "an answer that stopped short"
    text = (
        f"The server sent {answer} to a request of {size} (term2's estimate): it may have failed, and its log says why."
    )
    if exc.tool_choice is not None:
        text += f' The request carried tool_choice "{exc.tool_choice}": {_TOOL_CHOICE_CAUSE}.'
    if near:
        text += (
            " The request is near the window, and the server may count more tokens than term2 estimates: if its "
            "log says the prompt is too long, start the server with a larger context or start a new session."
        )
    if window is None:
        text += (
            " Some servers answer a prompt too long for their context this way: declare the model's "
            "context_window in config.toml."
        )
    return LLMError(text)
