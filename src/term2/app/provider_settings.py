"""From layered configuration to what an LLM adapter needs: model, endpoint, key, effort.

Swapping providers is configuration only; this is where that configuration is
read, so the adapter never looks at files or the environment itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from term2.app.config import Settings
from term2.app.first_run import KEY_ENV, no_model_message
from term2.app.model_resolution import resolve_model, resolve_quickly
from term2.app.wires import route
from term2.domain.errors import ModelNotConfigured
from term2.ports.catalog import ModelCatalog, RequestOptions
from term2.ports.llm_settings import ProviderSettings


def provider_settings(settings: Settings, env: Mapping[str, str], catalog: ModelCatalog) -> ProviderSettings:
    """Turn layered configuration into what the LLM adapter needs; fails if no model is set."""
    if not settings.model:
        raise ModelNotConfigured(no_model_message())  # one plain line naming the variables (ADR 0045)
    resolved = resolve_quickly(settings.model, settings.provider, catalog) or resolve_model(
        settings.model, settings.provider, catalog.models(), catalog.providers()
    )
    provider_config = settings.providers.get(resolved.provider)
    api_key = None
    if provider_config is not None and provider_config.api_key_env:
        api_key = env.get(provider_config.api_key_env) or None
    # litellm would read os.environ, which never holds a key `term2 login` stored: hand it the key (ADR 0047)
    api_key = api_key or next((env[n] for n in KEY_ENV.get(resolved.provider, ()) if env.get(n)), None)
    configured_wire = provider_config.wire if provider_config else None
    api_base = provider_config.api_base if provider_config else None
    chosen = route(resolved.provider, configured_wire, api_base, api_key, env)
    info = resolved.info
    return ProviderSettings(
        model=resolved.model,
        provider=resolved.provider,
        wire=chosen.wire,
        api_base=chosen.api_base,
        api_key=chosen.api_key,
        effort=settings.effort,
        timeout_s=settings.request_timeout,
        connect_timeout_s=settings.connect_timeout,
        context_window=info.context_window if info else None,
        supports_reasoning=info.supports_reasoning if info else settings.effort is not None,
        prices=info.prices if info else None,
        max_output_tokens=info.max_output_tokens if info else None,
        supports_images=info.supports_vision if info else False,
        request_options=settings.model_options.get(resolved.model)
        or settings.model_options.get(settings.model)
        or RequestOptions(),
    )
