"""The agent loop retries transient provider failures, tells the client, and never retries a shown answer.

The backoff's sleep and random draw are injected: the tests record what the
loop asked to sleep instead of sleeping, except the cancel test, which sleeps
for real to prove the turn's cancel scope reaches the backoff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from term2.adapters.llm.scripted import Response, ScriptedProvider, text_response
from term2.app.agent_loop import Backoff, run_loop
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.domain.history import HistoryEntry
from term2.domain.retry import RetryPolicy
from term2.domain.transcript import ModelMessage
from term2.domain.turn import StopReason, TurnLimits
from term2.domain.workspace import SessionAccess
from term2.ports.llm import (
    AuthenticationFailed,
    BadRequest,
    ChatMessage,
    ContextWindowExceeded,
    LLMError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
    ReasoningBlock,
    ReasoningReady,
    TextDelta,
    ThoughtDelta,
)
from term2.ports.tools import ToolContext
from term2.ports.updates import Notice, SessionEvent
from tests.fakes.transcripts import transcript_of
from tests.fakes.turns import live_turn

pytestmark = pytest.mark.anyio


class Harness:
    def __init__(self, tmp_path: Path, *script: Response, policy: RetryPolicy | None = None) -> None:
        self.llm = ScriptedProvider(script)
        self.events: list[SessionEvent] = []
        self.recorded: list[HistoryEntry] = []
        self.slept: list[float] = []
        self.limits = TurnLimits(max_model_requests=5, retry=policy or RetryPolicy())
        self.ctx = ToolContext(
            "s1", SessionAccess(str(tmp_path)), cast(Any, None), cast(Any, None), self._emit, self._record, live_turn()
        )

    async def _emit(self, event: SessionEvent) -> None:
        self.events.append(event)

    async def _record(self, entry: HistoryEntry) -> None:
        self.recorded.append(entry)

    async def _sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    async def run(self, backoff: Backoff | None = None) -> StopReason:
        transcript = transcript_of(ChatMessage("user", "hi"), record=self._record)
        chosen = backoff or Backoff(sleep=self._sleep, jitter=lambda: 0.0)
        return await run_loop(transcript, self.llm, WorkspaceToolbox(), self.ctx, self.limits, backoff=chosen)

    def shown(self) -> list[HistoryEntry]:
        """The client's history: what the transcript keeps for the model is left out."""
        return [e for e in self.recorded if not isinstance(e, ModelMessage)]

    def notices(self) -> list[str]:
        return [e.text for e in self.events if isinstance(e, Notice) and e.text.startswith("Retrying")]


async def test_rate_limits_are_waited_out_with_the_providers_floor_and_announced(tmp_path: Path) -> None:
    limited = RateLimited("Rate limited by m (HTTP 429): slow down", status=429, retry_after=2.0)
    h = Harness(tmp_path, limited, limited, text_response("done"))
    assert await h.run() is StopReason.END_TURN
    assert len(h.llm.requests) == 3
    assert h.slept == [2.0, 2.0]  # the floor beats the first steps (0.5 s, 1 s at zero jitter)
    assert h.notices() == [
        "Retrying in 2 s (2/6): rate limited by the provider",
        "Retrying in 2 s (3/6): rate limited by the provider",
    ]
    notices = [e for e in h.events if isinstance(e, Notice) and e.text.startswith("Retrying")]
    assert all(n.fallback == "thought" and n.severity == "warning" for n in notices)
    assert len({n.message_id for n in notices}) == 2
    assert [getattr(e, "text", None) for e in h.shown()] == ["done"]  # progress is not conversation


async def test_server_errors_timeouts_and_unreachable_providers_are_retried(tmp_path: Path) -> None:
    failures = (
        LLMError("Provider error from m (HTTP 503): overloaded", status=503),
        LLMError("Provider error from m (HTTP 529): overloaded", status=529),
        ProviderTimeout("Timed out waiting for m"),
        ProviderUnreachable("Cannot reach m"),
    )
    h = Harness(tmp_path, *failures, text_response("done"))
    assert await h.run() is StopReason.END_TURN
    assert len(h.llm.requests) == 5
    assert h.slept == [0.5, 1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationFailed("Authentication failed for m (HTTP 401)", status=401),
        AuthenticationFailed("Permission denied for m (HTTP 403)", status=403),
        QuotaExceeded("Quota exceeded for m (HTTP 429)", status=429),
        BadRequest("m rejected the request (HTTP 400)", status=400),
        ContextWindowExceeded("Context window exceeded for m (HTTP 400)", status=400),
        LLMError("Cannot load the LLM library for m"),
    ],
    ids=["401", "403", "quota", "400", "context", "no-status"],
)
async def test_failures_that_time_cannot_cure_end_the_turn_at_once(tmp_path: Path, error: LLMError) -> None:
    h = Harness(tmp_path, error, text_response("never"))
    with pytest.raises(type(error)):
        await h.run()
    assert len(h.llm.requests) == 1 and h.slept == [] and h.notices() == []


@pytest.mark.parametrize("shown", [TextDelta("partial "), ThoughtDelta("thinking")])
async def test_a_response_that_already_showed_content_is_never_retried(tmp_path: Path, shown: Any) -> None:
    h = Harness(tmp_path, [shown, LLMError("Provider error from m (HTTP 500): gone", status=500)], text_response("x"))
    with pytest.raises(LLMError):
        await h.run()
    assert len(h.llm.requests) == 1 and h.slept == []
    assert len(h.shown()) == 1  # what was shown is kept in the history, as before
    kept = [e for e in h.recorded if isinstance(e, ModelMessage)]
    # The model sees the text it showed; a bare thought (no signed block to return) is nothing to send back.
    expected = [] if isinstance(shown, ThoughtDelta) else [("assistant", "partial ")]
    assert [(m.message.role, m.message.content) for m in kept] == expected


async def test_a_retried_response_leaves_no_reasoning_behind(tmp_path: Path) -> None:
    """A redacted thinking block streams nothing to show; the retry must start from the user's message."""
    block = ReasoningBlock("redacted_thinking", "opaque")
    failed = [ReasoningReady(block), LLMError("Provider error from m (HTTP 529): overloaded", status=529)]
    h = Harness(tmp_path, failed, text_response("done"))
    assert await h.run() is StopReason.END_TURN
    assert len(h.llm.requests) == 2
    assert h.llm.requests[1].messages[-1].role == "user"  # no assistant turn left from the failed attempt


async def test_attempts_are_capped_and_the_last_error_ends_the_turn(tmp_path: Path) -> None:
    errors = [LLMError(f"Provider error from m (HTTP 503): #{n}", status=503) for n in range(4)]
    h = Harness(tmp_path, *errors, text_response("never"), policy=RetryPolicy(max_attempts=3))
    with pytest.raises(LLMError, match="#2"):
        await h.run()
    assert len(h.llm.requests) == 3 and len(h.slept) == 2
    assert [n.split(":")[0] for n in h.notices()] == ["Retrying in 0.5 s (2/3)", "Retrying in 1 s (3/3)"]


async def test_the_total_wait_is_capped(tmp_path: Path) -> None:
    limited = RateLimited("Rate limited by m (HTTP 429)", status=429, retry_after=40.0)
    h = Harness(tmp_path, limited, limited, limited, text_response("never"), policy=RetryPolicy(max_wait=100.0))
    with pytest.raises(RateLimited):
        await h.run()
    assert h.slept == [40.0, 40.0]  # a third 40 s would pass 100 s: the error is reported instead


async def test_a_cancel_during_the_backoff_ends_at_once(tmp_path: Path) -> None:
    limited = RateLimited("Rate limited by m (HTTP 429)", status=429, retry_after=60.0)
    h = Harness(tmp_path, limited, text_response("never"))
    with anyio.fail_after(10):  # a bound far below the 60 s the provider asked for
        with anyio.CancelScope() as scope:

            async def cancel_once_announced() -> None:
                while not h.notices():
                    await anyio.sleep(0.01)
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_once_announced)
                await h.run(Backoff())  # the real anyio.sleep
    assert scope.cancelled_caught
    assert len(h.llm.requests) == 1
