"""Run the official-SDK scenario clients (conformance/clients/*.mjs) from pytest.

Usage from a test::

    result = run_scenario(2, ["uv", "run", "term2", "acp"], {"cwd": str(tmp), "steps": [...]}, tmp)
    assert result.summary["ok"], result.explain()
    result.validate_transcript()  # every line the agent wrote, against the JSON schema
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.schemas import (
    NPM_HINT,
    REPO_ROOT,
    SDK_DIR,
    SchemaRecorder,
    validate_transcript,
)

CLIENTS_DIR = REPO_ROOT / "conformance" / "clients"
MOCK_AGENT = CLIENTS_DIR / "mock-agent.mjs"
# The v1 clients of the kit, by SDK version: 1.4.0 (the package itself) and 2.4.0 (npm alias, ADR 0043).
V1_SDKS = {"1.4.0": "@agentclientprotocol/sdk", "2.4.0": "sdk24"}


def require_node_kit() -> str:
    """Path of `node`; raise (never skip) if Node or the npm packages are missing."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("`node` (v20+) is required for the ACP conformance kit")
    if not (SDK_DIR / "package.json").is_file():
        raise RuntimeError(f"@agentclientprotocol/sdk is not installed in {SDK_DIR}: {NPM_HINT}")
    return node


@dataclass
class ScenarioResult:
    version: int
    returncode: int
    summary: dict[str, Any]
    stderr: str
    transcript: Path

    def explain(self) -> str:
        return (
            f"v{self.version} scenario exit {self.returncode}\n"
            f"summary: {json.dumps(self.summary, indent=1)[:6000]}\n"
            f"stderr tail: {self.stderr[-3000:]}"
        )

    def validate_transcript(self) -> SchemaRecorder:
        return validate_transcript(self.version, self.transcript)


def run_scenario(
    version: int,
    agent_argv: list[str],
    config: dict[str, Any],
    workdir: Path,
    *,
    timeout: float = 120,
    env: dict[str, str] | None = None,
    sdk: str = "1.4.0",
) -> ScenarioResult:
    """Run ``v{version}-scenario.mjs`` against ``agent_argv`` and parse its summary.

    ``sdk`` picks the v1 client's SDK version (a key of ``V1_SDKS``); v2 always uses 1.4.0's.
    """
    node = require_node_kit()
    env = dict(env if env is not None else os.environ)
    env["ACP_V1_SDK"] = V1_SDKS[sdk]
    transcript = workdir / f"acp-v{version}-transcript.jsonl"
    script = CLIENTS_DIR / f"v{version}-scenario.mjs"
    cmd = [
        node,
        str(script),
        "--config",
        json.dumps(config),
        "--transcript",
        str(transcript),
    ]
    proc = subprocess.run(
        [*cmd, "--", *agent_argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env=env,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError(f"scenario printed no summary (exit {proc.returncode}); stderr:\n{proc.stderr[-3000:]}")
    summary = json.loads(lines[-1])
    return ScenarioResult(version, proc.returncode, summary, proc.stderr, transcript)
