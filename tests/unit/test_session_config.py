"""The pickers' rules (ADR 0043): what the model select offers, and how an effort follows a model."""

from __future__ import annotations

import pytest

from term2.app.config import ProviderConfig, Settings
from term2.app.entrypoints.catalog import model_catalog
from term2.app.provider_settings import provider_settings
from term2.app.session_config import CURATED, offered_models
from term2.domain.model_choice import EFFORT_LEVELS, ModelChoice
from term2.ports.catalog import DeclaredModel


@pytest.mark.parametrize("model", [m for models in CURATED.values() for m in models])
def test_every_curated_model_resolves_as_model_takes_it(model: str) -> None:
    settings = Settings(model=model)
    chosen = provider_settings(settings, {}, model_catalog(settings))
    assert chosen.model == model and chosen.provider == model.partition("/")[0]


def test_offered_models_are_grouped_by_provider_with_the_current_one_first() -> None:
    settings = Settings(
        model="openai/gpt-4o-mini",
        models={"lm_studio/qwen3": DeclaredModel(provider="lm_studio", context_window=32768)},
        providers={"corp": ProviderConfig(api_base="https://llm.corp", api_key_env="CORP_KEY")},
    )
    env = {"ANTHROPIC_API_KEY": "k"}  # no OPENAI_API_KEY: only the named openai model, not the curated ones
    groups = offered_models(settings, env, current="anthropic/claude-opus-4-1")
    assert [g.group for g in groups] == ["anthropic", "openai", "lm_studio"]
    assert groups[0].choices[0].value == "anthropic/claude-opus-4-1"
    assert set(CURATED["anthropic"]) <= {c.value for c in groups[0].choices}
    assert [c.value for c in groups[1].choices] == ["openai/gpt-4o-mini"]
    assert [c.value for c in groups[2].choices] == ["lm_studio/qwen3"] and groups[2].choices[0].name == "qwen3"


def test_a_provider_key_named_in_config_counts_only_when_set() -> None:
    settings = Settings(model="x/y", providers={"openai": ProviderConfig(api_key_env="MY_OPENAI")})
    assert not any(g.group == "openai" for g in offered_models(settings, {}, "x/y"))
    assert any(g.group == "openai" for g in offered_models(settings, {"MY_OPENAI": "k"}, "x/y"))


def test_an_effort_follows_the_model_only_where_it_is_accepted() -> None:
    chosen = ModelChoice("openai/gpt-5-mini", "high")
    assert chosen.switched_to("anthropic/claude-sonnet-4-5", EFFORT_LEVELS).effort == "high"
    assert chosen.switched_to("openai/gpt-4o-mini", ()).effort is None
    with pytest.raises(ValueError, match="does not take effort"):
        ModelChoice("openai/gpt-4o-mini").with_effort("high", ())
    assert chosen.with_effort(None, EFFORT_LEVELS).effort is None
