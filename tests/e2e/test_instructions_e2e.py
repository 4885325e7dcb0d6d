"""Issue 12, project instructions end to end: AGENTS.md files reach the model through a real `term2 acp`.

The session's cwd is a subfolder of a git repository; the repository's
AGENTS.md and the subfolder's must both be in the system message of the
request the fake model server records, root first, and an edit between two
prompts must be in the very next request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import llm_env
from tests.fakes.llm_server import RecordedRequest, start_fake_llm
from tests.support.acp_process import AcpProcess

FIRST_TURN_TIMEOUT = 240.0  # pays for importing litellm


def system_message(request: RecordedRequest) -> str:
    first: dict[str, Any] = request.body["messages"][0]
    assert first["role"] == "system", first
    content = first["content"]
    if isinstance(content, list):  # some providers' shape: a list of text parts
        return "".join(part["text"] for part in content)
    assert isinstance(content, str)
    return content


def test_nested_agents_md_reach_the_model_in_order_and_an_edit_reaches_the_next_request(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    service = repo / "services" / "api"
    service.mkdir(parents=True)
    (repo / "AGENTS.md").write_text("ROOT RULE: run `make test` before finishing.\n")
    (service / "AGENTS.md").write_text("SERVICE RULE v1: indent with tabs.\n")
    (service / "CLAUDE.md").write_text("CLAUDE RULE: shadowed by the AGENTS.md beside it.\n")

    with start_fake_llm() as server:
        client = AcpProcess(tmp_path, env=llm_env(server))
        try:
            client.initialize(2)
            sid = client.new_session(service)
            client.prompt_v2(sid, "hello", timeout=FIRST_TURN_TIMEOUT)
            first = system_message(server.requests[0])
            assert "You are term2" in first
            root_at = first.index('<project_instructions path="AGENTS.md">\nROOT RULE: run `make test`')
            service_at = first.index(
                '<project_instructions path="services/api/AGENTS.md">\nSERVICE RULE v1: indent with tabs.'
            )
            assert root_at < service_at
            assert "CLAUDE RULE" not in first

            (service / "AGENTS.md").write_text("SERVICE RULE v2: indent with four spaces.\n")
            client.prompt_v2(sid, "again", timeout=60.0)
            second = system_message(server.requests[-1])
            assert len(server.requests) == 2
            assert "SERVICE RULE v2: indent with four spaces." in second
            assert "SERVICE RULE v1" not in second
            assert "ROOT RULE" in second

            assert client.close() == 0, client.stderr()[-3000:]
            client.validate_schemas()
        finally:
            client.kill()
