"""Issue 29 part 1 end to end: images pasted into a v1 prompt reach each provider in its own form.

A real `term2 acp` (ACP v1) against the fake provider servers, which refuse an
image part the real APIs would refuse (`tests/fakes/llm_image_rules.py`): the
OpenAI `image_url` data URL on the native wire and through litellm, Anthropic's
base64 `image` source on its native wire. The image is kept with the session:
a new process replays it on `session/load`, and the next turn sends it again.
A model without vision refuses the prompt by name before anything is recorded
or sent. Every message is validated against the v1 schema on close.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_native_wires_e2e import anthropic_env, openai_env
from tests.e2e.test_prompts import FIRST_TURN_TIMEOUT, make_workspace, run_v1, write_config
from tests.fakes.images import png
from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess, allow_kind, updates

Message = dict[str, Any]


PNG = base64.b64encode(png()).decode()
IMAGE_BLOCK: Message = {"type": "image", "mimeType": "image/png", "data": PNG}


def user_messages(server: FakeLLMServer, protocol: str) -> list[list[Message]]:
    """The content parts of every user message of every request of `protocol`, in order."""
    out = []
    for request in server.requests:
        if request.protocol != protocol or request.status != "completed":
            continue
        for message in request.body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                out.append(message["content"])
    return out


def openai_images(server: FakeLLMServer) -> list[str]:
    return [
        p["image_url"]["url"] for parts in user_messages(server, "openai") for p in parts if p["type"] == "image_url"
    ]


def anthropic_images(server: FakeLLMServer) -> list[Message]:
    return [b["source"] for parts in user_messages(server, "anthropic") for b in parts if b["type"] == "image"]


def takes_images(init: Message) -> bool:
    return bool(init["agentCapabilities"]["promptCapabilities"]["image"])


def start(tmp_path: Path, env: dict[str, str]) -> tuple[AcpProcess, Message]:
    client = AcpProcess(tmp_path, env=env, permission=allow_kind("allow_once"))
    return client, client.initialize(1)


@pytest.mark.parametrize("wire", ["openai", "litellm"])
def test_a_pasted_png_reaches_openai_as_a_data_url_and_replays_after_a_restart(tmp_path: Path, wire: str) -> None:
    workspace = make_workspace(tmp_path)
    write_config(tmp_path, f'[providers.openai]\nwire = "{wire}"\n')
    with start_fake_llm() as llm:
        llm.push({"text": "A grey square."}, {"text": "Still grey."})
        client, init = start(tmp_path, openai_env(llm))
        try:
            assert takes_images(init)  # gpt-4o-mini takes images (the catalog's supports_vision)
            sid = client.new_session(workspace)
            done = run_v1(client, sid, "What is in this picture?", IMAGE_BLOCK, timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", done[-1]
            assert openai_images(llm) == [f"data:image/png;base64,{PNG}"]
            first = user_messages(llm, "openai")[0]
            assert first[0]["type"] == "text" and "attached image 1" in first[0]["text"]
        finally:
            client.close()
        client.validate_schemas()

        again, _ = start(tmp_path, openai_env(llm))
        try:
            loaded = again.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            assert "result" in loaded, loaded
            replayed = [u["content"] for u in updates(again.log, "user_message_chunk")]
            assert {"type": "image", "mimeType": "image/png", "data": PNG} in replayed
            done = run_v1(again, sid, "And now?", timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", done[-1]
            # The second turn, in a new process, still shows the model the first turn's image (from the store).
            assert openai_images(llm) == [f"data:image/png;base64,{PNG}"] * 2
        finally:
            again.close()
        again.validate_schemas()


def test_a_pasted_png_reaches_anthropic_as_a_base64_image_block(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm(require_key="sk-ant-test") as llm:
        llm.push({"thought": "Grey.", "text": "A grey square."})
        client, init = start(tmp_path, anthropic_env(llm))
        try:
            assert takes_images(init)
            sid = client.new_session(workspace)
            done = run_v1(client, sid, "What is in this picture?", IMAGE_BLOCK, timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", (done[-1], [r.rejection for r in llm.requests])
            assert anthropic_images(llm) == [{"type": "base64", "media_type": "image/png", "data": PNG}]
        finally:
            client.close()
        client.validate_schemas()


def test_a_model_without_vision_refuses_the_image_by_name_and_sends_nothing(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        client, init = start(tmp_path, openai_env(llm, "openai/gpt-3.5-turbo"))
        try:
            assert not takes_images(init)
            sid = client.new_session(workspace)
            reply = client.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "look"}, IMAGE_BLOCK]}
            )
            assert reply["error"]["code"] == -32602, reply
            assert "gpt-3.5-turbo" in reply["error"]["message"] and "images" in reply["error"]["message"]
            assert llm.requests == []
            listed = client.result("session/list", {})["sessions"]
            assert [s.get("title") for s in listed] == [None]  # nothing recorded: not even the title
        finally:
            client.close()
        client.validate_schemas()


@pytest.mark.parametrize(
    ("block", "needle"),
    [
        ({"type": "image", "mimeType": "image/jpeg", "data": PNG}, "not image/jpeg"),
        ({"type": "image", "mimeType": "image/png", "data": base64.b64encode(b"GIF8not").decode()}, "not a PNG"),
        ({"type": "image", "mimeType": "image/png", "data": base64.b64encode(png(9000, 1)).decode()}, "9000x1"),
        (
            {"type": "resource", "resource": {"uri": "file:///x.png", "mimeType": "image/png", "blob": "%%"}},
            "not base64",
        ),
    ],
)
def test_an_image_a_provider_would_refuse_is_refused_with_a_clear_message(
    tmp_path: Path, block: Message, needle: str
) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        client, _init = start(tmp_path, openai_env(llm))
        try:
            sid = client.new_session(workspace)
            reply = client.call("session/prompt", {"sessionId": sid, "prompt": [block]})
            assert reply["error"]["code"] == -32602, reply
            assert needle in reply["error"]["message"], reply
            assert llm.requests == []
        finally:
            client.close()
        client.validate_schemas()


def test_an_image_resource_blob_is_sent_as_an_image(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push({"text": "Grey."})
        client, _init = start(tmp_path, openai_env(llm))
        try:
            sid = client.new_session(workspace)
            uri = (workspace / "shot.png").as_uri()
            resource = {"type": "resource", "resource": {"uri": uri, "mimeType": "image/png", "blob": PNG}}
            done = run_v1(client, sid, "see", resource, timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", done[-1]
            assert openai_images(llm) == [f"data:image/png;base64,{PNG}"]
            client.result("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            assert resource in [u["content"] for u in updates(client.log, "user_message_chunk")]  # as it came
        finally:
            client.close()
        client.validate_schemas()


def tool_images(server: FakeLLMServer, protocol: str) -> list[Any]:
    """The images that followed a tool result: OpenAI's in the user message after the results (term2's
    note first), Anthropic's inside the tool_result."""
    found: list[Any] = []
    for request in server.requests:
        if request.protocol != protocol or request.status != "completed":
            continue
        for message in request.body["messages"]:
            content = message["content"] if isinstance(message["content"], list) else []
            if protocol == "openai" and content and "images returned by the tool" in str(content[0].get("text")):
                found += [p["image_url"]["url"] for p in content if p["type"] == "image_url"]
            for block in content if protocol == "anthropic" else []:
                if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                    found += [b["source"] for b in block["content"] if b["type"] == "image"]
    return found


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_read_file_of_a_png_returns_it_to_a_vision_model(tmp_path: Path, protocol: str) -> None:
    workspace = make_workspace(tmp_path)
    (workspace / "shot.png").write_bytes(png())
    with start_fake_llm(require_key="sk-ant-test" if protocol == "anthropic" else None) as llm:
        llm.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "shot.png"}}]}, {"text": "Grey."})
        client, _ = start(tmp_path, anthropic_env(llm) if protocol == "anthropic" else openai_env(llm))
        try:
            sid = client.new_session(workspace)
            done = run_v1(client, sid, "What is in shot.png?", timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", (done[-1], [r.rejection for r in llm.requests])
            expected = (
                [f"data:image/png;base64,{PNG}"]
                if protocol == "openai"
                else [{"type": "base64", "media_type": "image/png", "data": PNG}]
            )
            assert tool_images(llm, protocol) == expected
            assert client.permission_requests == []  # a file in the workspace: read without asking
        finally:
            client.close()
        client.validate_schemas()


def test_read_file_of_a_png_is_a_note_for_a_model_without_vision(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    (workspace / "shot.png").write_bytes(png())
    with start_fake_llm() as llm:
        llm.push({"tool_calls": [{"name": "read_file", "arguments": {"path": "shot.png"}}]}, {"text": "Hm."})
        client, _ = start(tmp_path, openai_env(llm, "openai/gpt-3.5-turbo"))
        try:
            sid = client.new_session(workspace)
            done = run_v1(client, sid, "What is in shot.png?", timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", (done[-1], [r.rejection for r in llm.requests])
            [result] = [m for m in llm.requests[-1].body["messages"] if m["role"] == "tool"]
            assert "does not take images" in result["content"]
            assert tool_images(llm, "openai") == []
        finally:
            client.close()
        client.validate_schemas()


@pytest.mark.parametrize("where", ["outside", "dotenv"])
def test_an_image_outside_the_workspace_asks_first_and_a_refusal_sends_nothing(tmp_path: Path, where: str) -> None:
    """The image a link names is read only by the model's read_file, through its gate: a file outside the
    workspace, or a `.env` (here one holding PNG bytes) inside it, is asked about; refused, nothing is sent."""
    workspace = make_workspace(tmp_path)
    outside = tmp_path / "elsewhere.png" if where == "outside" else workspace / ".env"
    outside.write_bytes(png())
    with start_fake_llm() as llm:
        llm.push({"tool_calls": [{"name": "read_file", "arguments": {"path": str(outside)}}]}, {"text": "Ok."})
        client = AcpProcess(tmp_path, env=openai_env(llm), permission=allow_kind("reject_once"))
        try:
            client.initialize(1)
            sid = client.new_session(workspace)
            link = {"type": "resource_link", "uri": outside.as_uri(), "name": "elsewhere.png"}
            done = run_v1(client, sid, "look at this", link, timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", done[-1]
            assert len(client.permission_requests) == 1  # the read of a file outside the workspace was asked
            assert tool_images(llm, "openai") == [] and openai_images(llm) == []
        finally:
            client.close()
        client.validate_schemas()


def test_an_mcp_image_result_reaches_a_vision_model(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    repo = str(Path(__file__).resolve().parents[2])
    server = {
        "name": "fake",
        "command": sys.executable,
        "args": ["-m", "tests.fakes.mcp_server", "--record", str(tmp_path / "calls.jsonl"), "--marker", "m"],
        "env": [{"name": "PYTHONPATH", "value": repo}],
    }
    with start_fake_llm() as llm:
        llm.push({"tool_calls": [{"name": "mcp__fake__picture", "arguments": {}}]}, {"text": "Grey."})
        client, _ = start(tmp_path, openai_env(llm))
        try:
            sid = client.result("session/new", {"cwd": str(workspace), "mcpServers": [server]})["sessionId"]
            done = run_v1(client, sid, "Show me the picture", timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", (done[-1], [r.rejection for r in llm.requests])
            assert tool_images(llm, "openai") == [f"data:image/png;base64,{PNG}"]
        finally:
            client.close()
        client.validate_schemas()


def test_a_declared_local_model_takes_images_when_the_config_says_so(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    write_config(tmp_path, '[models."openai/my-local-vlm"]\nprovider = "openai"\nimages = true\n')
    with start_fake_llm() as llm:
        llm.push({"text": "Grey."})
        client, init = start(tmp_path, openai_env(llm, "openai/my-local-vlm"))
        try:
            assert takes_images(init)
            sid = client.new_session(workspace)
            done = run_v1(client, sid, "What is this?", IMAGE_BLOCK, timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", (done[-1], [r.rejection for r in llm.requests])
            assert openai_images(llm) == [f"data:image/png;base64,{PNG}"]
        finally:
            client.close()
        client.validate_schemas()


def test_a_long_session_never_sends_more_images_than_a_request_takes(tmp_path: Path) -> None:
    """Anthropic takes at most 100 images a request: six prompts of 20 would break every later request.
    term2 leaves the oldest out, and the message that lost them says so."""
    workspace = make_workspace(tmp_path)
    with start_fake_llm(require_key="sk-ant-test") as llm:
        llm.push(*({"thought": "Seen.", "text": f"Batch {n} seen."} for n in range(6)))
        client, _ = start(tmp_path, anthropic_env(llm))
        try:
            sid = client.new_session(workspace)
            for batch in range(6):
                blocks = [f"batch {batch}", *[IMAGE_BLOCK] * 20]
                done = run_v1(client, sid, *blocks, timeout=FIRST_TURN_TIMEOUT)
                assert done[-1]["result"]["stopReason"] == "end_turn", (batch, [r.rejection for r in llm.requests])
            last = llm.requests[-1].body["messages"]
            sent = [b for m in last if m["role"] == "user" for b in m["content"] if b["type"] == "image"]
            assert len(sent) == 100
            texts = [b["text"] for m in last if m["role"] == "user" for b in m["content"] if b["type"] == "text"]
            assert any("20 image(s) of this message left out" in t for t in texts), texts
        finally:
            client.close()
        client.validate_schemas()
