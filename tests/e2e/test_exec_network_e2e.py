"""A host the proxy refused is drawn in `term2 exec`'s view of the call (issue 30, item 12).

The real `term2 exec` on a pseudo-terminal, the fake model asking for a command or a program with one
host approved that then asks for another: the user approves on the terminal, and the line naming the
refused host must be on the screen under the call, for a program that ended well too.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.e2e.test_exec_e2e import Setup, setup

__all__ = ["setup"]

if not os.path.exists("/usr/bin/bwrap"):
    pytest.skip("/usr/bin/bwrap is not installed", allow_module_level=True)

REFUSED = "[blocked: refused.invalid was not approved]"
PROGRAM = (
    "import urllib.request\n"
    "try:\n"
    "    urllib.request.urlopen('http://refused.invalid/', timeout=20)\n"
    "except Exception as exc:\n"
    "    print('refused:', exc)\n"
)
CALLS: dict[str, dict[str, Any]] = {
    "run_shell": {"command": "curl -sS -o /dev/null http://refused.invalid/; echo done"},
    "run_code": {"code": PROGRAM},
}


@pytest.mark.parametrize("tool", list(CALLS))
def test_the_refused_host_is_drawn_under_the_call(setup: Setup, tool: str) -> None:
    arguments = {**CALLS[tool], "network": ["registry.test"]}
    setup.llm.push({"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": "finished"})
    proc = setup.pty("fetch it")
    proc.expect("choose 1-2")
    proc.send(b"1\n")
    assert proc.wait() == 0
    shown = proc.text()
    assert "✓ execute" in shown and REFUSED in shown, shown[-2000:]
    assert "\\x18\\x1b[0m" not in shown  # the reset before the notices is for terminal emulators, not drawn
    assert REFUSED[1:-1] in setup.said_to_model()
