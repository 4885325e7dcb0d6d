"""The first line each process writes to its log: enough to tell, after a crash, what was running.

Version, command, model, the endpoint's host and the config file; the
protocol version once negotiated. Never a key: only the names of what was
read (ADR 0045).
"""

from __future__ import annotations

from collections.abc import Mapping

from term2 import __version__
from term2.app.config import Settings, config_path
from term2.app.first_run import endpoint_host


def log_start(command: str, settings: Settings, env: Mapping[str, str], protocol_version: int | None = None) -> None:
    from term2.support.deferred_log import get_logger

    config = config_path(env)
    get_logger("term2").info(
        "term2 started",
        command=command,
        version=__version__,
        protocol_version=protocol_version,
        model=settings.model,
        endpoint=endpoint_host(settings, env),
        config=str(config) if config.exists() else f"{config} (absent)",
    )
