"""`term2 acp`: refuse bad command lines before touching the protocol, then serve.

Every refusal exits with status 1 and writes only to stderr, so an editor
that launched term2 with a wrong flag sees a diagnostic, never a
half-written protocol stream.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from term2.app.config import ConfigError, Settings, load_settings
from term2.app.entrypoints.acp_args import AcpUsageError, parse_acp_args


def _refuse(message: str, extra: tuple[str, ...] = ()) -> None:
    sys.stderr.write(f"term2 acp: error: {message}\n")
    for line in extra:
        sys.stderr.write(f"  {line}\n")
    sys.stderr.write("usage: term2 acp [--provider <provider>] [--model <model>] [--effort <effort>]\n")
    sys.stderr.flush()
    sys.exit(1)


def prepare(argv: list[str], env: Mapping[str, str]) -> Settings:
    """Parse, layer configuration and resolve the model; raise SystemExit(1) on any refusal."""
    from term2.app.first_run import check_endpoint, with_default_model

    try:
        args = parse_acp_args(argv)
        settings = with_default_model(load_settings(env, args), env)
        check_endpoint(settings, env)
    except (AcpUsageError, ConfigError) as exc:
        _refuse(str(exc))
        raise  # unreachable: _refuse exits
    from term2.app.model_resolution import ModelResolutionError

    try:
        check_model(settings)
    except ModelResolutionError as exc:
        _refuse(str(exc), exc.candidates)
    return settings


def check_model(settings: Settings) -> None:
    """Refuse a model the catalog cannot resolve (`ModelResolutionError`, with candidates), before any work."""
    if settings.model:
        from term2.app.entrypoints.catalog import model_catalog
        from term2.app.model_resolution import resolve_model

        catalog = model_catalog(settings)
        if not catalog.quickly_accepts(settings.model, settings.provider):
            resolve_model(settings.model, settings.provider, catalog.models(), catalog.providers())


ON_A_TERMINAL = (
    "term2 acp: this is the Agent Client Protocol server an editor starts (JSON-RPC on stdin/stdout); "
    'to run a prompt here, use: term2 exec "explain this repository". Ctrl-C quits.\n'
)


def launch_acp(argv: list[str], env: Mapping[str, str]) -> None:
    settings = prepare(argv, env)
    try:
        _launch(settings, env)
    except KeyboardInterrupt:  # Ctrl-C before the server watches for it: a person at a terminal, nothing ran
        sys.stderr.write("\n")
        sys.stderr.flush()
        os._exit(130)


def _launch(settings: Settings, env: Mapping[str, str]) -> None:
    from term2 import __version__
    from term2.adapters.acp.negotiation import early_answer
    from term2.adapters.acp.stdio import MAX_LINE_BYTES, guard_stdout

    protocol_fd = guard_stdout()
    from term2.adapters.sandbox.installed import bubblewrap_missing

    missing = bubblewrap_missing()
    if missing:  # stderr only; commands are refused by the sandbox itself, never run without it
        sys.stderr.write(missing)
        sys.stderr.flush()
    if sys.stdin.isatty():  # a person, not an editor: say what this is (a client that speaks is still served)
        sys.stderr.write(ON_A_TERMINAL)
        sys.stderr.flush()
    # Editors send `initialize` first and wait for it: answer it before loading the
    # event loop, logging and the server. Any other first line goes to the server.
    first = sys.stdin.buffer.readline(MAX_LINE_BYTES + 1)
    info = {"name": "term2", "title": "term2", "version": __version__}
    from term2.app.entrypoints.catalog import takes_images

    images = takes_images(settings)
    early = early_answer(first, settings.acp_v2, info, images) if first.endswith(b"\n") else None
    version, client = None, None
    if early is not None:
        version, reply, client = early
        _write_all(protocol_fd, reply)
    from term2.adapters.logging_setup import configure_logging
    from term2.app.first_run import key_values

    # structlog itself loads once the first session is answered (or something warns): ADR 0053
    configure_logging(settings.log_level, env, secrets=key_values(settings, env), deferred=True)
    from term2.app.entrypoints.startup_log import log_start

    log_start("acp", settings, env, protocol_version=version)
    from term2.app.entrypoints.serve import run_acp

    run_acp(settings, env, protocol_fd, pending=None if early else first, version=version, client=client, images=images)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
