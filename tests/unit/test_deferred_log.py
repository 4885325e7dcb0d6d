"""structlog held until load() (ADR 0053): kept lines written in order with their own time, nothing lost,
nothing on stdout, warnings at once; and no term2 module logs around it.

The holding is process-wide state, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import term2

PROGRAM = """
import json, sys, time
from term2.adapters.logging_setup import configure_logging, log_file
from term2.support import deferred_log
from term2.support.deferred_log import get_logger

env = {"XDG_STATE_HOME": sys.argv[1]}
configure_logging(None, env, deferred=True)
log = get_logger("term2.test")
log.debug("below the file's level")
log.info("term2 started", n=1)
get_logger("term2.other").info("protocol negotiated", protocol_version=1)
before = time.time()
held = "structlog" not in sys.modules and not deferred_log.loaded()
MODE
print(json.dumps({"held": held, "before": before, "loaded": "structlog" in sys.modules}))
"""


def _run(tmp_path: Path, mode: str) -> tuple[dict[str, object], list[dict[str, object]], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.replace("MODE", mode), str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "state" / "term2" / "term2.log").read_text().splitlines()
    return json.loads(done.stdout), [json.loads(line) for line in lines], done.stderr


def test_kept_lines_are_written_in_order_with_their_own_time_once_loaded(tmp_path: Path) -> None:
    said, lines, stderr = _run(tmp_path, "time.sleep(0.05); deferred_log.load(); log.info('after', n=2)")
    assert said["held"] is True and said["loaded"] is True
    assert [line["event"] for line in lines] == ["term2 started", "protocol negotiated", "after"]
    assert [line.get("n") for line in lines] == [1, None, 2] and lines[1]["protocol_version"] == 1
    assert all(line["level"] == "info" and isinstance(line["pid"], int) for line in lines)
    # the kept lines carry the time they were logged, not the time they were written
    assert lines[0]["timestamp"] <= lines[1]["timestamp"] < lines[2]["timestamp"]
    assert str(lines[1]["timestamp"]).endswith("Z") and str(lines[2]["timestamp"]).endswith("Z")
    assert stderr == ""


def test_a_warning_loads_at_once_after_what_was_kept(tmp_path: Path) -> None:
    said, lines, stderr = _run(tmp_path, "log.warning('worth a look', n=3)")
    assert said["held"] is True and said["loaded"] is True
    assert [line["event"] for line in lines] == ["term2 started", "protocol negotiated", "worth a look"]
    assert "worth a look" in stderr and "term2 started" not in stderr  # stderr: warnings only, as before


def test_kept_lines_are_written_when_the_process_ends_without_loading(tmp_path: Path) -> None:
    said, lines, _ = _run(tmp_path, "")  # no load(), no warning: the interpreter's exit writes them
    assert said["held"] is True and said["loaded"] is False
    assert [line["event"] for line in lines] == ["term2 started", "protocol negotiated"]


def test_an_exception_is_written_with_its_traceback(tmp_path: Path) -> None:
    mode = "try:\n    1 / 0\nexcept ZeroDivisionError:\n    log.exception('failed')"
    _, lines, stderr = _run(tmp_path, mode)
    assert lines[-1]["event"] == "failed" and "ZeroDivisionError" in str(lines[-1]["exception"])
    assert "ZeroDivisionError" in stderr


def test_without_a_held_configuration_loggers_are_structlogs_own() -> None:
    program = (
        "import sys\nfrom term2.support.deferred_log import get_logger\n"
        "from structlog.testing import capture_logs\n"
        "with capture_logs() as seen:\n    get_logger('x').debug('deep', n=1)\n"
        "assert seen == [{'event': 'deep', 'n': 1, 'log_level': 'debug'}], seen\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_term2_logs_only_through_the_deferred_loggers() -> None:
    """structlog unconfigured writes to stdout: a module logging through it before load() would break the protocol."""
    root = Path(term2.__file__).parent
    allowed = {root / "adapters" / "logging_setup.py", root / "support" / "deferred_log.py"}
    offenders = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(name.split(".")[0] == "structlog" for name in names) and path not in allowed:
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_the_file_is_opened_by_the_first_line_written_there(tmp_path: Path) -> None:
    """Deferred, the file and its handler's module wait for the first line (ADR 0054); a library's warning
    before structlog loads is that line, and is written."""
    mode = (
        "unopened = 'logging.handlers' not in sys.modules and not log_file(env).exists()\n"
        "import logging\nlogging.getLogger('a.library').warning('library says %s', 'hello')\n"
        "assert unopened and log_file(env).exists()"
    )
    said, lines, stderr = _run(tmp_path, mode)
    assert said["held"] is True and said["loaded"] is False
    assert [line["event"] for line in lines] == ["library says hello", "term2 started", "protocol negotiated"]
    assert lines[0]["logger"] == "a.library" and lines[0]["level"] == "warning"
    assert "library says hello" in stderr
