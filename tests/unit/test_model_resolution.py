"""Resolving --model against a catalog without ever asking the user."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from term2.app.model_resolution import CANDIDATES_SHOWN, ModelResolutionError, ResolvedModel, resolve_model
from term2.ports.catalog import ModelInfo

GPT5 = ModelInfo("gpt-5", "openai", 272000, True, True)
GPT5_MINI = ModelInfo("gpt-5-mini", "openai", 272000, True, True)
CLAUDE = ModelInfo("claude-sonnet-4", "anthropic", 200000, True, True)
GEMINI = ModelInfo("gemini/gemini-2.5-pro", "gemini", 1000000, True, True)
ROUTED = ModelInfo("openrouter/openai/gpt-4o", "openrouter", 128000, False, True)
CATALOG = (GPT5, GPT5_MINI, CLAUDE, GEMINI, ROUTED)
PROVIDERS = frozenset({"openai", "anthropic", "gemini", "openrouter", "ollama_chat"})


def resolve(pattern: str, provider: str | None = None, models: tuple[ModelInfo, ...] = CATALOG) -> ResolvedModel:
    return resolve_model(pattern, provider, models, PROVIDERS)


def test_exact_id_wins_over_substring_matches() -> None:
    # "gpt-5" is also a substring of "gpt-5-mini"; the exact id must not be ambiguous.
    assert resolve("gpt-5") == ResolvedModel("gpt-5", "openai", GPT5)


def test_exact_qualified_catalog_key() -> None:
    assert resolve("gemini/gemini-2.5-pro") == ResolvedModel("gemini/gemini-2.5-pro", "gemini", GEMINI)


def test_provider_prefix_on_a_bare_catalog_id_keeps_catalog_facts() -> None:
    assert resolve("openai/gpt-5") == ResolvedModel("openai/gpt-5", "openai", GPT5)


@pytest.mark.parametrize("pattern", ["openai/my-local-model", "ollama_chat/qwen3", "anthropic/gpt-5"])
def test_unlisted_model_of_a_known_provider_is_passed_through(pattern: str) -> None:
    provider = pattern.partition("/")[0]
    assert resolve(pattern) == ResolvedModel(pattern, provider, None)


def test_a_unique_partial_match_is_suggested_not_taken() -> None:
    with pytest.raises(ModelResolutionError, match="did you mean 'claude-sonnet-4'") as caught:
        resolve("CLAUDE")
    assert caught.value.candidates == ("claude-sonnet-4",)


def test_provider_flag_with_bare_catalog_id() -> None:
    assert resolve("gpt-5", provider="openai") == ResolvedModel("openai/gpt-5", "openai", GPT5)


def test_provider_flag_with_bare_name_of_a_qualified_key() -> None:
    assert resolve("gemini-2.5-pro", provider="gemini") == ResolvedModel("gemini/gemini-2.5-pro", "gemini", GEMINI)


def test_provider_flag_with_unlisted_model() -> None:
    assert resolve("qwen3", provider="ollama_chat") == ResolvedModel("ollama_chat/qwen3", "ollama_chat", None)


def test_provider_flag_and_already_qualified_pattern() -> None:
    assert resolve("openai/gpt-5", provider="openai") == ResolvedModel("openai/gpt-5", "openai", GPT5)


def test_provider_flag_does_not_borrow_another_providers_entry() -> None:
    resolved = resolve("gpt-5", provider="anthropic")
    assert resolved == ResolvedModel("anthropic/gpt-5", "anthropic", None)


def test_provider_flag_with_unknown_provider() -> None:
    with pytest.raises(ModelResolutionError, match="unknown provider 'nope'"):
        resolve("x", provider="nope")


def test_ambiguous_pattern_lists_sorted_candidates() -> None:
    with pytest.raises(ModelResolutionError) as info:
        resolve("gpt")
    assert "ambiguous (3 matches)" in str(info.value)
    assert info.value.candidates == ("gpt-5", "gpt-5-mini", "openrouter/openai/gpt-4o")


def test_ambiguous_candidates_are_capped() -> None:
    many = tuple(ModelInfo(f"model-{i:02}", "openai") for i in range(25))
    with pytest.raises(ModelResolutionError) as info:
        resolve("model", models=many + many)  # duplicates count once
    assert "(25 matches)" in str(info.value)
    assert len(info.value.candidates) == CANDIDATES_SHOWN == 20
    assert info.value.candidates == tuple(f"model-{i:02}" for i in range(20))


def test_no_match() -> None:
    with pytest.raises(ModelResolutionError, match="no model matches 'zzz'") as info:
        resolve("zzz")
    assert info.value.candidates == ()


def test_unknown_provider() -> None:
    with pytest.raises(ModelResolutionError, match="unknown provider 'nope'"):
        resolve("nope/model")


def test_provider_prefix_is_not_a_provider() -> None:
    with pytest.raises(ModelResolutionError, match="unknown provider 'open'"):
        resolve("open/gpt-5")


@pytest.mark.parametrize(("pattern", "provider"), [("openai/", None), ("", "openai")])
def test_provider_without_model_name(pattern: str, provider: str | None) -> None:
    with pytest.raises(ModelResolutionError, match="missing its name"):
        resolve(pattern, provider=provider)


def test_real_bundled_catalog_without_importing_litellm() -> None:
    """The launcher loads the catalog before `initialize`: it must not import litellm (seconds, ~190 MB)."""
    script = textwrap.dedent(
        """
        import json, sys
        from term2.adapters.catalog.litellm_catalog import LitellmCatalog
        from term2.app.model_resolution import ModelResolutionError, resolve_model

        catalog = LitellmCatalog({})
        models, providers = catalog.models(), catalog.providers()
        gpt5 = resolve_model("gpt-5", None, models, providers)
        local = resolve_model("ollama_chat/qwen3", None, models, providers)
        try:
            resolve_model("gpt", None, models, providers)
            ambiguous = None
        except ModelResolutionError as exc:
            ambiguous = len(exc.candidates)
        print(json.dumps({
            "count": len(models),
            "gpt5": [gpt5.model, gpt5.provider, gpt5.info.context_window],
            "local": [local.model, local.provider, local.info is None],
            "ambiguous": ambiguous,
            "litellm_imported": "litellm" in sys.modules,
        }))
        """
    )
    src = Path(__file__).resolve().parents[2] / "src"
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=20,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["litellm_imported"] is False
    assert facts["count"] > 100
    assert facts["gpt5"] == ["gpt-5", "openai", 272000]
    assert facts["local"] == ["ollama_chat/qwen3", "ollama_chat", True]
    assert facts["ambiguous"] == CANDIDATES_SHOWN
