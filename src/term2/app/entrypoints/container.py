"""The composition root: the only module that imports dependency-injector.

Every adapter is chosen here from configuration; tests swap any of them with
`container.<provider>.override(...)`. The driving side gets an `Application`
(typed use cases plus preload and shutdown), never the container itself.

What a turn needs (the prompt use case, the tools, the sandbox, the output
archive, the model's adapter) is imported by its factory, not by this
module: sessions can be served while those still load (see `serve`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread
from dependency_injector import containers, providers

from term2.adapters.store.sqlite_store import SqliteSessionStore
from term2.app.config import Settings, config_path
from term2.app.entrypoints.catalog import model_catalog
from term2.app.entrypoints.keys import key_store
from term2.app.entrypoints.lean_imports import import_lean
from term2.app.first_run import check_credentials
from term2.app.mcp.servers import McpLimits, McpSessions
from term2.app.session_config import SessionConfig
from term2.app.session_models import ModelParts, SessionModels
from term2.app.sessions import SessionRegistry, SessionService
from term2.app.stored_keys import KeyAuthentication, KeyRing
from term2.domain.model_choice import ModelChoice

if TYPE_CHECKING:  # what only a turn makes or uses: imported where it is made, after the first session (ADR 0052)
    from term2.app.prompting import PromptService
    from term2.app.tools.deferred_sandbox import DeferredSandbox
    from term2.domain.context_budget import ContextBudget
    from term2.domain.turn import TurnLimits
    from term2.domain.usage import Prices
    from term2.ports.catalog import ModelCatalog
    from term2.ports.folder_locks import FolderLocks
    from term2.ports.llm import LLMProvider, ProviderSettings
    from term2.ports.mcp import McpClient
    from term2.ports.outputs import OutputArchive
    from term2.ports.sandbox import Sandbox
    from term2.ports.session_store import SessionStore
    from term2.ports.tools import Toolbox
    from term2.ports.workspace_search import WorkspaceSearch


def _llm(chosen: ProviderSettings) -> LLMProvider:
    """The adapter the model's wire names (app/wires.py); swapping is configuration only.

    Only the chosen adapter's modules are imported: the others are start-up
    time a process serving one model never needs.
    """
    if chosen.wire in ("openai", "anthropic"):
        for module in ("httpx", "httpcore"):  # without their optional parts (see `lean_imports`)
            import_lean(module)
    if chosen.wire == "openai":
        from term2.adapters.llm.openai_native import OpenAIChatProvider

        return OpenAIChatProvider(chosen, provider=chosen.provider)
    if chosen.wire == "anthropic":
        from term2.adapters.llm.anthropic_native import AnthropicMessagesProvider

        return AnthropicMessagesProvider(chosen, provider=chosen.provider)
    from term2.adapters.llm.litellm_provider import LiteLLMProvider

    return LiteLLMProvider(chosen)


def _budget(chosen: ProviderSettings, settings: Settings) -> ContextBudget:
    """The model's window (catalog or config.toml) and the configured threshold; read per turn."""
    from term2.domain.context_budget import ContextBudget
    from term2.domain.context_estimate import output_limit

    limit = output_limit(chosen.max_output_tokens, chosen.context_window)
    return ContextBudget(chosen.context_window, threshold=settings.compaction_threshold, max_output=limit)


def _prices(chosen: ProviderSettings) -> Prices | None:
    return chosen.prices


def _limits(settings: Settings) -> TurnLimits:
    from term2.domain.retry import RetryPolicy
    from term2.domain.turn import TurnLimits

    retry = RetryPolicy(max_attempts=settings.retry_max_attempts, max_wait=settings.retry_max_wait)
    return TurnLimits(
        max_model_requests=settings.max_turn_requests,
        retry=retry,
        model_time=settings.turn_timeout,
        first_token=settings.first_token_timeout,
    )


def _sandbox(hidden: tuple[str, ...], settings: Settings) -> Sandbox:
    from term2.adapters.network.proxy import FilteringProxy
    from term2.adapters.sandbox.bubblewrap import BubblewrapSandbox

    return BubblewrapSandbox(hidden=hidden, egress=FilteringProxy(settings.network_resolve))


def _deferred_sandbox(make: Callable[[], Sandbox]) -> DeferredSandbox:
    from term2.app.tools.deferred_sandbox import DeferredSandbox

    return DeferredSandbox(make)


def _folder_locks(env: Mapping[str, str]) -> FolderLocks:
    """Shared by every term2 process of the user through lock files (ADR 0038)."""
    from term2.adapters.locks.flock_folders import FlockFolderLocks
    from term2.adapters.locks.folder import lock_folder

    return FlockFolderLocks(lock_folder(env))


def _workspace_search() -> WorkspaceSearch:
    from term2.adapters.workspace import RipgrepWorkspaceSearch

    return RipgrepWorkspaceSearch(kept=True)  # ended in Application.shutdown (ADR 0037)


def _toolbox(settings: Settings, search: WorkspaceSearch, model: str | None = None) -> Toolbox:
    """The built-in tools, with the edit tools the model's family writes best (ADR 0027): the configured
    model's, or the one a session switched to (ADR 0043)."""
    from term2.app.edit_tools import edit_tool_names
    from term2.app.tools.toolbox import WorkspaceToolbox, default_tools

    return WorkspaceToolbox(default_tools(edit_tool_names(model or settings.model, settings.edit_tools), search))


def _session_models(
    settings: Settings,
    env: Mapping[str, str],
    catalog: ModelCatalog,
    search: Callable[[], WorkspaceSearch],
    default_settings: Callable[[], ProviderSettings],
    default_llm: Callable[[], LLMProvider],
    default_toolbox: Callable[[], Toolbox],
) -> SessionModels:
    """Each session's model and what follows it; the launcher's model keeps the root's singletons."""
    parts = ModelParts(
        resolve=lambda chosen: _provider_settings(chosen, env, catalog),
        make_llm=_llm,
        make_toolbox=lambda model: _toolbox(settings, search(), model),  # the search is made by a turn's tools
        budget=lambda chosen: _budget(chosen, settings),
        default_settings=default_settings,
        default_llm=default_llm,
        default_toolbox=default_toolbox,
        credentials=lambda chosen: check_credentials(chosen, env),
    )
    return SessionModels(settings, parts)


def _mcp_client() -> McpClient:
    """The `mcp` SDK is imported here, when the first session that names MCP servers opens (ADR 0023)."""
    from term2.adapters.mcp.sdk_client import SdkMcpClient

    return SdkMcpClient()


def _mcp_limits(settings: Settings) -> McpLimits:
    return McpLimits(startup_timeout=settings.mcp_startup_timeout, call_timeout=settings.mcp_call_timeout)


def _outputs(folder: Path) -> OutputArchive:
    from term2.adapters.store.output_files import OutputFiles

    return OutputFiles(folder=folder)


def _prompt_service(**parts: Any) -> PromptService:
    from term2.app.prompting import PromptService

    return PromptService(**parts)


def _provider_settings(settings: Settings, env: Mapping[str, str], catalog: ModelCatalog) -> ProviderSettings:
    """The configured model's settings (app/provider_settings.py), imported when first made: by a turn, or a
    session that switches models."""
    from term2.app.provider_settings import provider_settings

    return provider_settings(settings, env, catalog)


def _launcher_choice(settings: Settings) -> ModelChoice | None:
    """What a new session starts with: `--model`/`--effort` over the config's defaults (ADR 0043)."""
    return ModelChoice(settings.model, settings.effort) if settings.model else None


def _store_path(settings: Settings, env: Mapping[str, str]) -> Path:
    return settings.data_dir(env) / "sessions.sqlite3"


def _outputs_path(settings: Settings, env: Mapping[str, str]) -> Path:
    return settings.data_dir(env) / "outputs"


def _own_paths(settings: Settings, env: Mapping[str, str]) -> tuple[str, ...]:
    """term2's own data, configuration, logs and folder locks: hidden from commands, never inside a workspace."""
    from term2.adapters.credentials.file_keys import key_folder
    from term2.adapters.locks.folder import lock_folder
    from term2.adapters.logging_setup import log_dir

    config = config_path(env)
    configured = str(config.parent if config.parent.name == "term2" else config)
    # a program that could write the locks could free itself (ADR 0038)
    own = (str(settings.data_dir(env)), configured, str(log_dir(env)), str(lock_folder(env)))
    keys = str(key_folder(env))  # the keys `term2 login` stored (ADR 0047), wherever TERM2_CONFIG points
    return own if keys == configured else (*own, keys)


class Container(containers.DeclarativeContainer):
    settings: providers.Dependency[Settings] = providers.Dependency(instance_of=Settings)
    env: providers.Dependency[dict[str, str]] = providers.Dependency(instance_of=dict)

    store: providers.Provider[SessionStore] = providers.Singleton(
        SqliteSessionStore, path=providers.Callable(_store_path, settings, env)
    )
    registry = providers.Singleton(SessionRegistry)
    catalog: providers.Provider[ModelCatalog] = providers.Singleton(model_catalog, settings)
    llm_settings: providers.Provider[ProviderSettings] = providers.Singleton(_provider_settings, settings, env, catalog)
    llm: providers.Provider[LLMProvider] = providers.Singleton(_llm, llm_settings)
    own_paths = providers.Callable(_own_paths, settings, env)
    sandbox: providers.Provider[Sandbox] = providers.Singleton(_sandbox, hidden=own_paths, settings=settings)
    # what turns run commands in: made by the first command, or once the first turn is over (ADR 0053)
    deferred_sandbox: providers.Provider[DeferredSandbox] = providers.Singleton(_deferred_sandbox, sandbox.provider)
    folder_locks: providers.Provider[FolderLocks] = providers.Singleton(_folder_locks, env)
    workspace_search: providers.Provider[WorkspaceSearch] = providers.Singleton(_workspace_search)
    toolbox: providers.Provider[Toolbox] = providers.Singleton(_toolbox, settings, workspace_search)
    limits = providers.Callable(_limits, settings)
    budget: providers.Provider[ContextBudget] = providers.Factory(_budget, llm_settings, settings)
    prices: providers.Provider[Prices | None] = providers.Factory(_prices, llm_settings)
    models = providers.Singleton(
        _session_models,
        settings,
        env,
        catalog,
        workspace_search.provider,
        llm_settings.provider,
        llm.provider,
        toolbox.provider,
    )
    outputs: providers.Provider[OutputArchive] = providers.Singleton(
        _outputs, folder=providers.Callable(_outputs_path, settings, env)
    )
    mcp_client: providers.Provider[McpClient] = providers.Singleton(_mcp_client)
    mcp = providers.Singleton(
        McpSessions, client_factory=mcp_client.provider, limits=providers.Callable(_mcp_limits, settings)
    )
    sessions = providers.Singleton(
        SessionService,
        store=store,
        registry=registry,
        private=own_paths,
        mcp=mcp,
        launcher=providers.Callable(_launcher_choice, settings),
        outputs=outputs,
    )
    config = providers.Singleton(
        SessionConfig, store=store, registry=registry, models=models, settings=settings, env=env
    )
    prompts: providers.Provider[PromptService] = providers.Singleton(
        _prompt_service,
        store=store,
        registry=registry,
        models=models,
        sandbox=deferred_sandbox,
        limits=limits,
        outputs=outputs,
        mcp=mcp,
        folder_locks=folder_locks,
    )


def build_container(settings: Settings, env: Mapping[str, str] | None = None) -> Container:
    return Container(settings=settings, env=dict(env if env is not None else os.environ))


class Application:
    """What the driving side gets from the root: the use cases, and the lifecycle around them.

    The root owns preloading and shutdown because only it knows which adapters
    were chosen and what closing them takes.
    """

    def __init__(self, container: Container) -> None:
        self.container = container
        self.sessions: SessionService = container.sessions()
        self.config: SessionConfig = container.config()
        self._settings: Settings = container.settings()
        self._turn_part = False
        env = container.env()  # the one mapping every use case reads: a refresh reaches them all
        from term2.adapters.logging_setup import redact_also

        ring = KeyRing(env, key_store(env), redact_also)
        self.auth = KeyAuthentication(ring, self._settings, env, changed=self._keys_changed)

    def _keys_changed(self) -> None:
        """A login or logout since start: the launcher's settings and adapter, and every switched-to model's,
        are made again from the keys as they are now (the adapters let go keep no request in flight that
        matters: a turn running now finishes on what it has)."""
        for made in (self.container.llm_settings, self.container.llm):
            if isinstance(made, providers.Singleton):
                made.reset()
        self.container.models().forget_keys()

    def prompts(self) -> PromptService:
        """The prompt use case with all a turn needs; the first call imports it (start-up makes
        that call in a worker thread while sessions are already served)."""
        self._turn_part = True
        return self.container.prompts()

    def warm_after_turn(self) -> None:
        """Make what a turn may need and a first answer did not wait for: the sandbox (blocking: a worker
        thread calls this once the first turn is over, ADR 0053)."""
        if self._turn_part:
            self.container.deferred_sandbox().made()

    async def preload(self) -> None:
        """Prepare the model's adapter in the background, so the first prompt is quick.

        For litellm that is its import (seconds), done only once a session
        exists; for a native wire, the HTTP client (httpcore, the CA bundle),
        done as soon as the turn part has loaded (ADR 0048). A model served
        natively never loads litellm: that is the point of the native adapters.
        """
        if not self._settings.model:
            return
        try:
            llm = self.container.llm()  # on the event loop: the prompt path makes the same singleton there
            await llm.prepare()
        except Exception:  # the first prompt reports it with its own error; a background task must not end the server
            return

    def native_wire(self) -> bool:
        """The configured model is served by a native adapter (no litellm import to wait for a session)."""
        try:
            return bool(self._settings.model) and self.container.llm_settings().wire != "litellm"
        except Exception:  # the first prompt reports a model that cannot be set up
            return False

    async def keep_connected(self) -> None:
        """Keep the configured model's connection open ahead of the first request (ADR 0048); never raises."""
        if not self._settings.model:
            return
        try:
            await self.container.llm().keep_connected()
        except Exception:  # the request dials and reports for itself
            return

    async def background(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """What runs for the life of the process: the MCP servers' supervisors; cancelling it ends them."""
        await self.container.mcp().run(task_status=task_status)

    async def shutdown(self) -> None:
        from term2.support.deferred_log import get_logger

        # What the process loaded, for `TERM2_LOG_LEVEL=debug`: a native wire must never have needed litellm.
        get_logger("term2").debug("shutting down", litellm_loaded="litellm" in sys.modules)
        if self._turn_part:  # without it no adapter was made, and making one now would only cost the exit
            try:
                await self.container.llm().aclose()
            except Exception:  # no model configured, or a provider that failed to close: nothing to keep
                pass
            await self.container.models().aclose()  # the adapters of models sessions switched to
            await self.container.workspace_search().aclose()  # kept views' servers (they also end with term2)
        await self.container.store().aclose()


def build_application(settings: Settings, env: Mapping[str, str]) -> Application:
    return Application(build_container(settings, env))
