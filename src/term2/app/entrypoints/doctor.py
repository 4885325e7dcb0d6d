"""`term2 doctor`: check a first run end to end, each failure with its fix (ADR 0045).

In the order a turn needs them: the config parses, the model resolves, its
key is present, its endpoint answers one tiny request, and commands can be
sandboxed. The request is real (a model that answers it answers a turn) and
costs a few tokens, which is said before it is sent; `--offline` skips it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from term2.app.config import ConfigError, Settings, config_path, load_settings
from term2.domain.usage import Prices

PROBE = "Reply with the single word: ok"
PROBE_MAX_TOKENS = 16
PROBE_TOKENS_IN = 16  # the probe's words and the chat template's few tokens around them


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    plain: bool = False  # a finding, not a verdict: said as it is (its detail carries its own mark)


def line_of(check: Check) -> str:
    if check.plain:
        return f"{check.name}: {check.detail}"
    mark = "ok" if check.ok else "FAILED"
    fix = f" (fix: {check.fix})" if check.fix and not check.ok else ""
    return f"{check.name}: {mark}: {check.detail}{fix}"


Say = Callable[[Check], None]


def run_doctor(env: Mapping[str, str], offline: bool, say: Say) -> bool:
    """Every check, said as it is made; False when any failed (the sandbox's are made even then)."""
    from term2.adapters.logging_setup import configure_logging, log_file, open_log_file

    try:
        settings = load_settings(env)
    except ConfigError as exc:
        say(Check("config", False, str(exc), "fix the file or variable named above"))
        return False
    from term2.app.first_run import key_values

    configure_logging(settings.log_level, secrets=key_values(settings, env))  # stderr only: doctor prints the rest
    config = config_path(env)
    say(Check("config", True, f"{config}" if config.exists() else f"{config} (absent: the defaults apply)"))
    opened = open_log_file(env)  # as every process opens it: a failure is said on stderr
    if opened is not None:
        opened.close()
    fix = f"make {log_file(env).parent} a folder of yours, mode 0700 (or set XDG_STATE_HOME)"
    say(Check("log file", opened is not None, str(log_file(env)), fix))
    healthy = _model_checks(settings, env, offline, say) and opened is not None
    return _sandbox_checks(settings, env, say) and healthy


def _model_checks(settings: Settings, env: Mapping[str, str], offline: bool, say: Say) -> bool:
    from term2.app.entrypoints.launcher import check_model
    from term2.app.first_run import (
        DEFAULTS,
        KEY_ENV,
        CredentialsMissing,
        check_credentials,
        check_endpoint,
        endpoint_host,
        provider_of,
        with_default_model,
    )
    from term2.app.model_resolution import ModelResolutionError

    given = settings.model
    settings = with_default_model(settings, env)
    if not settings.model:
        names = ", ".join(KEY_ENV[p][0] for p, _ in DEFAULTS)
        say(
            Check(
                "model",
                False,
                "none configured and no key found",
                f"set one of {names}, or TERM2_MODEL, or run term2 login",
            )
        )
        return False
    try:
        check_model(settings)
    except ModelResolutionError as exc:
        say(Check("model", False, str(exc), "see `term2 models PATTERN` for the exact ids"))
        return False
    origin = "" if given else " (the default for the key found)"
    say(Check("model", True, f"{settings.model}{origin}"))
    try:
        check_endpoint(settings, env)
        check_credentials(settings, env)
    except CredentialsMissing as exc:
        say(Check("key", False, str(exc), "export the variable, then run term2 doctor again"))
        return False
    except ConfigError as exc:
        say(Check("endpoint", False, str(exc), "set the variable named above"))
        return False
    provider = provider_of(settings) or ""
    present = [n for n in KEY_ENV.get(provider, ()) if env.get(n)]
    configured = settings.providers.get(provider)
    if configured is not None and configured.api_key_env and env.get(configured.api_key_env):
        present = [configured.api_key_env]
    say(Check("key", True, f"{present[0]} is set" if present else "none needed for this endpoint"))
    host = endpoint_host(settings, env) or "?"
    if offline:
        say(Check("endpoint", True, f"{host}: not asked (--offline)"))
        return True
    return anyio.run(probe_endpoint, settings, env, host, say)


async def probe_endpoint(settings: Settings, env: Mapping[str, str], host: str, say: Say) -> bool:
    """One request of a few tokens through the adapter a turn uses, bounded by request_timeout."""
    from term2.app.entrypoints.container import build_container
    from term2.domain.transcript import ChatMessage
    from term2.ports.llm import CompletionRequest, Finished, IncompleteResponse, LLMError

    container = build_container(settings, dict(env))
    llm = container.llm()
    request = CompletionRequest((ChatMessage("user", PROBE),), max_tokens=PROBE_MAX_TOKENS)
    cost = _cost(container.llm_settings().prices)
    try:
        with anyio.fail_after(settings.request_timeout + 5):
            async for event in llm.stream(request):
                if isinstance(event, Finished):
                    break
    except IncompleteResponse:  # cut by the tiny cap (a model that reasons first): it answered all the same
        pass
    except LLMError as exc:
        say(Check("endpoint", False, f"{host}: {exc}", _fix_for(exc, settings)))
        return False
    except TimeoutError:
        say(
            Check(
                "endpoint", False, f"{host}: no answer within {settings.request_timeout:g} s", _fix_for(None, settings)
            )
        )
        return False
    finally:
        with anyio.CancelScope(shield=True):
            await llm.aclose()
    say(
        Check(
            "endpoint",
            True,
            f"{host} answered (one request: ~{PROBE_TOKENS_IN} tokens in, at most {PROBE_MAX_TOKENS} out{cost})",
        )
    )
    return True


def _cost(prices: Prices | None) -> str:
    """The most the probe can cost at the catalog's prices (USD per token), when they are known."""
    if prices is None:
        return ""
    most = PROBE_TOKENS_IN * prices.input + PROBE_MAX_TOKENS * prices.output
    return f", at most ${most:.6f}"


def _fix_for(exc: Exception | None, settings: Settings) -> str:
    from term2.ports.llm import AuthenticationFailed, ProviderTimeout, ProviderUnreachable

    if isinstance(exc, AuthenticationFailed):
        return "the provider refused the key: check it (or its variable) and its account"
    if isinstance(exc, ProviderUnreachable):
        return "check the base URL variable or api_base, and that the server runs"
    if exc is None or isinstance(exc, ProviderTimeout):
        return "check the server; raise TERM2_REQUEST_TIMEOUT if it is only slow"
    return "see the message above; `term2 doctor --offline` skips this check"


def _sandbox_checks(settings: Settings, env: Mapping[str, str], say: Say) -> bool:
    from term2.app.entrypoints.container import build_container

    status = anyio.run(build_container(settings, dict(env)).sandbox().status)
    fix = "install bubblewrap (apt install bubblewrap) and allow user namespaces"
    say(Check("sandbox (bubblewrap)", status.available, status.detail, "" if status.available else fix))
    if status.network is not None:  # commands that ask for hosts (ADR 0030); without it they fail, nothing else does
        say(Check("network by approval", True, status.network, plain=True))
    if status.walks is not None:  # why commands in a big workspace may be slow (ADR 0031, 0033)
        say(Check("workspace walks", True, status.walks, plain=True))
    return status.available
