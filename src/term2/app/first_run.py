"""A first run that works: the default model from the keys present, and one plain line when nothing is usable.

A user who sets one provider's key and runs term2 should get an answer, as
codex, claude and gemini give one: without `--model` or a configured model,
the first provider of `DEFAULTS` whose key is present picks the model. When
the model needs a key that is absent, or a self-hosted provider has no base
URL, the line says which variable to set, before any session exists (ADR 0045).

Light on purpose: the launcher runs this before it answers `initialize`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from urllib.parse import urlsplit

from term2.app.config import ConfigError, Settings, config_path
from term2.app.wires import NATIVE

# The documented default per provider, in the order a key is looked for (README, docs/configuration.md).
# Each is the first of the provider's curated picks (app/session_config.py), checked by a unit test.
DEFAULTS: tuple[tuple[str, str], ...] = (
    ("openai", "openai/gpt-5"),
    ("anthropic", "anthropic/claude-sonnet-4-5"),
    ("gemini", "gemini/gemini-2.5-pro"),
    ("openrouter", "openrouter/anthropic/claude-sonnet-4.5"),
    ("deepseek", "deepseek/deepseek-chat"),
    ("mistral", "mistral/mistral-large-latest"),
)
# Where each provider's key is read from: the native table's variables, and litellm's for the rest.
KEY_ENV: Mapping[str, tuple[str, ...]] = {
    **{provider: endpoint.key_env for provider, endpoint in NATIVE.items()},
    "gemini": ("GEMINI_API_KEY",),
}
# Providers that serve a machine of the user's own: no key is asked for.
_LOCAL = frozenset({"lm_studio", "hosted_vllm", "ollama", "ollama_chat", "llamafile", "vllm"})


class CredentialsMissing(ConfigError):
    """The model needs a key that is not set; the message names the variable."""


def key_variables() -> tuple[str, ...]:
    return tuple(KEY_ENV[provider][0] for provider, _ in DEFAULTS)


def default_model(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The model of the first provider in DEFAULTS whose key is present, or None."""
    for provider, model in DEFAULTS:
        if _key_of(provider, settings, env) is not None:
            return model
    return None


def with_default_model(settings: Settings, env: Mapping[str, str]) -> Settings:
    """`settings` with a model: the one given, else the default from the keys present (else still none)."""
    if settings.model:
        return settings
    chosen = default_model(settings, env)
    return replace(settings, model=chosen) if chosen else settings


def provider_of(settings: Settings) -> str | None:
    """The provider a model string names (`openai/gpt-5` → openai), or the declared one."""
    if not settings.model:
        return None
    declared = settings.models.get(settings.model)
    if declared is not None:
        return declared.provider
    head, slash, _ = settings.model.partition("/")
    return settings.provider or (head if slash else None)


def _key_of(provider: str, settings: Settings, env: Mapping[str, str]) -> str | None:
    configured = settings.providers.get(provider)
    if configured is not None and configured.api_key_env and env.get(configured.api_key_env):
        return configured.api_key_env
    return next((name for name in KEY_ENV.get(provider, ()) if env.get(name)), None)


def _custom_base(provider: str, settings: Settings, env: Mapping[str, str]) -> str | None:
    configured = settings.providers.get(provider)
    if configured is not None and configured.api_base:
        return configured.api_base
    endpoint = NATIVE.get(provider)
    return next((env[name] for name in endpoint.base_env if env.get(name)), None) if endpoint else None


def key_values(settings: Settings, env: Mapping[str, str]) -> tuple[str, ...]:
    """Every API key term2 may read: the logs replace them wherever a line would carry one (ADR 0045)."""
    names = {n for names in KEY_ENV.values() for n in names}
    names |= {c.api_key_env for c in settings.providers.values() if c.api_key_env}
    return tuple(env[n] for n in sorted(names) if env.get(n))


def no_model_message() -> str:
    names = key_variables()
    return (
        f"no model configured and no API key: set {names[0]} (or {', '.join(names[1:])}), "
        "or run term2 login, or give --model PROVIDER/MODEL; see term2 doctor"
    )


def check_credentials(settings: Settings, env: Mapping[str, str]) -> None:
    """Raise CredentialsMissing naming the variable to set, when the model cannot be called for want of a key.

    A hosted provider needs its key; one pointed at a base URL of the user's
    own (a local server speaking its protocol) may not, and a local provider
    never does.
    """
    provider = provider_of(settings)
    if provider is None:
        raise CredentialsMissing(no_model_message())
    if provider in _LOCAL or provider not in KEY_ENV or _custom_base(provider, settings, env):
        return
    if _key_of(provider, settings, env) is None:
        configured = settings.providers.get(provider)
        name = configured.api_key_env if configured and configured.api_key_env else KEY_ENV[provider][0]
        raise CredentialsMissing(f"{settings.model} needs an API key: set {name}")


def check_endpoint(settings: Settings, env: Mapping[str, str]) -> None:
    """Raise ConfigError naming the variable when a self-hosted provider has no base URL anywhere."""
    provider = provider_of(settings)
    endpoint = NATIVE.get(provider) if provider else None
    if provider is None or endpoint is None or endpoint.default_base is not None:
        return
    if _custom_base(provider, settings, env) is None:
        raise ConfigError(
            f"{settings.model} needs the server's URL: set {endpoint.base_env[0]} "
            f"(e.g. http://127.0.0.1:8000/v1) or api_base under [providers.{provider}] in {config_path(env)}"
        )


def endpoint_host(settings: Settings, env: Mapping[str, str]) -> str | None:
    """The host requests go to, for the log's first line and `term2 doctor`; never the key or a path."""
    provider = provider_of(settings)
    if provider is None:
        return None
    base = _custom_base(provider, settings, env)
    endpoint = NATIVE.get(provider)
    if base is None and endpoint is not None:
        base = endpoint.default_base
    if base is None:
        return f"{provider}'s default (litellm)"
    return urlsplit(base).hostname or base
