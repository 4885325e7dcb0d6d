"""`term2 exec`: compose the terminal adapter over the application and run one turn.

The root picks how the turn is shown from what stdout is: a terminal gets
the rich view, `--json` the update stream, anything else the final answer
alone; and who may approve from where a person can type: stdin when it is a
terminal the prompt was not read from, else the controlling terminal
(`/dev/tty`, as git, ssh and sudo ask while a pipe feeds them), else no one.
For the two script modes, fd 1 is made an alias of stderr and the output goes
to a private copy of it, so a library printing to stdout cannot corrupt what a
script parses (as for `term2 acp`). Every refusal before the turn exits 2 with
a line on stderr and nothing on stdout.
"""

from __future__ import annotations

import io
import os
import select
import stat
import sys
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NoReturn, TextIO

import anyio
import anyio.to_thread

from term2.adapters.terminal import exit_status
from term2.app.config import AcpArgs, ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from term2.adapters.terminal.approver import ControllingTerminal
    from term2.adapters.terminal.console_view import ConsoleView
    from term2.adapters.terminal.exec_turn import ExecRequest
    from term2.adapters.terminal.progress import Progress
    from term2.adapters.terminal.view import ExecView
    from term2.ports.approval import Approver

SHUTDOWN_GRACE_S = 2.0


@dataclass(frozen=True, slots=True)
class ExecOptions:
    prompt: str | None  # None or "-": read stdin
    provider: str | None = None
    model: str | None = None
    effort: str | None = None
    cd: str | None = None
    resume: str | None = None
    newest: bool = False
    json: bool = False
    verbose: bool = False
    mode: str | None = None  # --mode: ask, auto or read-only (ADR 0044); None: ask, or a resumed session's own
    output_last_message: str | None = None  # -o FILE: the final answer written there too
    max_turns: int | None = None  # --max-turns N: this run's model requests, over `max_turn_requests`
    add_dirs: tuple[str, ...] = ()  # --add-dir DIR...: more workspace roots, relative to where exec runs


def refuse(message: str, extra: tuple[str, ...] = (), status: int = exit_status.USAGE) -> NoReturn:
    sys.stderr.write(f"term2 exec: error: {message}\n")
    for line in extra:
        sys.stderr.write(f"  {line}\n")
    sys.stderr.flush()
    exit_now(status)


def exit_now(status: int) -> NoReturn:
    """Leave without interpreter teardown (see `serve.exit_now`): everything was flushed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def settings_for(options: ExecOptions, env: Mapping[str, str]) -> Settings:
    """The layered settings with the default model filled in, refused (status 2) unless a turn could start:
    the configuration, the model, its endpoint and its key are all checked before any session exists."""
    from term2.app.entrypoints.launcher import check_model
    from term2.app.first_run import check_credentials, check_endpoint, with_default_model
    from term2.app.model_resolution import ModelResolutionError

    try:
        settings = with_default_model(load_settings(env, AcpArgs(options.provider, options.model, options.effort)), env)
        check_model(settings)
        check_endpoint(settings, env)
        check_credentials(settings, env)
    except ConfigError as exc:
        refuse(str(exc))
    except ModelResolutionError as exc:
        refuse(str(exc), exc.candidates)
    if options.max_turns is not None:  # this run only: the per-turn limit, with its own stop reason and status 5
        settings = replace(settings, max_turn_requests=options.max_turns)
    return settings


STDIN_LIMIT = 4 * 1024 * 1024


CONTEXT_WAIT_S = 3.0


def read_prompt(given: str | None) -> str:
    """The prompt: the argument, stdin for `-` or none, or the argument followed by what was piped in.

    `git diff | term2 exec "review this"` means the diff is the prompt's
    context, as other agents' one-shot modes read it; only a pipe or a file
    is read then (a terminal, /dev/null or a socket left open is not). A pipe
    is read only once something (or its end) arrives within CONTEXT_WAIT_S:
    a caller that runs term2 with a pipe it never writes or closes (an
    agent's shell tool, a CI step) would otherwise wait forever, without a
    word, for input that never comes (ADR 0029).
    """
    try:
        if given is None or given == "-":
            if given is None and sys.stdin.isatty():
                refuse('no prompt: give one (term2 exec "explain this repository") or pipe it in')
            given = _read_stdin()
        elif _piped_in() and _something_piped():
            context = _read_stdin()
            if context.strip():
                given = f"{given}\n\n{context}"
    except KeyboardInterrupt:  # Ctrl-C while waiting for stdin: nothing ran
        exit_now(exit_status.CANCELLED)
    if not given.strip():
        refuse("the prompt is empty")
    return given


def _something_piped() -> bool:
    """Whether a file, or a pipe that gave a byte or its end within CONTEXT_WAIT_S, is on stdin; says so if not."""
    fd = sys.stdin.fileno()
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return True  # a file has an end
    ready, _, _ = select.select([fd], [], [], CONTEXT_WAIT_S)
    if not ready:
        _say(
            f"stdin is a pipe that gave nothing within {CONTEXT_WAIT_S:g} s, so it is not read; "
            "going on with the prompt alone (give `< /dev/null` when nothing is piped in)"
        )
    return bool(ready)


def _piped_in() -> bool:
    try:
        mode = os.fstat(sys.stdin.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read(STDIN_LIMIT + 1)
    if len(data) > STDIN_LIMIT:
        refuse(f"stdin holds more than {STDIN_LIMIT // (1024 * 1024)} MiB; name the file in the prompt instead")
    return data.decode("utf-8", "replace")


def stderr_level(settings: Settings, options: ExecOptions) -> str | None:
    """term2's own logs share the terminal with the turn: warnings only (the log file has the rest),
    unless asked for with --verbose (TERM2_LOG_LEVEL, when set, rules both)."""
    return "info" if options.verbose and not settings.log_level else None


READER_GONE = 141  # as a process killed by SIGPIPE reports it to a shell (128 + 13)


class QuietPipe(io.TextIOWrapper):
    """A script's stdout that ends the process quietly once its reader is gone (`term2 exec --json | head -1`).

    Nobody reads what is written from then on, so there is nothing left to
    say: exit at once with the status a shell expects of a closed pipe, with
    no traceback, as `git log | head` does.
    """

    def write(self, text: str) -> int:
        try:
            return super().write(text)
        except BrokenPipeError:
            exit_now(READER_GONE)

    def flush(self) -> None:
        try:
            super().flush()
        except BrokenPipeError:
            exit_now(READER_GONE)


def _script_stdout() -> TextIO:
    from term2.adapters.acp.stdio import guard_stdout

    fd = guard_stdout()
    raw = os.fdopen(fd, "wb", buffering=0, closefd=False)
    return QuietPipe(raw, encoding="utf-8", errors="replace", line_buffering=True)


def compose(
    options: ExecOptions, stdin_answers: bool
) -> tuple[ExecView, Approver, ControllingTerminal | None, Progress | None]:
    """The view, the approver, the controlling terminal opened for it (the caller closes it at exit), and the
    progress shown on stderr in the script modes (the caller runs it during the turn).

    Answers come from stdin when it is a terminal not spent on the prompt;
    otherwise from `/dev/tty`, whose question is drawn where the rich view
    draws or, in the script modes, on that terminal itself (never on stdout,
    which a script parses). With neither, every approval is refused.
    """
    from term2.adapters.terminal.approver import ControllingTerminal, NoTerminalApprover, asking_on
    from term2.adapters.terminal.console_view import terminal_console, tty_console

    view, drawn = _view(options)
    progress = None
    if drawn is None:  # a script's stdout: progress goes to stderr, in place on a terminal
        from term2.adapters.terminal.progress import Progress

        view = progress = Progress(view, sys.stderr, sys.stderr.isatty())
    # the live area (or the progress line) is held off while a question waits
    hold = drawn.paused if drawn is not None else progress.paused if progress is not None else nullcontext
    if stdin_answers and (drawn is not None or sys.stderr.isatty()):
        console = drawn.console if drawn is not None else terminal_console(stderr=True)
        return view, asking_on(console, sys.stdin.fileno(), hold), None, progress
    tty = ControllingTerminal.open()
    if tty is not None:
        console = drawn.console if drawn is not None else tty_console(tty.file, tty.fd)
        return view, asking_on(console, tty.fd, hold), tty, progress
    return view, NoTerminalApprover(sys.stderr), None, progress


def _view(options: ExecOptions) -> tuple[ExecView, ConsoleView | None]:
    """How the turn is shown, and the rich view when it draws on stdout's terminal."""
    if not options.json and sys.stdout.isatty():
        from term2.adapters.terminal.console_view import ConsoleView, terminal_console

        view = ConsoleView(terminal_console(), verbose=options.verbose)
        return view, view
    out = _script_stdout()
    if options.json:
        from term2.adapters.acp.wire_common import turn_usage
        from term2.adapters.acp.wire_v2 import V2Renderer
        from term2.adapters.terminal.json_lines import JsonLinesView

        return JsonLinesView(out, V2Renderer().render, sys.stderr, turn_usage), None
    from term2.adapters.terminal.final_text import FinalTextView

    return FinalTextView(out, sys.stderr), None


def launch_exec(options: ExecOptions, env: Mapping[str, str]) -> NoReturn:
    settings = settings_for(options, env)
    stdin_answers = sys.stdin.isatty() and options.prompt not in (None, "-")
    prompt = read_prompt(options.prompt)
    from term2.adapters.logging_setup import configure_logging
    from term2.adapters.terminal.exec_turn import ExecRequest
    from term2.app.entrypoints.startup_log import log_start
    from term2.app.first_run import key_values

    secrets = key_values(settings, env)
    configure_logging(settings.log_level, env, stderr_level=stderr_level(settings, options), secrets=secrets)
    log_start("exec", settings, env)
    from term2.adapters.sandbox.installed import bubblewrap_missing

    missing = bubblewrap_missing()
    if missing:  # said once at start; the sandbox refuses every command without it
        sys.stderr.write(missing)
    cwd = os.path.abspath(options.cd) if options.cd else os.getcwd()
    last = options.resume == "last"  # --resume last: the newest session in the folder, as --continue
    request = ExecRequest(
        prompt,
        cwd,
        resume=None if last else options.resume,
        newest=options.newest or last,
        model=options.model,
        effort=options.effort,
        mode=options.mode,
        add_dirs=tuple(os.path.abspath(d) for d in options.add_dirs),
    )
    view, approver, tty, progress = compose(options, stdin_answers)
    if options.output_last_message:
        from term2.adapters.terminal.final_text import AnswerToFile

        view = AnswerToFile(view, options.output_last_message)
    try:
        status = anyio.run(_exec, settings, env, request, view, approver, progress, backend="asyncio")
    except KeyboardInterrupt:  # before the turn could take Ctrl-C over: nothing ran
        status = exit_status.CANCELLED
    finally:
        if tty is not None:  # the paths that leave through exit_now mid-turn are closed by the kernel
            tty.close()
    exit_now(status)


def _say(text: str) -> None:
    sys.stderr.write(f"term2 exec: {text}\n")
    sys.stderr.flush()


async def _exec(
    settings: Settings,
    env: Mapping[str, str],
    request: ExecRequest,
    view: ExecView,
    approver: Approver,
    progress: Progress | None = None,
) -> int:
    from term2.adapters.terminal.exec_turn import run_exec
    from term2.app.entrypoints.child_watcher import use_pidfds
    from term2.app.entrypoints.container import Application, build_application
    from term2.domain.errors import Term2Error
    from term2.support.deferred_log import get_logger

    use_pidfds()
    try:
        app: Application = await anyio.to_thread.run_sync(build_application, settings, env)
    except Exception as exc:
        refuse(f"term2 failed to start: {exc}", status=exit_status.ERROR)
    status = exit_status.ERROR
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(app.background)
            if progress is not None:
                tg.start_soon(progress.run)
            try:
                prompts = await anyio.to_thread.run_sync(app.prompts)
                ended = await run_exec(
                    app.sessions,
                    prompts,
                    request,
                    view,
                    approver,
                    lambda: exit_now(exit_status.CANCELLED),
                    choose=app.config.choose,
                )
                status = exit_status.exit_status(ended.stop_reason, ended.refused)
            except Term2Error as exc:  # the folder, the session or its turn was refused: nothing ran
                _say(f"error: {exc}")
                status = exit_status.USAGE
            except Exception as exc:  # said once here; the log file keeps the traceback
                get_logger("term2.exec").info("exec failed", exc_info=True)
                _say(f"error: {exc}")
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.move_on_after(SHUTDOWN_GRACE_S, shield=True):
            await app.shutdown()
    return status
