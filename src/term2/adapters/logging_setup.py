"""Logging to two places: stderr for what a person must see, a rotating file for what happened (ADR 0045).

Editors turn every stderr line of an agent into an error block, and some drop
stderr altogether; so stderr gets warnings and errors only by default, and a
log file under the XDG state folder gets `info` and above, where a user can
find it after "agent crashed". `TERM2_LOG_LEVEL` moves both. stderr is JSON
lines when it is not a terminal, human-readable otherwise; the file is always
JSON lines, one process's lines marked by its pid. stdout is never a log
destination.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from functools import partial
from pathlib import Path
from typing import Any

from term2.support import deferred_log

LOG_FILE_NAME = "term2.log"
LOG_FILE_BYTES = 5 * 1024 * 1024  # per file; with the backups, at most ~20 MiB on disk
LOG_FILE_BACKUPS = 3
DEFAULT_STDERR_LEVEL = "warning"
DEFAULT_FILE_LEVEL = "info"


def log_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_STATE_HOME/term2`, by default `~/.local/state/term2` (where the XDG spec puts logs)."""
    base = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "term2"


def log_file(env: Mapping[str, str]) -> Path:
    return log_dir(env) / LOG_FILE_NAME


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


def _private_dir(path: Path) -> None:
    """Make the folder 0700; refuse one that is not ours (a planted folder would read our logs)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{path} is not a folder of this user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def open_log_file(env: Mapping[str, str]) -> logging.Handler | None:
    """The rotating file's handler, or None when the state folder cannot be written (said once on stderr)."""
    from term2.adapters.private_log_file import PrivateRotatingFile

    path = log_file(env)
    try:
        _private_dir(path.parent)
        handler = PrivateRotatingFile(path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, delay=False)
    except OSError as exc:
        sys.stderr.write(f"term2: warning: no log file ({exc}); logs go to stderr only\n")
        return None
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


class _LogFile:
    """The file's handler, opened once, by whichever line first needs it.

    `term2 acp` opens it when structlog loads or a library warns (ADR 0054): until then nothing is written
    there (start-up's lines are kept by `deferred_log`), and its module and the opening are ~3 ms of the
    first `session/new`. Every other command opens it at once.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        self._lock = threading.Lock()
        self._opened = False
        self._handler: logging.Handler | None = None

    def handler(self) -> logging.Handler | None:
        """The handler, or None when the file cannot be opened (said once on stderr)."""
        if not self._opened:
            with self._lock:
                if not self._opened:
                    self._handler = open_log_file(self._env)
                    self._opened = True
        return self._handler


_NUMERIC = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _number(level: str) -> int:
    return _NUMERIC.get(level.lower(), logging.INFO)


class _Library(logging.Formatter):
    """Libraries' own records (stdlib logging) as the same JSON lines term2 writes."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "event": record.getMessage(),
            "logger": record.name,
            "level": record.levelname.lower(),
            "pid": os.getpid(),
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


MIN_SECRET = 8  # shorter values are not keys, and hiding them would garble ordinary words


class Redact:
    """Every occurrence of a secret (the API keys term2 read) replaced in a rendered line.

    A provider's error body may quote the key it refused, and a library may
    print a request's headers: whatever a line says, the key's value never
    reaches stderr or the file.
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len, reverse=True)

    def add(self, secrets: Iterable[str]) -> None:
        """More secrets (a key `term2 login` stored after start, ADR 0047); replaced whole, so a reader never
        sees a half-built list."""
        self._secrets = sorted({*self._secrets, *(s for s in secrets if len(s) >= MIN_SECRET)}, key=len, reverse=True)

    def __call__(self, line: str) -> str:
        for secret in self._secrets:
            line = line.replace(secret, "[redacted]")
        return line


_redact: Redact | None = None  # the one configure_logging set up, for redact_also


def redact_also(secrets: Iterable[str]) -> None:
    """Hide `secrets` from every line from now on, on both destinations."""
    if _redact is not None:
        _redact.add(secrets)


class _FanOut:
    """structlog's last processor: each event rendered once per destination whose level it reaches."""

    def __init__(self, stderr_level: int, console: Any, file: _LogFile | None, file_level: int, redact: Redact) -> None:
        self._stderr_level = stderr_level
        self._console = console
        self._file = file
        self._file_level = file_level
        self._redact = redact

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        level = _number(str(event.get("level", "info")))
        file = self._file.handler() if self._file is not None and level >= self._file_level else None
        if file is not None:
            line = self._redact(json.dumps(event, default=str))
            file.handle(logging.makeLogRecord({"msg": line, "args": None, "levelno": level}))
        if level >= self._stderr_level:
            sys.stderr.write(self._redact(self._console(logger, method, dict(event))) + "\n")
            sys.stderr.flush()
        raise _structlog_drop()


def _structlog_drop() -> BaseException:
    return _import_structlog().DropEvent()  # type: ignore[no-any-return]


def configure_logging(
    level_name: str | None = None,
    env: Mapping[str, str] | None = None,
    *,
    stderr_level: str | None = None,
    secrets: Iterable[str] = (),
    deferred: bool = False,
) -> Path | None:
    """Set up both destinations; answer the log file's path (None when there is none).

    ``level_name`` is TERM2_LOG_LEVEL (Settings.log_level): given, it sets both
    destinations; None keeps the defaults (warnings on stderr, info in the
    file). ``stderr_level`` overrides stderr alone (`term2 exec --verbose`).
    ``env`` None means no file (a command that only prints). ``secrets`` are
    replaced wherever a line would carry them (`Redact`). ``deferred`` leaves structlog's import and
    configuration to `term2.support.deferred_log.load()` (`term2 acp`, ADR 0053), and the file's opening
    to the first line written there (`_LogFile`): the path answered is then where it will be; stdlib
    logging is set up at once either way.
    """
    global _redact
    redact = _redact = Redact(secrets)
    to_stderr = _number(stderr_level or level_name or DEFAULT_STDERR_LEVEL)
    to_file = _number(level_name or DEFAULT_FILE_LEVEL)
    file = _LogFile(env) if env is not None else None
    if file is not None and not deferred and file.handler() is None:
        file = None
    stderr_handler = logging.StreamHandler(sys.stderr)
    stderr_handler.setFormatter(_Redacting(redact))
    stderr_handler.setLevel(max(to_stderr, logging.WARNING))  # libraries stay quiet unless they warn
    root = logging.getLogger()
    root.handlers[:] = [stderr_handler]
    if file is not None:
        root.addHandler(_LibraryHandler(file, redact))  # one handler, one lock: whichever record reaches it rotates
    root.setLevel(logging.WARNING)
    least = min(to_stderr, to_file if file else to_stderr)

    def configure_structlog() -> Any:
        structlog = _import_structlog()
        console: Any = (
            structlog.dev.ConsoleRenderer(colors=False) if sys.stderr.isatty() else structlog.processors.JSONRenderer()
        )
        stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
        structlog.configure(
            processors=[
                structlog.contextvars.merge_contextvars,
                structlog.processors.add_log_level,
                partial(_stamp_unless_stamped, stamp),
                _add_pid,
                structlog.processors.format_exc_info,
                _FanOut(to_stderr, console, file, to_file, redact),
            ],
            wrapper_class=structlog.make_filtering_bound_logger(least),
            logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
            cache_logger_on_first_use=True,
        )
        return structlog

    if deferred:
        deferred_log.defer(configure_structlog, least)
    else:
        configure_structlog()
    return log_file(env) if file is not None and env is not None else None


def _stamp_unless_stamped(
    stamp: Callable[[Any, str, MutableMapping[str, Any]], MutableMapping[str, Any]],
    logger: Any,
    method: str,
    event: MutableMapping[str, Any],
) -> MutableMapping[str, Any]:
    """The time of the call: a line kept until structlog loaded (`deferred_log`) carries its own."""
    return event if "timestamp" in event else stamp(logger, method, event)


class _LibraryHandler(logging.Handler):
    """Hands libraries' warnings to the file's handler, formatted as term2's own lines."""

    def __init__(self, file: _LogFile, redact: Redact) -> None:
        super().__init__(logging.WARNING)
        self._file = file
        self._format = _Library()
        self._redact = redact

    def emit(self, record: logging.LogRecord) -> None:
        file = self._file.handler()
        if file is not None:
            line = self._redact(self._format.format(record))
            file.handle(logging.makeLogRecord({"msg": line, "args": None, "levelno": record.levelno}))


class _Redacting(logging.Formatter):
    """Libraries' lines on stderr, as stdlib formats them, with the secrets replaced."""

    def __init__(self, redact: Redact) -> None:
        super().__init__()
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


def _add_pid(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Several term2 processes (one per editor window) share the file: each line says whose it is."""
    event.setdefault("pid", os.getpid())
    return event
