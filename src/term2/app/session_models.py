"""What a session's model choice brings along on each turn: the adapter, budget, prices and tools (ADR 0043).

The launcher's model is served by the root's singletons (the ones start-up
preloads and tests override); any other model a session switched to gets its
own adapter, made on first use and kept for the process, so switching back and
forth costs one adapter per model. Budget, prices and the edit tools follow
the model of the turn, never the launcher's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from term2.app.config import ConfigError, Settings
from term2.app.model_resolution import ModelResolutionError
from term2.app.sessions import OpenSession
from term2.domain.errors import InvalidInput, ModelNotConfigured, NotAuthenticated
from term2.domain.model_choice import EFFORT_LEVELS, ModelChoice
from term2.domain.session import Session
from term2.domain.usage import Prices

if TYPE_CHECKING:  # the ports of a turn: a session is opened before they load (ADR 0052)
    from term2.domain.context_budget import ContextBudget
    from term2.ports.llm import CompletionRequest, LLMEvent, LLMProvider, PromptCount, ProviderSettings
    from term2.ports.tools import Toolbox


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """One turn's model and what depends on it."""

    llm: LLMProvider
    budget: ContextBudget
    prices: Prices | None
    toolbox: Toolbox


@dataclass(frozen=True, slots=True)
class ModelParts:
    """How the root makes each part; the defaults are the launcher model's singletons."""

    resolve: Callable[[Settings], ProviderSettings]  # raises ConfigError, ModelResolutionError, ModelNotConfigured
    make_llm: Callable[[ProviderSettings], LLMProvider]
    make_toolbox: Callable[[str], Toolbox]  # by the model id: the edit tools follow its family
    budget: Callable[[ProviderSettings], ContextBudget]
    default_settings: Callable[[], ProviderSettings]
    default_llm: Callable[[], LLMProvider]
    default_toolbox: Callable[[], Toolbox]
    # Raises ConfigError naming the variable when the model's key is missing (app/first_run.py).
    credentials: Callable[[Settings], None] = field(default=lambda settings: None)


class SessionModels:
    def __init__(self, settings: Settings, parts: ModelParts) -> None:
        self._settings = settings
        self._parts = parts
        self._resolved: dict[ModelChoice, ProviderSettings] = {}
        self._llms: dict[ModelChoice, LLMProvider] = {}
        self._toolboxes: dict[str, Toolbox] = {}

    @property
    def launcher(self) -> ModelChoice | None:
        """What a new session starts with: `--model`/`--effort` over the config's defaults."""
        model = self._settings.model
        return ModelChoice(model, self._settings.effort) if model else None

    def choice(self, session: Session) -> ModelChoice | None:
        """The session's choice; a session stored before sessions kept one runs the launcher's."""
        return ModelChoice(session.model, session.effort) if session.model else self.launcher

    def resolve(self, choice: ModelChoice) -> ProviderSettings:
        """The model's settings, or InvalidInput saying why it cannot be used (nothing is changed)."""
        known = self._resolved.get(choice)
        if known is None:
            try:
                if choice == self.launcher:
                    known = self._parts.default_settings()
                else:
                    known = self._parts.resolve(replace(self._settings, model=choice.model, effort=choice.effort))
            except (ConfigError, ModelResolutionError, ModelNotConfigured) as exc:
                raise InvalidInput(f"model {choice.model!r} cannot be used: {exc}") from None
            if choice != self.launcher:  # the launcher's is the root's singleton, which tests may override
                self._resolved[choice] = known
        return known

    def check_credentials(self, session: Session) -> None:
        """NotAuthenticated, naming the variable to set, when the session's model cannot be called for want
        of a key (or there is no model because no key was found)."""
        choice = self.choice(session)
        chosen = replace(self._settings, model=choice.model if choice else None)
        try:
            self._parts.credentials(chosen)
        except ConfigError as exc:
            raise NotAuthenticated(str(exc)) from None

    def efforts(self, model: str) -> tuple[str, ...]:
        """The effort levels `model` accepts: all of them for a model that reasons, none otherwise."""
        launcher = self.launcher
        probe = launcher if launcher is not None and launcher.model == model else ModelChoice(model)
        try:
            reasons = self.resolve(probe).supports_reasoning
        except InvalidInput:
            return ()
        return EFFORT_LEVELS if reasons else ()

    def takes_images(self, session: Session) -> tuple[str, bool]:
        """(the session's model, whether it takes images); a model that cannot be used takes none."""
        choice = self.choice(session)
        if choice is None:
            return "(none configured)", False
        try:
            chosen = self._parts.default_settings() if choice == self.launcher else self.resolve(choice)
        except (InvalidInput, ConfigError, ModelResolutionError, ModelNotConfigured):
            return choice.model, False
        return choice.model, chosen.supports_images

    def setup(self, session: Session) -> ModelSetup:
        """The turn's model; raises ModelNotConfigured without one, as the launcher's own path does."""
        choice = self.choice(session)
        if choice is None or choice == self.launcher:
            chosen = self._parts.default_settings()
            return ModelSetup(
                self._parts.default_llm(), self._parts.budget(chosen), chosen.prices, self._default_tools()
            )
        chosen = self.resolve(choice)
        llm = self._llms.get(choice)
        if llm is None:
            llm = self._llms[choice] = self._parts.make_llm(chosen)
        toolbox = self._toolboxes.get(choice.model)
        if toolbox is None:
            toolbox = self._toolboxes[choice.model] = self._parts.make_toolbox(choice.model)
        return ModelSetup(llm, self._parts.budget(chosen), chosen.prices, toolbox)

    def _default_tools(self) -> Toolbox:
        return self._parts.default_toolbox()

    def forget_keys(self) -> list[LLMProvider]:
        """The keys changed (a login or logout since start, ADR 0047): resolve every model again at its next
        use, with the keys as they are now. Returns the adapters let go, for the caller to close."""
        made, self._llms = list(self._llms.values()), {}
        self._resolved.clear()
        return made

    async def aclose(self) -> None:
        """Close the adapters made for switched-to models (the launcher's is the root's to close)."""
        made, self._llms = list(self._llms.values()), {}
        for llm in made:
            try:
                await llm.aclose()
            except Exception:  # a provider that failed to close: nothing to keep
                continue


class FollowingModel:
    """The session's model as it is at each request: a choice made while a turn runs applies from the
    turn's next model request, not its next turn (issue 28). The turn's tools, budget and prices stay the
    ones it started with; the next turn takes the new model's. A choice that cannot be used now (it was
    checked when chosen) leaves the request to the model the turn started with."""

    def __init__(self, models: SessionModels, opened: OpenSession, started: LLMProvider) -> None:
        self._models = models
        self._opened = opened
        self._started = started

    def _current(self) -> LLMProvider:
        try:
            return self._models.setup(self._opened.session).llm
        except (InvalidInput, ConfigError, ModelResolutionError, ModelNotConfigured):
            return self._started

    def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        return self._current().stream(request)

    async def count_prompt(self, request: CompletionRequest) -> PromptCount | None:
        from term2.ports.llm import PromptCounter

        current = self._current()
        return await current.count_prompt(request) if isinstance(current, PromptCounter) else None

    async def prepare(self) -> None:
        await self._current().prepare()

    async def keep_connected(self) -> None:
        await self._current().keep_connected()

    async def aclose(self) -> None:
        """Nothing of its own: the providers belong to SessionModels and the root closes them."""
