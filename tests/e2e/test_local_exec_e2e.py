"""Issue 33, item 4: `term2 exec` against a server that reports no usage (llama-cpp-python while streaming).

The real `term2 exec` process, on a pseudo-terminal and with `--json`, against the fake's
llama.cpp-like mode. Nothing counted the turn's tokens, so nothing may show a count: the terminal says
"usage not reported"; the result line has no `usage` and says so.
Against the OpenAI fake, which does count, the numbers are shown as before.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import llm_env
from tests.e2e.test_prompts import write_config
from tests.fakes.llama_cpp_like import LlamaSettings
from tests.fakes.llm_server import start_fake_llm
from tests.support.exec_process import PtyExec, exec_env, run_piped

MODEL = "openai/fake-model"
WINDOW = 200_000


def _prepare(base: Path) -> tuple[Path, Path]:
    root = base / "project"
    root.mkdir()
    (root / "README.md").write_text("# demo\n")
    write_config(base, f'[models."{MODEL}"]\ncontext_window = {WINDOW}\n')
    return root, base / "term2-home"


def test_exec_on_a_terminal_never_shows_uncounted_usage_as_zeros(tmp_path: Path) -> None:
    root, home = _prepare(tmp_path)
    with start_fake_llm(llama_cpp=LlamaSettings(n_ctx=WINDOW)) as llm:
        llm.push({"text": "Hello there."})
        proc = PtyExec(["say hi"], exec_env(home, llm_env(llm, MODEL)), root)
        try:
            assert proc.wait() == 0
            shown = proc.text()
        finally:
            proc.kill()
    # the context is the server's own count, asked for once (ADR 0049); the turn's tokens nobody counted
    assert "── end turn · usage not reported · context " in shown, shown[-500:]
    assert " in · " not in shown and "0 out" not in shown, shown[-500:]


def test_exec_json_has_no_usage_when_the_server_counted_none(tmp_path: Path) -> None:
    root, home = _prepare(tmp_path)
    with start_fake_llm(llama_cpp=LlamaSettings(n_ctx=WINDOW)) as llm:
        ran = run_piped(["--json", "say hi"], exec_env(home, llm_env(llm, MODEL)), root)
    assert ran.status == 0, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    assert result["type"] == "result" and result["stopReason"] == "end_turn"
    assert result["usage"] is None and result["usageReported"] is False, result
    idle = json.loads(ran.stdout.splitlines()[-2])["update"]
    assert idle["state"] == "idle" and "usage" not in idle, idle


def test_exec_json_keeps_counted_usage(tmp_path: Path) -> None:
    root, home = _prepare(tmp_path)
    with start_fake_llm() as llm:
        ran = run_piped(["--json", "say hi"], exec_env(home, llm_env(llm, MODEL)), root)
    assert ran.status == 0, ran.stderr
    result = json.loads(ran.stdout.splitlines()[-1])
    assert result["usageReported"] is True and result["usage"]["inputTokens"] > 0, result
