"""Layered configuration (defaults < file < TERM2_* env < flags) and provider settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from term2.adapters.catalog.litellm_catalog import LitellmCatalog
from term2.app.config import (
    AcpArgs,
    ConfigError,
    DeclaredModel,
    ProviderConfig,
    Settings,
    config_path,
    load_settings,
)
from term2.app.provider_settings import provider_settings
from term2.domain.errors import ModelNotConfigured
from term2.ports.llm import ProviderSettings


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}


def _write_config(env: dict[str, str], text: str) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "term2" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- layering -------------------------------------------------------------------


def _provider_settings(settings: Settings, env: dict[str, str]) -> ProviderSettings:
    return provider_settings(settings, env, LitellmCatalog(settings.models))


def test_defaults_without_file_or_environment(env: dict[str, str]) -> None:
    assert load_settings(env) == Settings()
    defaults = Settings()
    assert (defaults.acp_v2, defaults.max_turn_requests, defaults.request_timeout) == (True, 50, 120.0)
    assert defaults.model is None


def test_config_file_location_follows_xdg_and_term2_config(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/term2/config.toml")
    assert config_path({"XDG_CONFIG_HOME": "/x", "TERM2_CONFIG": "/y/c.toml"}) == Path("/y/c.toml")


def test_config_file_overrides_defaults(env: dict[str, str]) -> None:
    _write_config(
        env,
        'provider = "openai"\nmodel = "gpt-5"\neffort = "low"\nhome = "/srv/t2"\n'
        "acp_v2 = false\nmax_turn_requests = 7\nrequest_timeout = 30\n",
    )
    settings = load_settings(env)
    assert settings.provider == "openai"
    assert settings.model == "gpt-5"
    assert settings.effort == "low"
    assert settings.home == "/srv/t2"
    assert settings.acp_v2 is False
    assert settings.max_turn_requests == 7
    assert settings.request_timeout == 30.0
    assert isinstance(settings.request_timeout, float)


def test_term2_config_replaces_the_xdg_file(env: dict[str, str], tmp_path: Path) -> None:
    _write_config(env, 'model = "from-xdg"\n')
    override = tmp_path / "elsewhere.toml"
    override.write_text('model = "from-override"\n')
    assert load_settings({**env, "TERM2_CONFIG": str(override)}).model == "from-override"


def test_environment_overrides_file_and_flags_override_environment(env: dict[str, str]) -> None:
    _write_config(env, 'model = "file-model"\neffort = "low"\nprovider = "anthropic"\nmax_turn_requests = 3\n')
    env = {**env, "TERM2_MODEL": "env-model", "TERM2_EFFORT": "medium", "TERM2_MAX_TURN_REQUESTS": "9"}
    from_env = load_settings(env)
    assert (from_env.model, from_env.effort, from_env.provider) == ("env-model", "medium", "anthropic")
    assert from_env.max_turn_requests == 9
    flagged = load_settings(env, AcpArgs(model="flag-model", effort="high"))
    assert (flagged.model, flagged.effort, flagged.provider) == ("flag-model", "high", "anthropic")


def test_empty_environment_values_do_not_override(env: dict[str, str]) -> None:
    _write_config(env, 'model = "file-model"\n')
    settings = load_settings({**env, "TERM2_MODEL": "", "TERM2_ACP_V2": "", "TERM2_MAX_TURN_REQUESTS": ""})
    assert settings.model == "file-model"
    assert settings.acp_v2 is True


@pytest.mark.parametrize(
    ("raw", "expected"), [("0", False), ("false", False), ("OFF", False), ("1", True), ("yes", True)]
)
def test_term2_acp_v2_switch(env: dict[str, str], raw: str, expected: bool) -> None:
    assert load_settings({**env, "TERM2_ACP_V2": raw}).acp_v2 is expected


def test_env_turns_v2_back_on_over_the_file(env: dict[str, str]) -> None:
    _write_config(env, "acp_v2 = false\n")
    assert load_settings({**env, "TERM2_ACP_V2": "1"}).acp_v2 is True


def test_request_timeout_from_environment(env: dict[str, str]) -> None:
    assert load_settings({**env, "TERM2_REQUEST_TIMEOUT": "2.5"}).request_timeout == 2.5


def test_retry_limits_default_then_file_then_environment(env: dict[str, str]) -> None:
    assert (Settings().retry_max_attempts, Settings().retry_max_wait) == (6, 120.0)
    _write_config(env, "retry_max_attempts = 3\nretry_max_wait = 30\n")
    from_file = load_settings(env)
    assert (from_file.retry_max_attempts, from_file.retry_max_wait) == (3, 30.0)
    from_env = load_settings({**env, "TERM2_RETRY_MAX_ATTEMPTS": "1", "TERM2_RETRY_MAX_WAIT": "0"})
    assert (from_env.retry_max_attempts, from_env.retry_max_wait) == (1, 0.0)


# -- providers and declared models ---------------------------------------------------


def test_providers_block(env: dict[str, str]) -> None:
    _write_config(
        env,
        '[providers.openai]\napi_base = "http://localhost:8000/v1"\napi_key_env = "LOCAL_KEY"\n[providers.anthropic]\n',
    )
    settings = load_settings(env)
    assert settings.providers == {
        "openai": ProviderConfig(api_base="http://localhost:8000/v1", api_key_env="LOCAL_KEY"),
        "anthropic": ProviderConfig(),
    }


def test_declared_models(env: dict[str, str]) -> None:
    _write_config(
        env,
        '[models."ollama_chat/qwen3"]\ncontext_window = 32768\nsupports_reasoning = true\n'
        '[models.my-box]\nprovider = "openai"\n',
    )
    settings = load_settings(env)
    assert settings.models == {
        "ollama_chat/qwen3": DeclaredModel(provider="ollama_chat", context_window=32768, supports_reasoning=True),
        "my-box": DeclaredModel(provider="openai"),
    }


# -- refusals name their source ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('max_turn_requests = "ten"', "max_turn_requests"),
        ("max_turn_requests = true", "max_turn_requests"),
        ("request_timeout = false", "request_timeout"),
        ("retry_max_attempts = 2.5", "retry_max_attempts"),
        ("retry_max_attempts = 0", "retry_max_attempts"),
        ('retry_max_wait = "long"', "retry_max_wait"),
        ("retry_max_wait = -1", "retry_max_wait"),
        ("acp_v2 = 1", "acp_v2"),
        ("model = 5", "model"),
        ('providers = "openai"', "providers"),
        ("[providers.openai]\napi_base = 8080", "providers.openai.api_base"),
        ('[providers.openai]\napi_key = "sk-inline"', "providers.openai: unknown keys ['api_key']"),
        ('[models.x]\ncontext_window = "big"', "models.x.context_window"),
        ('[models.x]\nsupports_reasoning = "yes"', "models.x.supports_reasoning"),
    ],
)
def test_bad_file_values_name_the_file_and_key(env: dict[str, str], text: str, key: str) -> None:
    path = _write_config(env, text + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings(env)
    assert str(path) in str(info.value)
    assert key in str(info.value)


def test_bad_toml_names_the_file(env: dict[str, str]) -> None:
    path = _write_config(env, "model = \n")
    with pytest.raises(ConfigError, match=str(path)):
        load_settings(env)


def test_unreadable_config_path_is_a_config_error(env: dict[str, str], tmp_path: Path) -> None:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    with pytest.raises(ConfigError, match="a-directory"):
        load_settings({**env, "TERM2_CONFIG": str(directory)})


def test_missing_default_config_file_is_not_an_error(env: dict[str, str], tmp_path: Path) -> None:
    assert load_settings({**env, "XDG_CONFIG_HOME": str(tmp_path / "absent")}) == Settings()


def test_a_config_file_named_by_term2_config_must_exist(env: dict[str, str], tmp_path: Path) -> None:
    """Issue 31: a TERM2_CONFIG naming a missing file was silently ignored; the user meant a file to apply."""
    missing = tmp_path / "absent.toml"
    with pytest.raises(ConfigError, match=f"TERM2_CONFIG names {missing}, which does not exist"):
        load_settings({**env, "TERM2_CONFIG": str(missing)})


def test_a_wire_without_an_endpoint_is_refused_at_load_naming_file_key_and_fix(tmp_path: Path) -> None:
    """Issue 31: `wire = "anthropic"` without api_base was a traceback at the first prompt."""
    config = tmp_path / "config.toml"
    config.write_text('[providers.corp]\nwire = "anthropic"\n')
    with pytest.raises(ConfigError) as raised:
        load_settings({"TERM2_CONFIG": str(config)})
    assert str(raised.value) == (
        f"{config}: providers.corp.wire = 'anthropic' needs an endpoint: "
        'add api_base = "https://…" under [providers.corp], or remove wire'
    )
    config.write_text('[providers.corp]\nwire = "anthropic"\napi_base = "https://llm.corp"\n')
    assert load_settings({"TERM2_CONFIG": str(config)}).providers["corp"].api_base == "https://llm.corp"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("TERM2_MAX_TURN_REQUESTS", "abc"),
        ("TERM2_REQUEST_TIMEOUT", "soon"),
        ("TERM2_ACP_V2", "maybe"),
        ("TERM2_RETRY_MAX_ATTEMPTS", "many"),
        ("TERM2_RETRY_MAX_WAIT", "later"),
    ],
)
def test_bad_environment_values_name_the_variable(env: dict[str, str], name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings({**env, name: value})
    assert name in str(info.value)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    "overrides",
    [
        {"TERM2_EFFORT": "huge"},
        {"TERM2_MAX_TURN_REQUESTS": "0"},
        {"TERM2_REQUEST_TIMEOUT": "-1"},
        {"TERM2_RETRY_MAX_ATTEMPTS": "0"},
        {"TERM2_RETRY_MAX_WAIT": "-1"},
        {"TERM2_RETRY_MAX_WAIT": "nan"},
    ],
)
def test_out_of_range_values_are_refused(env: dict[str, str], overrides: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_settings({**env, **overrides})


def test_effort_from_file_out_of_range_is_refused_naming_the_key(env: dict[str, str]) -> None:
    _write_config(env, 'effort = "huge"\n')
    with pytest.raises(ConfigError, match=r"effort.*'huge'"):
        load_settings(env)


def test_effort_from_file_out_of_range_names_the_file(env: dict[str, str]) -> None:
    path = _write_config(env, 'effort = "huge"\n')
    with pytest.raises(ConfigError, match=str(path)):
        load_settings(env)


# -- data directory -------------------------------------------------------------------


def test_data_dir_prefers_home_setting(env: dict[str, str]) -> None:
    settings = load_settings({**env, "TERM2_HOME": "/srv/term2", "XDG_DATA_HOME": "/xdg"})
    assert settings.data_dir({"XDG_DATA_HOME": "/xdg"}) == Path("/srv/term2")


def test_data_dir_expands_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings(home="~/t2").data_dir({}) == tmp_path / "t2"


def test_data_dir_falls_back_to_xdg_data_home_then_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert Settings().data_dir({"XDG_DATA_HOME": "/xdg"}) == Path("/xdg/term2")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings().data_dir({}) == tmp_path / ".local" / "share" / "term2"


# -- provider_settings (composition root) -----------------------------------------------


def test_provider_settings_without_model_fails() -> None:
    with pytest.raises(ModelNotConfigured, match="--model"):
        _provider_settings(Settings(), {})


def test_provider_settings_reads_the_provider_block_and_named_key_variable() -> None:
    settings = Settings(
        model="openai/my-local-model",
        request_timeout=9.0,
        providers={
            "openai": ProviderConfig(api_base="http://127.0.0.1:9/v1", api_key_env="LOCAL_KEY"),
            "anthropic": ProviderConfig(api_base="http://wrong"),
        },
    )
    result = _provider_settings(settings, {"LOCAL_KEY": "sk-local", "OPENAI_API_KEY": "sk-other"})
    assert result.model == "openai/my-local-model"
    assert result.api_base == "http://127.0.0.1:9/v1"
    assert result.api_key == "sk-local"
    assert result.timeout_s == 9.0
    assert result.context_window is None  # no catalog lists it
    assert result.supports_reasoning is False
    assert "sk-local" not in repr(result)


def test_provider_settings_missing_key_variable_gives_no_key() -> None:
    settings = Settings(model="openai/x", providers={"openai": ProviderConfig(api_key_env="ABSENT")})
    result = _provider_settings(settings, {})
    assert result.api_key is None
    assert result.api_base == "https://api.openai.com/v1"  # the native wire's default endpoint


def test_provider_settings_unlisted_model_with_effort_assumes_reasoning() -> None:
    assert _provider_settings(Settings(model="ollama_chat/qwen3", effort="high"), {}).supports_reasoning is True


def test_provider_settings_uses_catalog_facts_for_gpt5() -> None:
    result = _provider_settings(Settings(model="gpt-5", effort="low"), {})
    assert result.model == "gpt-5"
    assert result.context_window == 272000
    assert result.supports_reasoning is True
    assert result.effort == "low"
    assert result.api_key is None


def test_provider_settings_uses_declared_model_facts() -> None:
    settings = Settings(
        model="ollama_chat/qwen3",
        models={"ollama_chat/qwen3": DeclaredModel("ollama_chat", context_window=32768, supports_reasoning=True)},
        providers={"ollama_chat": ProviderConfig(api_base="http://localhost:11434")},
    )
    result = _provider_settings(settings, {})
    assert (result.context_window, result.supports_reasoning) == (32768, True)
    assert result.api_base == "http://localhost:11434"


def test_log_level_comes_through_settings() -> None:
    assert load_settings({}).log_level is None  # the defaults: warnings on stderr, info in the log file
    assert load_settings({"TERM2_LOG_LEVEL": " DEBUG "}).log_level == "debug"
    with pytest.raises(ConfigError, match="TERM2_LOG_LEVEL"):
        load_settings({"TERM2_LOG_LEVEL": "loud"})
