"""Which adapter serves a provider, and where its endpoint and key come from (issue 13, ADR 0016).

Two wire protocols cover most of what users run: OpenAI Chat Completions
(OpenAI and every OpenAI-compatible server) and Anthropic Messages. term2
speaks them natively, on httpx, so a process serving such a model never pays
for importing litellm; every other provider goes through litellm. The table
is the default; `wire = "openai" | "anthropic" | "litellm"` in
`[providers.<name>]` overrides it.

Endpoint and key follow what litellm reads for the same provider, so that a
user who set `OPENAI_API_KEY` and `OPENAI_BASE_URL` gets the same request
whichever adapter sends it: `api_base` from config.toml first, then the
provider's variables in litellm's order, then the provider's public default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from term2.app.config import ConfigError, Wire


@dataclass(frozen=True, slots=True)
class NativeEndpoint:
    wire: Wire
    base_env: tuple[str, ...]  # variables naming the base URL, in litellm's order of precedence
    key_env: tuple[str, ...]  # variables holding the key, in litellm's order
    default_base: str | None  # None: a base URL must be configured (a self-hosted server)


NATIVE: Mapping[str, NativeEndpoint] = {
    "openai": NativeEndpoint("openai", ("OPENAI_BASE_URL", "OPENAI_API_BASE"), ("OPENAI_API_KEY",),
                             "https://api.openai.com/v1"),
    "anthropic": NativeEndpoint("anthropic", ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"), ("ANTHROPIC_API_KEY",),
                                "https://api.anthropic.com"),
    "deepseek": NativeEndpoint("openai", ("DEEPSEEK_API_BASE",), ("DEEPSEEK_API_KEY",), "https://api.deepseek.com/v1"),
    "groq": NativeEndpoint("openai", ("GROQ_API_BASE",), ("GROQ_API_KEY",), "https://api.groq.com/openai/v1"),
    "mistral": NativeEndpoint("openai", ("MISTRAL_API_BASE",), ("MISTRAL_API_KEY",), "https://api.mistral.ai/v1"),
    "xai": NativeEndpoint("openai", ("XAI_API_BASE",), ("XAI_API_KEY",), "https://api.x.ai/v1"),
    "openrouter": NativeEndpoint("openai", ("OPENROUTER_API_BASE",), ("OPENROUTER_API_KEY", "OR_API_KEY"),
                                 "https://openrouter.ai/api/v1"),
    "together_ai": NativeEndpoint("openai", ("TOGETHER_AI_API_BASE",), ("TOGETHERAI_API_KEY", "TOGETHER_AI_API_KEY",
                                  "TOGETHER_API_KEY"), "https://api.together.xyz/v1"),
    "lm_studio": NativeEndpoint("openai", ("LM_STUDIO_API_BASE",), ("LM_STUDIO_API_KEY",), "http://localhost:1234/v1"),
    "hosted_vllm": NativeEndpoint("openai", ("HOSTED_VLLM_API_BASE",), ("HOSTED_VLLM_API_KEY",), None),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Route:
    wire: Wire
    api_base: str | None
    api_key: str | None


def route(provider: str, wire: Wire | None, api_base: str | None, api_key: str | None, env: Mapping[str, str]) -> Route:
    """The adapter and endpoint for ``provider``; configured values win over the environment.

    A provider routed natively that has no base URL anywhere (a self-hosted
    server nobody configured) goes to litellm, whose error then names what is
    missing, rather than to a native adapter with nowhere to send the request.
    """
    endpoint = NATIVE.get(provider)
    chosen: Wire = wire or (endpoint.wire if endpoint is not None else "litellm")
    if chosen == "litellm":
        return Route("litellm", api_base, api_key)
    key = api_key or _first(env, endpoint.key_env if endpoint else ())
    # The table's base URLs speak the table's wire: another wire needs its own api_base.
    base = api_base
    if base is None and endpoint is not None and endpoint.wire == chosen:
        base = _first(env, endpoint.base_env) or endpoint.default_base
    if base is None:
        if wire is None:
            return Route("litellm", api_base, api_key)
        raise ConfigError(f"providers.{provider}: wire = {wire!r} needs an api_base (no default endpoint is known)")
    return Route(chosen, base, key)


def _first(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((env[name] for name in names if env.get(name)), None)
