"""The model catalog, chosen in one place for the launcher and the container alike.

The launcher checks `--model` before anything heavy loads (ADR 0003), so it
cannot build the container; it takes its catalog from here, and so does the
container, so both always agree on which adapter answers.
"""

from __future__ import annotations

from term2.adapters.catalog.litellm_catalog import LitellmCatalog
from term2.app.config import Settings


def model_catalog(settings: Settings) -> LitellmCatalog:
    """litellm's bundled catalog (read as JSON, litellm itself not imported) plus the user's declared models."""
    return LitellmCatalog(settings.models)


def takes_images(settings: Settings) -> bool:
    """Whether the launcher's model takes images, from its one catalog entry (cheap enough for `initialize`,
    which advertises `promptCapabilities.image` by it, ADR 0046); unsure means no."""
    if not settings.model:
        return False
    from term2.app.model_resolution import resolve_quickly

    resolved = resolve_quickly(settings.model, settings.provider, model_catalog(settings))
    return bool(resolved is not None and resolved.info is not None and resolved.info.supports_vision)
