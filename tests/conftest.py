"""Shared fixtures: the anyio backend, a real `term2 acp` process factory and the local fake LLM."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import FakeLLMServer, start_fake_llm
from tests.support.acp_process import AcpProcess


@pytest.fixture(scope="session", autouse=True)
def _log_files_of_the_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every term2 a test starts writes its log file (ADR 0045) under this run's temporary folder,
    never into the machine's ~/.local/state, unless the test names its own state folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
        yield


@pytest.fixture
def anyio_backend() -> str:
    """Every async test runs on asyncio, once: litellm relies on it (aiohttp), and trio is not supported."""
    return "asyncio"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    with start_fake_llm() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text("# demo project\n")
    return root


@pytest.fixture
def acp(tmp_path: Path) -> Iterator[Callable[..., AcpProcess]]:
    started: list[AcpProcess] = []

    def spawn(*args: str, **kwargs: Any) -> AcpProcess:
        proc = AcpProcess(tmp_path, tuple(args), **kwargs)
        started.append(proc)
        return proc

    yield spawn
    for proc in started:
        proc.kill()


def llm_env(server: FakeLLMServer, model: str = "openai/fake-model") -> dict[str, str]:
    """Point term2 at the fake server through the same variables a litellm user sets."""
    return {"TERM2_MODEL": model, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url + "/v1"}
