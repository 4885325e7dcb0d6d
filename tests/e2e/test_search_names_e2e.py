"""A file name that is not UTF-8 through grep, glob and list_dir in a real `term2 acp` (issue 20, item 4).

Before ripgrep and names.py, such a name failed the whole turn: the session
store could not encode a result holding a lone surrogate. Now the turn ends
normally, every call completes, and the model and the client see the name
escaped (`caf\\xe9.txt`) in a form list_dir accepts back.
"""

from __future__ import annotations

import json
import os

from tests.e2e import test_tools_e2e as tools

agent, _clean_script = tools.module_agent("search-names")


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def test_a_non_utf8_name_through_grep_glob_and_list_dir(agent: tools.Agent) -> None:
    folder = os.path.join(os.fsencode(agent.root), b"names-\xe9")
    os.mkdir(folder)
    with open(os.path.join(folder, b"caf\xe9.txt"), "wb") as f:
        f.write(b"needle-e2e\n")
    messages = agent.turn(
        agent.session(),
        call("grep", pattern="needle-e2e"),
        call("glob", pattern="caf*"),
        call("list_dir", path="names-\\xe9"),
    )
    assert tools.idle(messages)["stopReason"] == "end_turn"
    calls = list(tools.tool_calls(messages).values())
    assert [c["status"] for c in calls] == ["completed"] * 3, calls
    texts = [tools.text_of(c) for c in calls]
    assert texts == ["names-\\xe9/caf\\xe9.txt:1:needle-e2e\n", "names-\\xe9/caf\\xe9.txt\n", "caf\\xe9.txt\n"]
    sent = json.dumps([r.body for r in agent.llm.requests])
    assert "names-\\\\xe9/caf\\\\xe9.txt:1:needle-e2e" in sent  # the model got the result, escaped
