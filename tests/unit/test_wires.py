"""Which adapter serves a provider, and where its endpoint and key come from: configuration only."""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.app.config import ConfigError, ProviderConfig, Settings, load_settings
from term2.app.entrypoints.catalog import model_catalog
from term2.app.provider_settings import provider_settings
from term2.app.wires import Route, route


def test_openai_and_anthropic_are_native_and_read_the_variables_litellm_reads() -> None:
    env = {"OPENAI_API_KEY": "sk-1", "OPENAI_API_BASE": "http://a/v1", "OPENAI_BASE_URL": "http://b/v1"}
    assert route("openai", None, None, None, env) == route("openai", "openai", None, None, env)
    chosen = route("openai", None, None, None, env)
    assert (chosen.wire, chosen.api_base, chosen.api_key) == ("openai", "http://b/v1", "sk-1")  # BASE_URL first
    anthropic = route("anthropic", None, None, None, {"ANTHROPIC_API_KEY": "k"})
    assert (anthropic.wire, anthropic.api_base, anthropic.api_key) == ("anthropic", "https://api.anthropic.com", "k")


def test_configured_values_win_over_the_environment() -> None:
    chosen = route("openai", None, "http://mine/v1", "from-config", {"OPENAI_BASE_URL": "http://env/v1"})
    assert (chosen.api_base, chosen.api_key) == ("http://mine/v1", "from-config")


def test_other_providers_go_through_litellm_unless_told_otherwise() -> None:
    assert route("gemini", None, None, None, {}).wire == "litellm"
    assert route("openai", "litellm", None, None, {"OPENAI_BASE_URL": "http://x"}).api_base is None  # litellm reads it
    local = route("ollama_chat", "openai", "http://127.0.0.1:11434/v1", None, {})
    assert (local.wire, local.api_base) == ("openai", "http://127.0.0.1:11434/v1")


def test_a_self_hosted_provider_without_an_endpoint_falls_back_or_is_refused() -> None:
    assert route("hosted_vllm", None, None, None, {}).wire == "litellm"
    assert route("hosted_vllm", None, None, None, {"HOSTED_VLLM_API_BASE": "http://v/v1"}).wire == "openai"
    with pytest.raises(ConfigError, match=r"providers\.someone: wire = 'openai' needs an api_base"):
        route("someone", "openai", None, None, {})


def test_another_wire_for_a_listed_provider_does_not_borrow_its_endpoint() -> None:
    """Anthropic's base URL speaks Messages: the OpenAI wire there must be given its own endpoint."""
    env = {"ANTHROPIC_API_KEY": "sk-ant", "ANTHROPIC_BASE_URL": "https://proxy.example"}
    with pytest.raises(ConfigError, match="needs an api_base"):
        route("anthropic", "openai", None, None, env)
    chosen = route("anthropic", "openai", "https://gateway.example/v1", None, env)
    assert chosen == Route("openai", "https://gateway.example/v1", "sk-ant")  # the provider's key still applies


def test_the_settings_carry_the_chosen_wire(tmp_path: Path) -> None:
    settings = Settings(model="openai/gpt-5", providers={"openai": ProviderConfig(api_key_env="MY_KEY")})
    chosen = provider_settings(settings, {"MY_KEY": "k", "OPENAI_API_KEY": "other"}, model_catalog(settings))
    assert (chosen.wire, chosen.provider, chosen.api_key) == ("openai", "openai", "k")
    config = tmp_path / "config.toml"
    config.write_text('[providers.openai]\nwire = "litellm"\n')
    loaded = load_settings({"TERM2_CONFIG": str(config), "TERM2_MODEL": "openai/gpt-5"})
    assert provider_settings(loaded, {}, model_catalog(loaded)).wire == "litellm"


def test_an_unknown_wire_is_a_configuration_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[providers.openai]\nwire = "grpc"\n')
    with pytest.raises(ConfigError, match="wire must be one of openai, anthropic, litellm"):
        load_settings({"TERM2_CONFIG": str(config)})
