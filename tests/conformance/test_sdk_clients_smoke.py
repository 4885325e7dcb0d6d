"""Prove the conformance kit itself: the official-SDK scenario clients driven
against the SDK-built mock agent, with every agent line schema-validated.

If this fails, the kit is broken (not term2). Needs Node 20+ and
`npm ci --prefix conformance`; missing pieces fail loudly, never skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# `tests` is not a package on pytest's default sys.path (rootdir isn't added).
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sdk_clients import MOCK_AGENT, require_node_kit, run_scenario

FULL_STEPS = [
    "initialize",
    "session/new",
    "session/list",
    {"op": "prompt", "text": "hi"},
    {"op": "prompt", "text": "needs permission"},
    {"op": "cancel", "text": "long task"},
    {"op": "cancel", "text": "permission then cancel", "when": "permission"},
    "session/close",
    "resume",
]


def _mock_argv() -> list[str]:
    return [require_node_kit(), str(MOCK_AGENT)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("version", [1, 2])
def test_full_scenario_against_mock(version: int, tmp_path: Path) -> None:
    config = {"cwd": str(tmp_path), "steps": FULL_STEPS, "permissions": ["allow_once"]}
    result = run_scenario(version, _mock_argv(), config, tmp_path)
    s = result.summary
    assert result.returncode == 0 and s["ok"], result.explain()
    assert s["initialize"]["protocolVersion"] == version
    assert s["stopReasons"] == ["end_turn", "end_turn", "cancelled", "cancelled"]
    assert s["texts"][:2] == ["Hello world", "Hello world"]
    assert [p["answer"] for p in s["permissionRequests"]] == ["allow_once", "cancelled"]
    cancel_steps = [step for step in s["steps"] if step["op"] == "cancel"]
    assert [c["cancelTrigger"] for c in cancel_steps] == ["first_chunk", "permission"]
    assert s["steps"][2]["containsCurrent"] is True
    assert s["replay"]["texts"]["agent"] == "Hello worldHello world"
    assert s["errors"] == [] and s["problems"] == []

    recorder = result.validate_transcript()
    assert recorder.validated > 20
    assert recorder.pending == {}, "client requests the agent never answered"


@pytest.mark.timeout(60)
def test_v2_turn_shape_against_mock(tmp_path: Path) -> None:
    config = {"cwd": str(tmp_path), "steps": ["initialize", "new", "prompt"]}
    result = run_scenario(2, _mock_argv(), config, tmp_path)
    assert result.summary["ok"], result.explain()
    kinds = result.summary["steps"][2]["updateKinds"]
    assert kinds[0] == "user_message" and kinds[-1] == "state_update"
    result.validate_transcript()


@pytest.mark.timeout(60)
def test_agent_error_is_reported_with_code(tmp_path: Path) -> None:
    steps = ["initialize", {"op": "prompt", "sessionId": "nope", "expectError": -32002}]
    result = run_scenario(
        2, _mock_argv(), {"cwd": str(tmp_path), "steps": steps}, tmp_path
    )
    assert result.summary["ok"], result.explain()
    assert result.summary["errors"][0]["code"] == -32002
    result.validate_transcript()


@pytest.mark.timeout(60)
def test_sdk_rejection_fails_the_client_and_the_schema(tmp_path: Path) -> None:
    # A v2 chunk without messageId: the SDK drops it (we flag that) and the
    # JSON schema rejects it.
    env = {**os.environ, "MOCK_AGENT_BUG": "chunk-without-message-id"}
    config = {"cwd": str(tmp_path), "steps": ["initialize", "new", "prompt"]}
    result = run_scenario(2, _mock_argv(), config, tmp_path, env=env)
    assert result.returncode != 0 and not result.summary["ok"]
    assert any("Error handling notification" in p for p in result.summary["problems"])
    with pytest.raises(AssertionError, match="messageId"):
        result.validate_transcript()


@pytest.mark.timeout(60)
def test_schema_catches_what_the_sdk_tolerates(tmp_path: Path) -> None:
    # A naive updatedAt is silently dropped by the v2 TS client, so only the
    # schema check notices it: the reason transcripts are validated at all.
    env = {**os.environ, "MOCK_AGENT_BUG": "naive-updated-at"}
    config = {"cwd": str(tmp_path), "steps": ["initialize", "new", "list"]}
    result = run_scenario(2, _mock_argv(), config, tmp_path, env=env)
    assert result.summary["ok"], result.explain()
    assert "updatedAt" not in result.summary["steps"][2]["sessions"][0]
    with pytest.raises(AssertionError, match="date-time"):
        result.validate_transcript()
