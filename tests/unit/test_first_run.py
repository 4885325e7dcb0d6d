"""Issue 31's first run: the default model from the keys present, and the one line that names what to set."""

from __future__ import annotations

import pytest

from term2.app.config import ConfigError, ProviderConfig, Settings
from term2.app.entrypoints.catalog import model_catalog
from term2.app.first_run import (
    DEFAULTS,
    KEY_ENV,
    CredentialsMissing,
    check_credentials,
    check_endpoint,
    endpoint_host,
    with_default_model,
)
from term2.app.model_resolution import resolve_quickly
from term2.app.session_config import CURATED


@pytest.mark.parametrize(("provider", "model"), DEFAULTS)
def test_each_default_resolves_and_is_its_providers_first_curated_pick(provider: str, model: str) -> None:
    assert resolve_quickly(model, None, model_catalog(Settings())) is not None
    assert CURATED[provider][0] == model  # one table: the pickers offer the default first
    env = {KEY_ENV[provider][0]: "k"}
    assert with_default_model(Settings(), env).model == model
    check_credentials(Settings(model=model), env)  # its own key satisfies it


def test_the_first_provider_in_the_table_wins_and_a_given_model_is_kept() -> None:
    env = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    assert with_default_model(Settings(), env).model == "openai/gpt-5"
    assert with_default_model(Settings(model="anthropic/claude-opus-4-1"), env).model == "anthropic/claude-opus-4-1"
    assert with_default_model(Settings(), {}).model is None


def test_no_key_names_the_variables_and_a_missing_key_names_its_own() -> None:
    with pytest.raises(
        CredentialsMissing, match=r"^no model configured and no API key: set OPENAI_API_KEY \(or ANTHROPIC"
    ):
        check_credentials(Settings(), {})
    with pytest.raises(
        CredentialsMissing, match=r"^anthropic/claude-sonnet-4-5 needs an API key: set ANTHROPIC_API_KEY$"
    ):
        check_credentials(Settings(model="anthropic/claude-sonnet-4-5"), {"OPENAI_API_KEY": "k"})
    named = Settings(model="openai/gpt-5", providers={"openai": ProviderConfig(api_key_env="WORK_KEY")})
    with pytest.raises(CredentialsMissing, match=r"set WORK_KEY$"):
        check_credentials(named, {})
    check_credentials(Settings(model="openai/x"), {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})  # a server of one's own
    check_credentials(Settings(model="ollama_chat/qwen3"), {})  # local: no key


def test_a_self_hosted_provider_without_a_base_url_names_its_variable() -> None:
    with pytest.raises(ConfigError, match="hosted_vllm/x needs the server's URL: set HOSTED_VLLM_API_BASE"):
        check_endpoint(Settings(model="hosted_vllm/x"), {})
    check_endpoint(Settings(model="hosted_vllm/x"), {"HOSTED_VLLM_API_BASE": "http://127.0.0.1:8000/v1"})


def test_the_endpoint_host_is_a_host_never_a_key_or_path() -> None:
    env = {"OPENAI_API_KEY": "sk-secret", "OPENAI_BASE_URL": "http://user:pw@127.0.0.1:9/v1"}
    assert endpoint_host(Settings(model="openai/gpt-5"), env) == "127.0.0.1"
    assert endpoint_host(Settings(model="anthropic/claude-sonnet-4-5"), {}) == "api.anthropic.com"
