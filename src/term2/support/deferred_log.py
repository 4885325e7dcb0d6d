"""Loggers that import and configure structlog only once something is worth writing, or once asked to.

structlog's import (its console renderer, processors, the deprecated thread-local module and
what they import) is ~12 ms of the first `session/new`, which logs nothing a default level keeps:
`term2 acp` registers its configuration here (`defer`), start-up's `info` lines are kept in order
until `load()` (called once the first session is answered, ADR 0053) writes them with the time
they were logged, and anything from `warning` up loads structlog at once, writing what was kept
first. Events below the level configured are dropped without loading anything, as structlog's
filtering loggers drop them. Without a registered configuration (every other command, the tests)
a logger is structlog's own, imported on first use. Every term2 module logs through `get_logger`:
structlog unconfigured writes to stdout, so nothing may log through it before `load()`
(tests/unit/test_deferred_log.py checks no module imports structlog but the logging adapter).
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from structlog.typing import FilteringBoundLogger

# structlog's level methods and their numbers (logging's); anything else a logger offers loads it.
LEVELS = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "exception": 40, "critical": 50}
_KEEPS = 20  # kept until load(): `info` (start-up's lines); `warning` and up load at once

_lock = threading.RLock()
_configure: Callable[[], Any] | None = None  # imports and configures structlog; answers the module
_least = 0  # the lowest level the registered configuration writes
_kept: list[tuple[str, str, str, dict[str, Any]]] = []
_structlog: Any = None


def defer(configure: Callable[[], Any], least_level: int) -> None:
    """Hold structlog until `load()`: ``configure`` imports and configures it (and answers the module);
    nothing below ``least_level`` is written, so nothing below it is kept."""
    global _configure, _least
    with _lock:
        if _structlog is not None:  # loaded already: the new configuration applies now
            configure()
            return
        _configure, _least = configure, least_level
        atexit.register(load)  # an exit that does not pass through term2's own (an uncaught error) writes them too


def load() -> None:
    """Import and configure structlog now, and write what was kept, in order; a no-op once done."""
    _loaded()


def loaded() -> bool:
    return _structlog is not None


def bind_contextvars(**values: Any) -> None:
    _loaded().contextvars.bind_contextvars(**values)


def get_logger(name: str) -> FilteringBoundLogger:
    """A logger named ``name``; structlog's bound logger once loaded."""
    return _Deferred(name)


def _loaded() -> Any:
    global _structlog, _configure
    if _structlog is not None:
        return _structlog
    with _lock:
        if _structlog is None:
            if _configure is None:
                import structlog

                module: Any = structlog
            else:
                module = _configure()
            kept = _kept[:]
            _kept.clear()
            for name, method, event, values in kept:
                getattr(module.get_logger(name), method)(event, **values)
            _structlog, _configure = module, None
    return _structlog


class _Deferred:
    __slots__ = ("_name", "_real")

    def __init__(self, name: str) -> None:
        self._name = name
        self._real: Any = None

    def __getattr__(self, attribute: str) -> Any:
        real = self._real
        if real is None:
            level = LEVELS.get(attribute)
            if _structlog is None and _configure is not None and level is not None:
                if level < _least:
                    return _drop
                if level <= _KEEPS:
                    return self._keeper(attribute)
            real = self._real = _loaded().get_logger(self._name)
        return getattr(real, attribute)

    def _keeper(self, method: str) -> Callable[..., None]:
        def keep(event: str, *args: Any, **values: Any) -> None:
            with _lock:
                if _structlog is None and not args and "exc_info" not in values:
                    stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
                    _kept.append((self._name, method, event, {"timestamp": stamp, **values}))
                    return
            getattr(_loaded().get_logger(self._name), method)(event, *args, **values)

        return keep


def _drop(*_args: Any, **_values: Any) -> None:
    return None
