"""The official TypeScript SDK clients (v1 and experimental/v2) hold whole
conversations with a real `term2 acp`, backed by the local fake LLM.

v1 is driven by both the 1.4.0 and the 2.4.0 SDK clients; every line term2
writes is validated against 2.4.0's v1 schema (v1) or 1.4.0's v2 draft (v2).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import llm_env
from tests.fakes.llm_server import FakeLLMServer
from tests.support.sdk_clients import V1_SDKS, run_scenario

STEPS = [
    "initialize",
    "session/new",
    "session/list",
    {"op": "prompt", "text": "say hello"},
    {"op": "prompt", "text": "write outside the project (allowed)"},
    {"op": "prompt", "text": "write outside the project (rejected)"},
    {"op": "cancel", "text": "a long answer", "when": "first_chunk"},
    {"op": "cancel", "text": "ask permission, then cancel", "when": "permission"},
    "session/close",
    "resume",
]


def _script(outside: Path) -> list[dict[str, object]]:
    write = lambda name: {  # noqa: E731
        "tool_calls": [{"name": "write_file", "arguments": {"path": str(outside / name), "content": name}}]
    }
    return [
        {"text": "Hello world"},
        write("allowed.txt"),
        {"text": "wrote it"},
        write("rejected.txt"),
        {"text": "could not write it"},
        {"text": " ".join(f"word{i}" for i in range(200)), "chunk_delay": 0.05},
        write("cancelled.txt"),
    ]


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("version", "sdk"), [(1, "1.4.0"), (1, "2.4.0"), (2, "1.4.0")])
def test_official_sdk_client_full_conversation(
    version: int, sdk: str, tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    fake_llm.push(*_script(outside))
    env = dict(os.environ)
    env.update(llm_env(fake_llm))
    env.update({"TERM2_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    config = {
        "cwd": str(workspace),
        "steps": STEPS,
        "permissions": ["allow_once", "reject_once", "cancelled"],
        "timeoutMs": 60000,
    }
    result = run_scenario(
        version, [sys.executable, "-m", "term2", "acp"], config, tmp_path, env=env, timeout=220, sdk=sdk
    )
    s = result.summary
    assert result.returncode == 0 and s["ok"], result.explain()
    assert version == 2 or s["sdk"] == V1_SDKS[sdk]
    assert s["initialize"]["protocolVersion"] == version
    assert s["stopReasons"] == ["end_turn", "end_turn", "end_turn", "cancelled", "cancelled"], result.explain()
    assert s["texts"][0] == "Hello world"
    assert [p["answer"] for p in s["permissionRequests"]] == ["allow_once", "reject_once", "cancelled"]
    assert (outside / "allowed.txt").read_text() == "allowed.txt"
    assert not (outside / "rejected.txt").exists()
    assert not (outside / "cancelled.txt").exists()
    assert s["replay"]["texts"]["agent"].startswith("Hello world")
    assert s["errors"] == [] and s["problems"] == []
    recorder = result.validate_transcript()
    assert recorder.validated > 20
    assert recorder.pending == {}


@pytest.mark.timeout(240)
def test_sdk_24_client_pastes_an_image_sees_the_title_and_deletes_the_thread(
    tmp_path: Path, workspace: Path, fake_llm: FakeLLMServer
) -> None:
    """Issue 29 with the official 2.4.0 client: an image prompt to a vision model (gpt-4o-mini, the
    native OpenAI wire), the title in `session_info_update` and `session/list`, then `session/delete`."""
    import base64

    from tests.fakes.images import png

    fake_llm.push({"text": "A grey square."})
    env = dict(os.environ)
    env.update(
        {
            "TERM2_MODEL": "openai/gpt-4o-mini",
            "OPENAI_API_KEY": "sk-test",
            "OPENAI_BASE_URL": fake_llm.base_url + "/v1",
            "TERM2_HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        }
    )
    data = base64.b64encode(png()).decode()
    image = {"type": "image", "mimeType": "image/png", "data": data}
    config = {
        "cwd": str(workspace),
        "steps": [
            "initialize",
            "session/new",
            {"op": "prompt", "prompt": [{"type": "text", "text": "What is this?"}, image]},
            {"op": "wait_update", "kind": "session_info_update"},
            "session/list",
            "session/delete",
            "session/list",
            {"op": "load", "expectError": -32602},
        ],
        "timeoutMs": 60000,
    }
    result = run_scenario(
        1, [sys.executable, "-m", "term2", "acp"], config, tmp_path, env=env, timeout=220, sdk="2.4.0"
    )
    s = result.summary
    assert result.returncode == 0 and s["ok"], result.explain()
    caps = s["initialize"]["agentCapabilities"]
    assert caps["promptCapabilities"]["image"] is True and caps["sessionCapabilities"]["delete"] == {}
    assert s["stopReasons"] == ["end_turn"]
    steps = {step["index"]: step for step in s["steps"]}
    assert steps[3]["update"]["title"] == "What is this?"  # the user's words, not the image's note
    [listed] = steps[4]["sessions"]
    assert listed["title"] == "What is this?"
    assert steps[6]["sessions"] == []
    sent = [p for m in fake_llm.requests[-1].body["messages"] if m["role"] == "user" for p in m["content"]]
    assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}} in sent
    recorder = result.validate_transcript()
    assert recorder.pending == {}
