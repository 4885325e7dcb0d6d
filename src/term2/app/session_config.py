"""A session's configuration options, as an editor's pickers show them: model, effort (ADR 0043), mode (0044).

Protocol-neutral: the ACP adapter maps these selects onto `configOptions`. The
model select offers what this user can call now: every model the
configuration names, plus a short curated list for each provider whose key is
present (environment or config), grouped by provider with the current model
first, each named the way `--model` takes it. The effort select lists what the
current model accepts and is absent for a model that takes none.

A choice is checked before anything changes: a model that cannot be resolved
is refused with the resolver's reason and the session stays as it was. An
accepted one is saved with the session, so `load` and `resume` find it in this
process or another, and applies from the session's next turn. The approval
mode applies from the next tool call: the gate reads it live (ADR 0044).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from term2.app.config import Settings
from term2.app.first_run import KEY_ENV
from term2.app.session_models import SessionModels
from term2.app.sessions import OpenSession, SessionRegistry
from term2.domain.approval import ApprovalMode
from term2.domain.errors import InvalidInput, NotFound
from term2.domain.model_choice import ModelChoice, model_name, model_provider
from term2.domain.session import Session
from term2.ports.session_store import SessionStore

MODEL = "model"
EFFORT = "thought_level"
MODE = "mode"
NO_EFFORT = "default"  # the effort value that sends none: the model's own default

# A few current models per provider, offered when the provider's key is present (ADR 0043).
CURATED: Mapping[str, tuple[str, ...]] = {
    "openai": ("openai/gpt-5", "openai/gpt-5-mini", "openai/gpt-4.1"),
    "anthropic": ("anthropic/claude-sonnet-4-5", "anthropic/claude-opus-4-1", "anthropic/claude-haiku-4-5"),
    "gemini": ("gemini/gemini-2.5-pro", "gemini/gemini-2.5-flash"),
    "deepseek": ("deepseek/deepseek-chat", "deepseek/deepseek-reasoner"),
    "mistral": ("mistral/mistral-large-latest", "mistral/codestral-latest"),
    "xai": ("xai/grok-4",),
    "groq": ("groq/llama-3.3-70b-versatile",),
    "openrouter": ("openrouter/anthropic/claude-sonnet-4.5",),
}
EFFORT_NAMES: Mapping[str, str] = {
    NO_EFFORT: "Model default",
    "minimal": "Minimal",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
}


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    name: str
    description: str | None = None


# The approval modes as the mode picker (and the legacy `modes`) offer them, `ask` first (ADR 0044).
MODES: tuple[Choice, ...] = (
    Choice(ApprovalMode.ASK.value, "Ask", "Asks before commands, and before anything outside the usual walls"),
    Choice(
        ApprovalMode.AUTO.value,
        "Auto in the sandbox",
        "Commands and programs run in the sandbox without network without asking; everything else still asks",
    ),
    Choice(
        ApprovalMode.READ_ONLY.value,
        "Plan (read-only)",
        "Reads and searches only: edits, commands and MCP calls are refused, nothing changes",
    ),
)


@dataclass(frozen=True, slots=True)
class ChoiceGroup:
    group: str
    name: str
    choices: tuple[Choice, ...]


@dataclass(frozen=True, slots=True)
class Select:
    """One picker: its id, label, category, the current value and what may be chosen (grouped or flat)."""

    config_id: str
    name: str
    category: str
    current: str
    description: str
    groups: tuple[ChoiceGroup, ...] = ()
    choices: tuple[Choice, ...] = ()


def keyed_providers(settings: Settings, env: Mapping[str, str]) -> frozenset[str]:
    """Providers whose key is present: in their usual variable, or the one config.toml names."""
    keyed = {p for p, names in KEY_ENV.items() if any(env.get(n) for n in names)}
    keyed |= {p for p, c in settings.providers.items() if c.api_key_env and env.get(c.api_key_env)}
    return frozenset(keyed)


def offered_models(settings: Settings, env: Mapping[str, str], current: str | None) -> tuple[ChoiceGroup, ...]:
    """The model select's groups: by provider, the current model's group and the current model first."""
    named = [m for m in (settings.model, *settings.models, *settings.model_options) if m]
    keyed = keyed_providers(settings, env)
    curated = [m for provider, models in CURATED.items() if provider in keyed for m in models]
    ordered = list(dict.fromkeys([*([current] if current else []), *named, *curated]))
    by_provider: dict[str, list[str]] = {}
    for model in ordered:
        declared = settings.models.get(model)
        provider = declared.provider if declared is not None else model_provider(model) or settings.provider or ""
        by_provider.setdefault(provider, []).append(model)
    return tuple(
        ChoiceGroup(provider or "other", provider or "Other", tuple(Choice(m, model_name(m)) for m in models))
        for provider, models in by_provider.items()
    )


class SessionConfig:
    """The use case behind the pickers: read a session's selects, change one."""

    def __init__(
        self,
        store: SessionStore,
        registry: SessionRegistry,
        models: SessionModels,
        settings: Settings,
        env: Mapping[str, str],
    ) -> None:
        self._store = store
        self._registry = registry
        self._models = models
        self._settings = settings
        self._env = env

    def selects(self, session: Session) -> tuple[Select, ...]:
        """The session's pickers: the mode always; the model and effort only with a model to pick from."""
        mode = Select(
            MODE, "Mode", MODE, session.mode.value, "Which questions term2 asks before a tool runs", (), MODES
        )
        choice = self._models.choice(session)
        if choice is None:
            return (mode,)
        groups = offered_models(self._settings, self._env, choice.model)
        model = Select(MODEL, "Model", MODEL, choice.model, "The model this session's next turn runs", groups)
        efforts = self._models.efforts(choice.model)
        if not efforts:
            return (model, mode)
        values = (NO_EFFORT, *efforts)
        effort = Select(
            EFFORT,
            "Effort",
            EFFORT,
            choice.effort or NO_EFFORT,
            "How hard the model reasons before it answers",
            choices=tuple(Choice(v, EFFORT_NAMES.get(v, v)) for v in values),
        )
        return (model, effort, mode)

    async def choose(self, session_id: str, config_id: str, value: str) -> tuple[Select, ...]:
        """Apply one choice and answer the full set; a refused choice leaves the session as it was."""
        opened = self._registry.get(session_id)
        if opened is None:
            raise NotFound(f"unknown or closed session: {session_id}")
        if config_id == MODE:
            await self._choose_mode(opened, chosen_mode(value))
            return self.selects(opened.session)
        current = self._models.choice(opened.session)
        if current is None:
            raise InvalidInput("no model is configured, so there is nothing to switch from")
        wanted = self._chosen(current, config_id, value)
        self._models.resolve(wanted)  # refuses a model that cannot be used, before anything changes
        if wanted != current or opened.session.model is None:
            # Live before the first await, like a mode: a running turn's next model request goes to the new
            # model (FollowingModel), in the order the client sent the choice and its other messages.
            before = opened.session
            opened.session = opened.session.with_model(wanted.model, wanted.effort)
            try:
                await self._store.save(opened.session)
            except BaseException:
                opened.session = replace(opened.session, model=before.model, effort=before.effort)
                raise
        return self.selects(opened.session)

    async def _choose_mode(self, opened: OpenSession, mode: ApprovalMode) -> None:
        """Live before the first await, so that the gate judges by it even an answer already on its way
        (an allow that arrives after a switch to read-only is refused); back as it was if it cannot be saved."""
        before = opened.access.mode
        opened.access.mode = mode
        opened.session = opened.session.with_mode(mode)
        try:
            await self._store.save(opened.session)
        except BaseException:
            opened.access.mode = before
            opened.session = opened.session.with_mode(before)
            raise

    def _chosen(self, current: ModelChoice, config_id: str, value: str) -> ModelChoice:
        if config_id == MODEL:
            if not value.strip():
                raise InvalidInput("model must be a model id, as --model takes it")
            return current.switched_to(value, self._models.efforts(value))
        if config_id == EFFORT:
            try:
                return current.with_effort(None if value == NO_EFFORT else value, self._models.efforts(current.model))
            except ValueError as exc:
                raise InvalidInput(str(exc)) from None
        raise InvalidInput(f"unknown config option {config_id!r} (term2 has {MODEL!r}, {EFFORT!r} and {MODE!r})")


def chosen_mode(value: str) -> ApprovalMode:
    """A mode the user picked; anything else is refused, never read as another mode."""
    try:
        return ApprovalMode(value)
    except ValueError:
        names = ", ".join(m.value for m in ApprovalMode)
        raise InvalidInput(f"unknown mode {value!r}; term2's modes are {names}") from None
