"""The start-up path resolves the configured model entry by entry, and agrees with the full resolution."""

from __future__ import annotations

import pytest

from term2.adapters.catalog.litellm_catalog import LitellmCatalog, _bundled_models
from term2.app.model_resolution import resolve_model, resolve_quickly
from term2.ports.catalog import DeclaredModel

CATALOG = LitellmCatalog({"local/qwen": DeclaredModel("ollama", 32_000), "gpt-5": DeclaredModel("openai", 1_000)})


@pytest.mark.parametrize(
    "pattern",
    [
        "claude-sonnet-4-5",
        "anthropic/claude-sonnet-4-5",
        "gpt-4o-mini",
        "openai/gpt-4o-mini",
        "gemini/gemini-2.5-pro",
        "openai/fake-model",  # unlisted, routable provider
        "local/qwen",  # declared
        "gpt-5",  # declared over the bundled entry
        "openai/gpt-5",
    ],
)
def test_quick_and_full_resolution_agree(pattern: str) -> None:
    quick = resolve_quickly(pattern, None, CATALOG)
    assert quick is not None, pattern
    assert quick == resolve_model(pattern, None, CATALOG.models(), CATALOG.providers())


@pytest.mark.parametrize("pattern", ["sonnet", "nosuchprovider/x", "claude"])
def test_what_needs_a_search_goes_the_slow_way(pattern: str) -> None:
    assert resolve_quickly(pattern, None, CATALOG) is None


def test_every_bundled_chat_model_is_found_entry_by_entry() -> None:
    models = _bundled_models()
    sample = models[:: max(1, len(models) // 300)] + models[-5:]
    for info in sample:
        assert LitellmCatalog({}).lookup(info.model_id) == info, info.model_id
