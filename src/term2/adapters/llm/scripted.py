"""A deterministic `LLMProvider` that replays scripted responses.

Why: the agent loop's unit tests and the LLM contract suite need a provider
whose every event, error and timing is chosen by the test, with no HTTP and no
litellm import. It is also the reference implementation of the port contract:
exactly one Finished last, errors only from the LLMError family, and closing
the stream early is observable (`aborted_streams`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence

import anyio

from term2.domain.turn import FinishReason
from term2.ports.llm import (
    CompletionRequest,
    Finished,
    LLMError,
    LLMEvent,
    TextDelta,
    ToolCallReady,
    ToolCallRequest,
)

ScriptItem = LLMEvent | LLMError
Response = LLMError | Sequence[ScriptItem]


class ScriptExhausted(LLMError):
    """stream() was called more often than the script has responses (a test bug)."""

    def __init__(self) -> None:
        super().__init__("scripted provider: no responses left in the script")


class ScriptedProvider:
    """Consumes one scripted response per `stream()` call and records the requests.

    A response is a list of events, possibly containing an `LLMError` (raised
    when reached, so events before it are delivered first), or a bare
    `LLMError` raised at call time. A response without `Finished` gets one
    appended: TOOL_CALLS if it contained tool calls, else STOP.
    """

    def __init__(self, script: Iterable[Response] = (), *, delay: float = 0.0) -> None:
        self._script: deque[Response] = deque(script)
        self.delay = delay  # seconds before each event, to make streams cancellable
        self.requests: list[CompletionRequest] = []
        self.completed_streams = 0
        self.aborted_streams = 0  # closed or cancelled before the end: the "HTTP stream" closed
        self.closed = False

    def push(self, *responses: Response) -> None:
        """Queue more responses (e.g. from inside a test after inspecting a request)."""
        self._script.extend(responses)

    @property
    def remaining(self) -> int:
        return len(self._script)

    def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        """Record the request and take the next response now; replay it lazily.

        Errors (including an exhausted script) surface on iteration, where a real
        provider's would.
        """
        self.requests.append(request)
        response = self._script.popleft() if self._script else ScriptExhausted()
        return self._replay(response)

    async def _replay(self, response: Response) -> AsyncIterator[LLMEvent]:
        if isinstance(response, LLMError):
            raise response
        completed = False
        try:
            for item in _with_finish(response):
                if self.delay:
                    await anyio.sleep(self.delay)
                if isinstance(item, LLMError):
                    completed = True  # ended by the script, not by the consumer
                    raise item
                yield item
            completed = True
        finally:
            if completed:
                self.completed_streams += 1
            else:
                self.aborted_streams += 1

    async def prepare(self) -> None:
        """Nothing to load: the script is in memory."""

    async def keep_connected(self) -> None:
        """No connection to keep."""

    async def aclose(self) -> None:
        self.closed = True


def _with_finish(response: Sequence[ScriptItem]) -> list[ScriptItem]:
    items = list(response)
    if any(isinstance(i, (Finished, LLMError)) for i in items):
        return items
    calls = any(isinstance(i, ToolCallReady) for i in items)
    return [*items, Finished(FinishReason.TOOL_CALLS if calls else FinishReason.STOP)]


def text_response(text: str, *pieces: str) -> list[ScriptItem]:
    """A plain answer; `pieces` (if given) are the deltas instead of one `text` delta."""
    return [TextDelta(p) for p in (pieces or (text,))]


def tool_call_response(*calls: tuple[str, str, str], text: str = "") -> list[ScriptItem]:
    """A response asking for tools; each call is (call_id, name, arguments_json)."""
    items: list[ScriptItem] = [TextDelta(text)] if text else []
    items.extend(ToolCallReady(ToolCallRequest(cid, name, args)) for cid, name, args in calls)
    return items
