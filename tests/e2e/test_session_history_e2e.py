"""Issue 29 parts 2 and 3 end to end: thread titles and `session/delete`, on a real `term2 acp` (ACP v1).

Titles: the first prompt names the session (one line, escaped, bounded); the
client is told with `session_info_update` as the turn starts, and
`session/list` returns the title, in this process and the next. Delete: the
session, its history and its archived outputs are gone from `list`, `load`
and the disk, here and after a restart; a running turn is cancelled and
settled first; an unknown session is an error. v2 offers neither (its page).
Every message is validated against the version's schema on close.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_native_wires_e2e import openai_env
from tests.e2e.test_prompts import (
    FIRST_TURN_TIMEOUT,
    make_workspace,
    prompt_params,
    run_v1,
    slow_stream,
)
from tests.fakes.llm_server import start_fake_llm
from tests.support.acp_process import AcpProcess, allow_kind, is_update, updates

Message = dict[str, Any]


def listed(client: AcpProcess) -> dict[str, Message]:
    return {s["sessionId"]: s for s in client.result("session/list", {})["sessions"]}


def load(client: AcpProcess, sid: str, workspace: Path) -> Message:
    return client.call("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})


def test_the_first_prompt_titles_the_session_in_an_update_and_in_the_list(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push({"text": "On it."}, {"text": "Done."})
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            client.initialize(1)
            sid = client.new_session(workspace)
            assert "title" not in listed(client)[sid]
            first = run_v1(client, sid, "  Fix the\nlogin\tbug \u202e\x1b[31m now  ", timeout=FIRST_TURN_TIMEOUT)
            infos = updates(first, "session_info_update")
            expected = "Fix the login bug \\u202e\\x1b[31m now"  # one line; nothing in it acts on a display
            assert [i["title"] for i in infos] == [expected], infos
            assert infos[0]["updatedAt"]
            entry = listed(client)[sid]
            assert entry["title"] == expected and entry["updatedAt"] >= infos[0]["updatedAt"]
            second = run_v1(client, sid, "And another thing", timeout=FIRST_TURN_TIMEOUT)
            assert updates(second, "session_info_update") == []  # later prompts leave the title alone
        finally:
            client.close()
        client.validate_schemas()

        again = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            again.initialize(1)
            assert listed(again)[sid]["title"] == expected
            assert "result" in load(again, sid, workspace)
            assert listed(again)[sid]["title"] == expected
        finally:
            again.close()
        again.validate_schemas()


def test_delete_removes_the_session_its_history_and_its_outputs_here_and_after_a_restart(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push(
            {"tool_calls": [{"name": "run_shell", "arguments": {"command": "seq 1 40000"}}]},
            {"text": "Counted."},
        )
        client = AcpProcess(tmp_path, env=openai_env(llm), permission=allow_kind("allow_once"))
        try:
            init = client.initialize(1)
            assert init["agentCapabilities"]["sessionCapabilities"]["delete"] == {}
            doomed, kept = client.new_session(workspace), client.new_session(workspace)
            done = run_v1(client, doomed, "Count to forty thousand", timeout=FIRST_TURN_TIMEOUT)
            assert done[-1]["result"]["stopReason"] == "end_turn", done[-1]
            archived = client.home / "outputs" / doomed
            assert any(archived.iterdir()), "the long output was not archived"

            assert client.result("session/delete", {"sessionId": doomed}) == {}
            assert set(listed(client)) == {kept}
            assert load(client, doomed, workspace)["error"]["code"] == -32602
            assert not archived.exists()
            assert client.call("session/delete", {"sessionId": doomed})["error"]["code"] == -32602
            assert (client.home / "outputs").exists()  # only the session's own folder went
        finally:
            client.close()
        client.validate_schemas()

        again = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            again.initialize(1)
            assert set(listed(again)) == {kept}
            assert load(again, doomed, workspace)["error"]["code"] == -32602
            assert again.call("session/delete", {"sessionId": "sess_unknown"})["error"]["code"] == -32602
            assert "result" in load(again, kept, workspace)
        finally:
            again.close()
        again.validate_schemas()


def test_deleting_a_running_session_cancels_and_settles_its_turn_first(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        llm.push(slow_stream(words=400, delay=0.2))
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            client.initialize(1)
            sid = client.new_session(workspace)
            prompt_id = client.request("session/prompt", prompt_params(sid, "talk"))
            client.collect_until(is_update(sid, "agent_message_chunk"), timeout=FIRST_TURN_TIMEOUT)  # running now
            delete_id = client.request("session/delete", {"sessionId": sid})
            seen: dict[int, Message] = {}

            def both(message: Message) -> bool:
                if message.get("id") in (prompt_id, delete_id) and "method" not in message:
                    seen[message["id"]] = message
                return len(seen) == 2

            client.collect_until(both, timeout=30)  # in either order: each settles on its own task
            assert seen[prompt_id]["result"]["stopReason"] == "cancelled", seen[prompt_id]
            assert seen[delete_id]["result"] == {}, seen[delete_id]
            assert sid not in listed(client)
            assert client.call("session/prompt", prompt_params(sid, "again"))["error"]["code"] == -32602
        finally:
            client.close()
        client.validate_schemas()


def test_v2_offers_no_delete(tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path)
    with start_fake_llm() as llm:
        client = AcpProcess(tmp_path, env=openai_env(llm))
        try:
            init = client.initialize(2)
            assert init["capabilities"] == {"session": {}}
            sid = client.new_session(workspace)
            assert client.call("session/delete", {"sessionId": sid})["error"]["code"] == -32601
            assert sid in listed(client)
        finally:
            client.close()
        client.validate_schemas()
