"""Layered configuration: built-in defaults < config file < TERM2_* environment < flags.

Read with the standard library (tomllib), because the launcher reads it before
answering `initialize` and must stay light.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast

from term2.app.edit_tools import EDIT_TOOL_CHOICES
from term2.domain.model_choice import EFFORT_LEVELS
from term2.ports.catalog import DeclaredModel, RequestOptions

EFFORTS = EFFORT_LEVELS  # the domain owns them (ADR 0043)
LOG_LEVELS = ("debug", "info", "warning", "error")
TOOL_CHOICES = ("auto", "none", "required")
_DECLARING = frozenset({"provider", "context_window", "supports_reasoning", "max_output_tokens", "images"})
_OPTIONS = frozenset({"tool_choice", "stream_usage", "stream", "extra_body"})
# Body fields term2 itself writes: an extra_body naming one would change what the wire means.
_OWN_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "tools", "tool_choice"})


@dataclass(frozen=True, slots=True)
class AcpArgs:
    """The command line's layer of the settings (`term2 acp --provider --model --effort`)."""

    provider: str | None = None
    model: str | None = None
    effort: str | None = None


class ConfigError(Exception):
    """Configuration that cannot be used; the message names the source and the key."""


Wire = Literal["openai", "anthropic", "litellm"]  # which adapter serves a provider (app/wires.py)
WIRES: tuple[Wire, ...] = ("openai", "anthropic", "litellm")


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    api_base: str | None = None
    api_key_env: str | None = None
    wire: Wire | None = None  # None: the default table (app/wires.py)


@dataclass(frozen=True, slots=True)
class Settings:
    provider: str | None = None
    model: str | None = None
    effort: str | None = None
    home: str | None = None  # where sessions are stored
    acp_v2: bool = True
    max_turn_requests: int = 50
    request_timeout: float = 120.0
    retry_max_attempts: int = 6  # attempts per model request, the first included; 1 turns retries off
    retry_max_wait: float = 120.0  # seconds of backoff per model request, over all its retries
    compaction_threshold: float = 0.8  # of the usable context window; past it the next request compacts first
    turn_timeout: float = 1800.0  # seconds one turn may spend waiting on the model, over all its requests
    connect_timeout: float = 10.0  # seconds to open a connection to the model's endpoint (the native wires)
    first_token_timeout: float = 120.0  # seconds a model request may take to its first text, thought or tool call
    mcp_startup_timeout: float = 30.0  # seconds an MCP server the client names has to start and answer (ADR 0023)
    mcp_call_timeout: float = 300.0  # seconds one MCP tool call may take
    log_level: str | None = None  # TERM2_LOG_LEVEL: both destinations; None: warnings on stderr, info in the file
    edit_tools: str = "auto"  # which edit tools the model gets; "auto": by its family (app/edit_tools.py)
    providers: Mapping[str, ProviderConfig] = field(default_factory=dict)
    models: Mapping[str, DeclaredModel] = field(default_factory=dict)
    model_options: Mapping[str, RequestOptions] = field(default_factory=dict)  # per model id, `[models."<id>"]`
    # `[network.resolve]`: (name, port) -> (address, port) for the proxy, like curl --resolve (ADR 0030)
    network_resolve: Mapping[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def data_dir(self, env: Mapping[str, str]) -> Path:
        if self.home:
            return Path(self.home).expanduser()
        base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return Path(base) / "term2"


def config_path(env: Mapping[str, str]) -> Path:
    if env.get("TERM2_CONFIG"):
        return Path(env["TERM2_CONFIG"])
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "term2" / "config.toml"


def _bool(value: str, source: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{source}: expected a boolean, got {value!r}")


def _expect(kind: type | tuple[type, ...], value: object, where: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float, (int, float))):
        raise ConfigError(f"{where}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _from_file(path: Path, named: bool = False) -> dict[str, Any]:
    """The file's layer; `named` (TERM2_CONFIG gave the path) makes a missing file an error, not silence."""
    if not path.exists():
        if named:
            raise ConfigError(f"TERM2_CONFIG names {path}, which does not exist: create it or unset TERM2_CONFIG")
        return {}
    import tomllib  # only when there is a file: this runs before `initialize` is answered

    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        if named:
            raise ConfigError(
                f"TERM2_CONFIG names {path}, which does not exist: create it or unset TERM2_CONFIG"
            ) from None
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    where = str(path)
    out: dict[str, Any] = {}
    for key in ("provider", "model", "effort", "home", "edit_tools"):
        if key in data:
            out[key] = _expect(str, data[key], f"{where}: {key}")
    if "acp_v2" in data:
        out["acp_v2"] = _expect(bool, data["acp_v2"], f"{where}: acp_v2")
    if "max_turn_requests" in data:
        out["max_turn_requests"] = _expect(int, data["max_turn_requests"], f"{where}: max_turn_requests")
    if "request_timeout" in data:
        out["request_timeout"] = float(_expect((int, float), data["request_timeout"], f"{where}: request_timeout"))
    if "retry_max_attempts" in data:
        out["retry_max_attempts"] = _expect(int, data["retry_max_attempts"], f"{where}: retry_max_attempts")
    if "retry_max_wait" in data:
        out["retry_max_wait"] = float(_expect((int, float), data["retry_max_wait"], f"{where}: retry_max_wait"))
    if "compaction_threshold" in data:
        value = _expect((int, float), data["compaction_threshold"], f"{where}: compaction_threshold")
        out["compaction_threshold"] = float(value)
    for key in ("mcp_startup_timeout", "mcp_call_timeout", "turn_timeout", "connect_timeout", "first_token_timeout"):
        if key in data:
            out[key] = float(_expect((int, float), data[key], f"{where}: {key}"))
    _check_ranges(out, where)
    providers: dict[str, ProviderConfig] = {}
    for name, block in _expect(dict, data.get("providers", {}), f"{where}: providers").items():
        block = _expect(dict, block, f"{where}: providers.{name}")
        unknown = set(block) - {"api_base", "api_key_env", "wire"}
        if unknown:
            raise ConfigError(f"{where}: providers.{name}: unknown keys {sorted(unknown)}")
        at = f"{where}: providers.{name}"
        wire = _expect((str, type(None)), block.get("wire"), f"{at}.wire")
        if wire is not None and wire not in WIRES:
            raise ConfigError(f"{at}.wire must be one of {', '.join(WIRES)}, got {wire!r}")
        api_base = _expect((str, type(None)), block.get("api_base"), f"{at}.api_base")
        _check_wire(name, wire, api_base, at)
        providers[name] = ProviderConfig(
            api_base=api_base,
            api_key_env=_expect((str, type(None)), block.get("api_key_env"), f"{at}.api_key_env"),
            wire=cast(Wire | None, wire),
        )
    models: dict[str, DeclaredModel] = {}
    options: dict[str, RequestOptions] = {}
    for name, block in _expect(dict, data.get("models", {}), f"{where}: models").items():
        block = _expect(dict, block, f"{where}: models.{name}")
        at = f"{where}: models.{name}"
        if set(block) & _OPTIONS:
            options[name] = _request_options(block, at)
        if set(block) & _DECLARING or not set(block) & _OPTIONS:  # options alone keep the catalog's entry
            models[name] = _declared(name, block, at)
    out["providers"] = providers
    out["models"] = models
    out["model_options"] = options
    if "network" in data:  # parsed only when present: this runs before `initialize` is answered
        from term2.app.network_config import network_resolve

        out["network_resolve"] = network_resolve(data["network"], where)
    return out


def _check_wire(provider: str, wire: str | None, api_base: str | None, at: str) -> None:
    """A wire other than the provider's own needs an endpoint: refused at start, not at the first prompt."""
    if wire is None or wire == "litellm" or api_base:
        return
    from term2.app.wires import NATIVE

    endpoint = NATIVE.get(provider)
    if endpoint is None or endpoint.wire != wire:  # the table's own wire finds its endpoint (app/first_run.py)
        raise ConfigError(
            f'{at}.wire = {wire!r} needs an endpoint: add api_base = "https://…" under [providers.{provider}], '
            "or remove wire"
        )


def _positive(value: int | None, where: str) -> int | None:
    if value is not None and value < 1:
        raise ConfigError(f"{where} must be at least 1")
    return value


def _declared(name: str, block: Mapping[str, Any], at: str) -> DeclaredModel:
    return DeclaredModel(
        provider=_expect(str, block.get("provider", name.partition("/")[0]), f"{at}.provider"),
        context_window=_positive(
            _expect((int, type(None)), block.get("context_window"), f"{at}.context_window"), f"{at}.context_window"
        ),
        supports_reasoning=_expect(bool, block.get("supports_reasoning", False), f"{at}.supports_reasoning"),
        images=_expect(bool, block.get("images", False), f"{at}.images"),
        max_output_tokens=_positive(
            _expect((int, type(None)), block.get("max_output_tokens"), f"{at}.max_output_tokens"),
            f"{at}.max_output_tokens",
        ),
    )


def _request_options(block: Mapping[str, Any], at: str) -> RequestOptions:
    choice = _expect((str, type(None)), block.get("tool_choice"), f"{at}.tool_choice")
    if choice is not None and choice not in TOOL_CHOICES:
        raise ConfigError(f"{at}.tool_choice must be one of {', '.join(TOOL_CHOICES)}, got {choice!r}")
    extra = _expect(dict, block.get("extra_body", {}), f"{at}.extra_body")
    owned = sorted(set(extra) & _OWN_FIELDS)
    if owned:
        raise ConfigError(f"{at}.extra_body may not set {', '.join(owned)}: term2 writes those itself")
    return RequestOptions(
        tool_choice=choice,
        stream_usage=_expect(bool, block.get("stream_usage", True), f"{at}.stream_usage"),
        stream=_expect(bool, block.get("stream", True), f"{at}.stream"),
        extra_body=tuple(extra.items()),
    )


def _check_ranges(values: Mapping[str, Any], source: str) -> None:
    """Name the layer a bad value came from, so the user knows which file or variable to fix."""
    if values.get("edit_tools", "auto") not in EDIT_TOOL_CHOICES:
        raise ConfigError(f"{source}: edit_tools must be one of {', '.join(EDIT_TOOL_CHOICES)}")
    effort = values.get("effort")
    if effort is not None and effort not in EFFORTS:
        raise ConfigError(f"{source}: effort must be one of {', '.join(EFFORTS)}, got {effort!r}")
    if values.get("max_turn_requests", 1) < 1:
        raise ConfigError(f"{source}: max_turn_requests must be at least 1")
    if values.get("request_timeout", 1.0) <= 0:
        raise ConfigError(f"{source}: request_timeout must be positive")
    if values.get("retry_max_attempts", 1) < 1:
        raise ConfigError(f"{source}: retry_max_attempts must be at least 1")
    if not values.get("retry_max_wait", 0.0) >= 0:  # NaN too: it would lift the cap silently
        raise ConfigError(f"{source}: retry_max_wait must be zero or more seconds")
    if not 0.1 <= values.get("compaction_threshold", 0.8) <= 0.95:
        raise ConfigError(f"{source}: compaction_threshold must be between 0.1 and 0.95")
    for key in ("mcp_startup_timeout", "mcp_call_timeout", "turn_timeout", "connect_timeout", "first_token_timeout"):
        if not values.get(key, 1.0) > 0:  # NaN too
            raise ConfigError(f"{source}: {key} must be a positive number of seconds")


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("provider", "model", "effort", "home", "edit_tools"):
        value = env.get(f"TERM2_{key.upper()}")
        if value:
            out[key] = value
    if env.get("TERM2_ACP_V2"):
        out["acp_v2"] = _bool(env["TERM2_ACP_V2"], "TERM2_ACP_V2")
    if env.get("TERM2_LOG_LEVEL"):
        raw_level = env["TERM2_LOG_LEVEL"]
        level = raw_level.strip().lower()
        if level not in LOG_LEVELS:
            raise ConfigError(f"TERM2_LOG_LEVEL: expected one of {', '.join(LOG_LEVELS)}, got {raw_level!r}")
        out["log_level"] = level
    if env.get("TERM2_MAX_TURN_REQUESTS"):
        try:
            out["max_turn_requests"] = int(env["TERM2_MAX_TURN_REQUESTS"])
        except ValueError as exc:
            raw = env["TERM2_MAX_TURN_REQUESTS"]
            raise ConfigError(f"TERM2_MAX_TURN_REQUESTS: expected an integer, got {raw!r}") from exc
    for key, kind, noun in (
        ("request_timeout", float, "a number"),
        ("retry_max_attempts", int, "an integer"),
        ("retry_max_wait", float, "a number"),
        ("compaction_threshold", float, "a number"),
        ("mcp_startup_timeout", float, "a number"),
        ("mcp_call_timeout", float, "a number"),
        ("turn_timeout", float, "a number"),
        ("connect_timeout", float, "a number"),
        ("first_token_timeout", float, "a number"),
    ):
        name = f"TERM2_{key.upper()}"
        if env.get(name):
            try:
                out[key] = kind(env[name])
            except ValueError as exc:
                raise ConfigError(f"{name}: expected {noun}, got {env[name]!r}") from exc
    _check_ranges(out, "environment (TERM2_*)")
    return out


def load_settings(env: Mapping[str, str], args: AcpArgs | None = None) -> Settings:
    settings = Settings()
    settings = replace(settings, **_from_file(config_path(env), named=bool(env.get("TERM2_CONFIG"))))
    settings = replace(settings, **_from_env(env))
    if args is not None:
        given = (("provider", args.provider), ("model", args.model), ("effort", args.effort))
        flags: dict[str, Any] = {k: v for k, v in given if v}
        settings = replace(settings, **flags)
    if settings.effort is not None and settings.effort not in EFFORTS:
        raise ConfigError(f"effort must be one of {', '.join(EFFORTS)}, got {settings.effort!r}")
    if settings.max_turn_requests < 1:
        raise ConfigError("max_turn_requests must be at least 1")
    if settings.request_timeout <= 0:
        raise ConfigError("request_timeout must be positive")
    return settings
