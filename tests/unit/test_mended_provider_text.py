"""What a provider says reaches the turn with no lone surrogate: error bodies, litellm's events and errors.

The streamed JSON of the native wires and litellm's chunks are covered end to end by the LLM contract
suite (`test_lone_surrogates_a_provider_escapes_arrive_mended`); these are the other ways in.
"""

from __future__ import annotations

import httpx

from term2.adapters.llm.http_errors import error_from_response, parse_error_body
from term2.adapters.llm.litellm_errors import map_litellm_error
from term2.adapters.llm.mended_events import mended_event
from term2.domain.transcript import ReasoningBlock, ToolCallRequest
from term2.domain.turn import FinishReason
from term2.ports.llm import Finished, ReasoningReady, TextDelta, ThoughtDelta, ToolCallReady


def test_an_error_body_escaping_a_lone_surrogate_is_told_mended() -> None:
    body = rb'{"error": {"message": "bad \ud800 input", "type": "invalid_request_error"}}'
    assert parse_error_body(body).message == "bad \ufffd input"
    error = error_from_response(400, httpx.Headers(), body, "openai/m")
    assert "bad \ufffd input" in str(error)
    str(error).encode("utf-8")


def test_a_litellm_error_holding_a_lone_surrogate_is_mended() -> None:
    error = map_litellm_error(RuntimeError("upstream said \udc00"), "openai/m")
    assert "upstream said \ufffd" in str(error)
    str(error).encode("utf-8")


def test_litellm_events_are_mended_and_clean_ones_kept_as_they_are() -> None:
    assert mended_event(TextDelta("a\ud800")) == TextDelta("a\ufffd")
    assert mended_event(ThoughtDelta("\udc00")) == ThoughtDelta("\ufffd")
    call = ToolCallReady(ToolCallRequest("c\ud800", "read_file", '{"path": "a\udc00"}'))
    assert mended_event(call) == ToolCallReady(ToolCallRequest("c\ufffd", "read_file", '{"path": "a\ufffd"}'))
    thought = ReasoningReady(ReasoningBlock("thinking", "t\ud800", "sig"))
    assert mended_event(thought) == ReasoningReady(ReasoningBlock("thinking", "t\ufffd", "sig"))
    for clean in (TextDelta("a 😀"), call.__class__(ToolCallRequest("c", "n", "{}")), Finished(FinishReason.STOP)):
        assert mended_event(clean) is clean
