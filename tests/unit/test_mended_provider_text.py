"""What a provider says reaches the turn with no lone surrogate: error bodies, litellm's events and errors.

The streamed JSON of the native wires and litellm's chunks are covered end to end by the LLM contract
suite (`test_lone_surrogates_a_provider_escapes_arrive_mended`); these are the other ways in.
"""

from __future__ import annotations

import json

import httpx

from term2.adapters.llm.http_errors import error_from_event, error_from_response, parse_error_body
from term2.adapters.llm.litellm_errors import map_litellm_error
from term2.adapters.llm.mended_events import StreamMender, mended_event
from term2.domain.transcript import ReasoningBlock, ToolCallRequest
from term2.domain.turn import FinishReason
from term2.ports.llm import Finished, LLMEvent, ReasoningReady, TextDelta, ThoughtDelta, ToolCallReady


def test_an_error_body_escaping_a_lone_surrogate_is_told_mended() -> None:
    body = rb'{"error": {"message": "bad \ud800 input", "type": "invalid_request_error"}}'
    assert parse_error_body(body).message == "bad \ufffd input"
    error = error_from_response(400, httpx.Headers(), body, "openai/m")
    assert "bad \ufffd input" in str(error)
    str(error).encode("utf-8")
    in_stream = error_from_event(json.loads(body), "openai/m")  # an error event inside a 200 stream
    assert "bad \ufffd input" in str(in_stream)


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


def test_a_stream_mender_joins_a_pair_split_across_deltas_and_keeps_the_order() -> None:
    mender = StreamMender()
    out: list[LLMEvent] = []
    for event in (
        TextDelta("ab\ud83d"),  # the high half waits for the next text delta
        ThoughtDelta("t\ud83d"),  # another kind keeps its own half
        TextDelta("\ude00c"),
        ThoughtDelta("x"),  # no low half follows: the thought's half is lone
        TextDelta("d\ud800"),
        Finished(FinishReason.STOP),  # nothing is held past the end
    ):
        out.extend(mender.feed(event))
    assert out == [
        TextDelta("ab"),
        ThoughtDelta("t"),
        TextDelta("\U0001f600c"),
        ThoughtDelta("\ufffdx"),
        TextDelta("d"),
        TextDelta("\ufffd"),
        Finished(FinishReason.STOP),
    ]


def test_a_stream_mender_passes_clean_events_as_they_are() -> None:
    mender = StreamMender()
    events: list[LLMEvent] = [TextDelta("plain 😀"), ThoughtDelta("é"), Finished(FinishReason.STOP)]
    for event in events:
        assert mender.feed(event) == [event] and mender.feed(event)[0] is event
