"""Logging to stderr only: structlog for term2, stdlib logging for libraries.

stderr is JSON lines when it is not a terminal (editors capture it into a log
pane or file), human-readable otherwise. stdout is never a log destination.
"""

from __future__ import annotations

import logging
import sys
from typing import Any


def _import_structlog() -> Any:
    """Import structlog without its optional rich integration.

    structlog.dev imports rich (and through it pygments) only to pretty-print
    tracebacks on a console; that costs ~0.4 s on the path that answers
    `initialize`, and term2 never uses the console renderer there.
    """
    if "structlog" in sys.modules:
        return sys.modules["structlog"]
    hidden = "rich" not in sys.modules
    if hidden:
        sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        import structlog
    finally:
        if hidden:
            del sys.modules["rich"]
    return structlog


def configure_logging(level_name: str = "info") -> None:
    """``level_name`` is term2's own level (Settings.log_level, from TERM2_LOG_LEVEL)."""
    structlog = _import_structlog()
    level = getattr(logging, level_name.upper(), logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(max(level, logging.WARNING))  # libraries stay quiet unless they warn
    renderer: Any = (
        structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty() else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
