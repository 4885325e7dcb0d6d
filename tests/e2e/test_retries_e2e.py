"""Issue 12, retries: a real `term2 acp`, real litellm, the fake provider failing the way real ones do.

A transient failure before the first content delta is sent again after a
backoff the client sees as a thought chunk; failures waiting cannot cure end
the turn after one request; a cancel during a backoff settles the turn at once.
Timing is asserted only as lower bounds (the provider's Retry-After honoured)
or as bounds far below the wait asked for (the cancel), never as exact times.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_prompts import (
    Rig,
    drain,
    idle_update,
    is_idle,
    of_session,
    prompt_params,
    run_v1,
    run_v2,
    shared_rig,
    text_of,
)
from tests.fakes.llm_server import QUOTA_EXCEEDED
from tests.support.acp_process import bare, is_update, updates

Message = dict[str, Any]


@pytest.fixture(scope="module")
def v2_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with shared_rig(tmp_path_factory.mktemp("retries-v2"), 2, {}) as rig:
        yield rig


@pytest.fixture
def v2(v2_rig: Rig) -> Iterator[Rig]:
    drain(v2_rig.client)
    v2_rig.llm.state.reset()
    yield v2_rig
    v2_rig.client.validate_schemas()


def notices(messages: list[Message]) -> list[str]:
    texts = [str(u["content"]["text"]) for u in updates(messages, "agent_thought_chunk")]
    # v1 puts each notice on its own line (ADR 0046); v2 sends it as it was
    return [text.strip("\n") for text in texts if text.strip("\n").startswith("Retrying in")]


def said(messages: list[Message]) -> str:
    return str(updates(messages, "agent_message_chunk")[-1]["content"]["text"])


def test_rate_limits_with_retry_after_are_waited_out_and_announced(v2: Rig) -> None:
    limited = {"status": 429, "headers": {"retry-after": "1"}}
    v2.llm.push(limited, limited, {"text": "made it"})
    sid = v2.client.new_session(v2.workspace)
    _, messages = run_v2(v2.client, sid, "hi")
    assert idle_update(messages)["stopReason"] == "end_turn"
    assert text_of(updates(messages, "agent_message_chunk")) == "made it"
    requests = v2.llm.requests
    assert len(requests) == 3
    gaps = [later.started_at - earlier.started_at for earlier, later in pairwise(requests)]
    assert all(gap >= 1.0 for gap in gaps), gaps  # the provider's Retry-After is a floor
    first, second = notices(messages)
    assert first == "Retrying in 1 s (2/6): rate limited by the provider"  # the floor beats a 0.5-1 s step
    found = re.fullmatch(r"Retrying in ([\d.]+) s \(3/6\): rate limited by the provider", second)
    assert found and 1.0 <= float(found.group(1)) <= 2.0, second  # a 1-2 s step: above the floor already


def test_a_503_is_retried_once_then_the_answer_streams(v2: Rig) -> None:
    v2.llm.push({"status": 503}, {"text": "back again"})
    sid = v2.client.new_session(v2.workspace)
    _, messages = run_v2(v2.client, sid, "hi")
    assert idle_update(messages)["stopReason"] == "end_turn"
    assert len(v2.llm.requests) == 2
    [notice] = notices(messages)
    assert notice.startswith("Retrying in ") and notice.endswith("(2/6): the provider failed (HTTP 503)"), notice
    assert text_of(updates(messages, "agent_message_chunk")) == "back again"


@pytest.mark.parametrize(
    ("reply", "needles"),
    [({"status": 401}, ("401", "authentication")), (QUOTA_EXCEEDED, ("429", "quota"))],
    ids=["401", "insufficient_quota"],
)
def test_failures_waiting_cannot_cure_are_reported_after_one_request(
    v2: Rig, reply: dict[str, Any], needles: tuple[str, ...]
) -> None:
    v2.llm.push(reply, {"text": "must not be asked for"})
    sid = v2.client.new_session(v2.workspace)
    _, messages = run_v2(v2.client, sid, "hi")
    assert idle_update(messages)["stopReason"] == "_term2_error"
    assert len(v2.llm.requests) == 1
    assert notices(messages) == []
    text = said(messages).lower()
    assert text.startswith("term2 could not finish this turn") and "fake-model" in text, text
    assert all(needle in text for needle in needles), text


def test_a_cancel_during_a_long_backoff_settles_the_turn_at_once(v2: Rig) -> None:
    v2.llm.push({"status": 429, "headers": {"retry-after": "60"}}, {"text": "too late"})
    sid = v2.client.new_session(v2.workspace)
    request_id = v2.client.request("session/prompt", prompt_params(sid, "hi"))
    v2.client.collect_until(is_update(sid, "agent_thought_chunk"), timeout=30)
    v2.client.notify("session/cancel", {"sessionId": sid})
    # The provider asked for 60 s: settling within this 30 s guard shows the backoff did not hold the cancel.
    tail = of_session(v2.client.collect_until(is_idle(sid), timeout=30), sid, request_id)
    assert idle_update(tail)["stopReason"] == "cancelled"
    assert len(v2.llm.requests) == 1


def test_v1_hears_the_retry_as_a_thought_chunk(tmp_path: Path) -> None:
    with shared_rig(tmp_path, 1, {}) as rig:
        rig.llm.state.reset()
        rig.llm.push({"status": 529, "error_type": "overloaded_error"}, {"text": "fine now"})
        sid = rig.client.new_session(rig.workspace)
        messages = run_v1(rig.client, sid, "hi")
        assert bare(messages[-1]["result"]) == {"stopReason": "end_turn"}
        assert len(notices(messages)) == 1 and len(rig.llm.requests) == 2
        assert text_of(updates(messages, "agent_message_chunk")) == "fine now"
