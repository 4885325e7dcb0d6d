"""`term2 acp`: refuse bad command lines before touching the protocol, then serve.

Every refusal exits with status 1 and writes only to stderr, so an editor
that launched term2 with a wrong flag sees a diagnostic, never a
half-written protocol stream.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from term2.app.acp_args import AcpUsageError, parse_acp_args
from term2.app.config import ConfigError, Settings, load_settings


def _refuse(message: str, extra: tuple[str, ...] = ()) -> None:
    sys.stderr.write(f"term2 acp: error: {message}\n")
    for line in extra:
        sys.stderr.write(f"  {line}\n")
    sys.stderr.write("usage: term2 acp [--provider <provider>] [--model <model>] [--effort <effort>]\n")
    sys.stderr.flush()
    sys.exit(1)


def prepare(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Parse, layer configuration and resolve the model; raise SystemExit(1) on any refusal."""
    try:
        args = parse_acp_args(argv)
        settings = load_settings(env, args)
    except (AcpUsageError, ConfigError) as exc:
        _refuse(str(exc))
        raise  # unreachable: _refuse exits
    if settings.model:
        from term2.adapters.catalog.litellm_catalog import LitellmCatalog
        from term2.app.model_resolution import ModelResolutionError, resolve_model

        catalog = LitellmCatalog(settings.models)
        try:
            resolve_model(settings.model, settings.provider, catalog.models(), catalog.providers())
        except ModelResolutionError as exc:
            _refuse(str(exc), exc.candidates)
    return settings


def launch_acp(argv: list[str], env: Mapping[str, str]) -> None:
    settings = prepare(argv, env)
    from term2.adapters.logging_setup import configure_logging

    configure_logging()  # before any module imports structlog
    from term2.app.serve import run_acp

    run_acp(settings, env)
