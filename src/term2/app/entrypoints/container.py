"""The composition root: the only module that imports dependency-injector.

Every adapter is chosen here from configuration; tests swap any of them with
`container.<provider>.override(...)`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dependency_injector import containers, providers

from term2.adapters.catalog.litellm_catalog import LitellmCatalog
from term2.adapters.llm.litellm_provider import LiteLLMProvider
from term2.adapters.sandbox.bubblewrap import BubblewrapSandbox
from term2.adapters.store.sqlite_store import SqliteSessionStore
from term2.app.config import Settings, config_path
from term2.app.prompting import PromptService
from term2.app.provider_settings import provider_settings
from term2.app.sessions import SessionRegistry, SessionService
from term2.app.tools.toolbox import WorkspaceToolbox
from term2.domain.turn import TurnLimits
from term2.ports.llm import LLMProvider


def _llm(settings: Settings, env: Mapping[str, str], catalog: LitellmCatalog) -> LLMProvider:
    return LiteLLMProvider(provider_settings(settings, env, catalog))


def _store_path(settings: Settings, env: Mapping[str, str]) -> Path:
    return settings.data_dir(env) / "sessions.sqlite3"


def _own_paths(settings: Settings, env: Mapping[str, str]) -> tuple[str, ...]:
    """term2's own data and configuration: hidden from commands, never inside a workspace."""
    config = config_path(env)
    return (str(settings.data_dir(env)), str(config.parent if config.parent.name == "term2" else config))


class Container(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=Settings)
    env = providers.Dependency(instance_of=dict)

    store = providers.Singleton(SqliteSessionStore, path=providers.Callable(_store_path, settings, env))
    registry = providers.Singleton(SessionRegistry)
    catalog = providers.Singleton(LitellmCatalog, providers.Callable(lambda s: s.models, settings))
    llm = providers.Singleton(_llm, settings, env, catalog)
    own_paths = providers.Callable(_own_paths, settings, env)
    sandbox = providers.Singleton(BubblewrapSandbox, hidden=own_paths)
    toolbox = providers.Singleton(WorkspaceToolbox)
    limits = providers.Factory(
        TurnLimits, max_model_requests=providers.Callable(lambda s: s.max_turn_requests, settings)
    )
    sessions = providers.Singleton(SessionService, store=store, registry=registry, private=own_paths)
    prompts = providers.Singleton(
        PromptService,
        store=store,
        registry=registry,
        llm=llm.provider,
        toolbox=toolbox,
        sandbox=sandbox,
        limits=limits,
    )


def build_container(settings: Settings, env: Mapping[str, str] | None = None) -> Container:
    container = Container(settings=settings, env=dict(env if env is not None else os.environ))
    return container


async def preload_llm(container: Any) -> None:
    """Warm litellm up in a worker thread once a session exists, so the first prompt is quick."""
    if not container.settings().model:
        return
    from term2.adapters.llm.litellm_runtime import preload

    await preload()


async def shutdown(container: Any) -> None:
    from term2.adapters.llm.litellm_runtime import is_loaded

    if is_loaded():
        try:
            await container.llm().aclose()
        except Exception:
            pass
    await container.store().aclose()
