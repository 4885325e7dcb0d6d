"""The `term2` command line (rich-click): help, version, models, doctor, prompt, exec, and acp's help.

`term2 acp` itself is parsed by `term2.app.entrypoints.acp_args` on a lean path; the
command declared here documents the same flags and delegates to it.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import rich_click as click

from term2 import __version__
from term2.app.config import EFFORTS

if TYPE_CHECKING:
    from term2.app.config import Settings
    from term2.app.entrypoints.container import Container


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="term2")
def cli() -> None:
    """term2: a coding agent for editors, served over the Agent Client Protocol."""


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--provider", metavar="PROVIDER", help="Provider name, e.g. openai, anthropic, ollama_chat.")
@click.option("--model", metavar="MODEL", help="Exact model id or <provider>/<model>.")
@click.option("--effort", metavar="EFFORT", help="Reasoning effort: " + ", ".join(EFFORTS) + ".")
@click.pass_context
def acp(ctx: click.Context, provider: str | None, model: str | None, effort: str | None) -> None:
    """Serve ACP (v1 and v2) on stdin/stdout for an editor. Warnings go to stderr, the log to
    $XDG_STATE_HOME/term2/term2.log (`term2 doctor` names it).

    There is no flag to turn off approvals or the sandbox.
    """
    from term2.app.entrypoints.launcher import launch_acp

    launch_acp(_raw_args(provider, model, effort, ctx.args), _env())


@cli.command(name="exec")
@click.argument("prompt", required=False)
@click.option("-m", "--model", metavar="MODEL", help="Exact model id or <provider>/<model>.")
@click.option("--provider", metavar="PROVIDER", help="Provider name, e.g. openai, anthropic, ollama_chat.")
@click.option("--effort", metavar="EFFORT", help="Reasoning effort: " + ", ".join(EFFORTS) + ".")
@click.option(
    "--mode",
    type=click.Choice(["ask", "auto", "read-only"]),
    help="Approval mode: ask (default), auto (sandboxed commands without network run unasked), read-only.",
)
@click.option("-C", "--cd", "cd", metavar="DIR", help="The session's folder (default: here); unsafe roots are refused.")
@click.option(
    "--add-dir",
    "add_dirs",
    metavar="DIR",
    multiple=True,
    help="Another workspace root, with the session folder's rules (repeatable); a resumed session keeps its own.",
)
@click.option(
    "--resume", metavar="ID", help="Continue the session ID (made here or in an editor); `last`: the newest here."
)
@click.option("--continue", "newest", is_flag=True, help="Continue the newest session in the folder.")
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    metavar="N",
    help="At most N model requests in this turn (default: max_turn_requests, 50); then exit status 5.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line: the updates, then the result.")
@click.option("-o", "--output-last-message", "output", metavar="FILE", help="Also write the final answer to FILE.")
@click.option("--verbose", is_flag=True, help="Show the model's thinking, and term2's info logs on stderr.")
def exec_(
    prompt: str | None,
    model: str | None,
    provider: str | None,
    effort: str | None,
    mode: str | None,
    cd: str | None,
    add_dirs: tuple[str, ...],
    resume: str | None,
    newest: bool,
    max_turns: int | None,
    as_json: bool,
    output: str | None,
    verbose: bool,
) -> None:
    """Run one turn on PROMPT (`-` or none: read stdin) in a session, then exit.

    On a terminal the turn is drawn as it happens and approvals are asked
    there; without one, every approval is refused (no flag approves anything:
    --mode auto only skips the question of a command run in the sandbox
    without network, and --mode read-only refuses every change).
    Into a pipe, stdout is the final answer; with --json, the update stream.
    Exit status: 0 end of turn, 1 error, 2 refused before the turn (command
    line, configuration, no model or key, folder, session), 3 refusal, 4 max
    tokens, 5 max turn requests, 6 the turn ended but a tool call it needed
    was refused (rejected, no terminal to ask on, read-only), 130 cancelled (Ctrl-C; a second Ctrl-C quits
    at once), 141 stdout's reader went away.

    \b
    Examples:
      term2 exec "explain this repository"
      git diff | term2 exec "review this change"
      term2 exec -m anthropic/claude-sonnet-4-5 -C ~/src/app "why does the build fail?"
      term2 exec -C ~/src/app --add-dir ~/src/lib "use lib's new parser in app"
      term2 exec --json "list the TODOs" | jq -r 'select(.type=="result") | .text'
      term2 exec -o answer.md "summarise README.md"
      term2 exec --resume last "now add tests for it"
      term2 exec --mode auto --max-turns 20 "run the tests and fix them"
      term2 sessions

    \b
    Environment:
      OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENROUTER_API_KEY, ...
                         the provider's key (or one `term2 login` stored; the variable wins);
                         without --model the first one set picks the model
      TERM2_MODEL        the model, as --model takes it
      TERM2_CONFIG       the config file (default ~/.config/term2/config.toml)
      TERM2_HOME         where sessions are stored (default ~/.local/share/term2)
      TERM2_LOG_LEVEL    debug, info, warning or error, on stderr and in the log file
      TERM2_REQUEST_TIMEOUT, TERM2_RETRY_MAX_ATTEMPTS
                         seconds one model request may take; attempts per request
      TERM2_CONNECT_TIMEOUT, TERM2_FIRST_TOKEN_TIMEOUT
                         seconds to connect (10); to the model's first token (120)
      XDG_STATE_HOME     the log file is $XDG_STATE_HOME/term2/term2.log (~/.local/state/term2/)
    """
    from term2.app.entrypoints.exec_command import ExecOptions, launch_exec

    if resume and newest:
        raise click.UsageError("--resume and --continue cannot be used together")
    options = ExecOptions(
        prompt,
        provider,
        model,
        effort,
        cd,
        resume,
        newest,
        as_json,
        verbose,
        mode,
        output,
        max_turns=max_turns,
        add_dirs=add_dirs,
    )
    launch_exec(options, _env())


def _raw_args(provider: str | None, model: str | None, effort: str | None, extra: list[str]) -> list[str]:
    argv = [f"--{k}={v}" for k, v in (("provider", provider), ("model", model), ("effort", effort)) if v]
    return argv + list(extra)


def _settings() -> Settings:
    """The layered settings, with logging set up to stderr: stdout carries only what a command prints."""
    from term2.adapters.logging_setup import configure_logging
    from term2.app.config import ConfigError, load_settings

    env = _env()
    try:
        settings = load_settings(env)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    from term2.app.first_run import key_values

    configure_logging(settings.log_level, secrets=key_values(settings, env))
    return settings


def _env() -> dict[str, str]:
    """The environment with the keys `term2 login` stored where it has none; never written back to os.environ."""
    from term2.app.entrypoints.keys import user_env

    return user_env(os.environ)


def _container() -> Container:
    from term2.app.entrypoints.container import build_container

    return build_container(_settings(), _env())


@cli.command()
@click.argument("pattern", required=False)
def models(pattern: str | None) -> None:
    """List catalog models whose id contains PATTERN: id, provider, context window, prices per million tokens."""
    container = _container()
    needle = (pattern or "").lower()
    rows = sorted(
        (m for m in container.catalog().models() if needle in m.model_id.lower()),
        key=lambda m: m.model_id,
    )
    if not rows:
        click.echo(f"no model matches {pattern!r}", err=True)
        sys.exit(1)
    width = max(len(m.model_id) for m in rows)
    heading = f"{'model':<{width}}  {'provider':<24}  {'window':>8}"
    click.echo(f"{heading}  {'$/M in':>8}  {'$/M out':>8}  {'$/M cached':>10}")
    for m in rows:
        window = str(m.context_window) if m.context_window else "-"
        prices = m.prices
        given = _per_million(prices.input if prices else None)
        taken = _per_million(prices.output if prices else None)
        cached = _per_million(prices.cache_read if prices else None)
        click.echo(f"{m.model_id:<{width}}  {m.provider:<24}  {window:>8}  {given:>8}  {taken:>8}  {cached:>10}")


def _per_million(price: float | None) -> str:
    return "-" if price is None else f"{price * 1e6:.2f}"


@cli.command()
@click.option("--offline", is_flag=True, help="Skip the one small request to the model's endpoint.")
def doctor(offline: bool) -> None:
    """Check a first run end to end: the config, the model, its key, its endpoint, the sandbox.

    The endpoint check sends the model one request of a few tokens (a fraction
    of a cent at hosted prices); --offline skips it. Each failure is printed
    with its fix; the exit status is 1 when any check failed.
    """
    from term2.app.entrypoints.doctor import line_of, run_doctor

    if not run_doctor(_env(), offline, lambda check: click.echo(line_of(check))):
        click.echo("term2 never runs commands unsandboxed, nor without a usable model: fix the above.", err=True)
        sys.exit(1)


@cli.command()
@click.argument("provider", required=False)
def login(provider: str | None) -> None:
    """Store a provider's API key for term2, checked first with one small request.

    On a terminal: pick a provider, then paste the key (it is not shown).
    Without one: PROVIDER is required and the key is stdin's first line
    (`printenv KEY | term2 login openai`). The key goes to term2's config
    folder (~/.config/term2/credentials.json, mode 0600); term2 reads it when
    the provider's variable (OPENAI_API_KEY, ...) is not set: the environment wins.
    A key the provider refuses is not stored (exit 1).
    """
    from term2.app.entrypoints.login import LoginRefused, clean_key, login, pick_provider, providers_text, read_key

    interactive = sys.stdin.isatty()
    try:
        if provider is None:
            if not interactive:
                raise LoginRefused("without a terminal, name the provider: term2 login PROVIDER < key", status=2)
            click.echo("Log in to which provider?\n" + providers_text(), err=True)
            provider = click.prompt("Provider", default="1", err=True)
        chosen = pick_provider(provider)
        from term2.app.first_run import KEY_ENV

        key = clean_key(read_key(interactive, f"Paste your {chosen} key ({KEY_ENV[chosen][0]}, not shown): "))
        login(chosen, key, os.environ, lambda line: click.echo(line, err=True))
    except LoginRefused as exc:
        click.echo(f"term2 login: {exc}", err=True)
        sys.exit(exc.status)


@cli.command()
@click.argument("provider", required=False)
def logout(provider: str | None) -> None:
    """Remove the key `term2 login` stored for PROVIDER (default: every stored key)."""
    from term2.app.entrypoints.login import LoginRefused, logout, pick_provider

    try:
        logout(pick_provider(provider) if provider else None, os.environ, lambda line: click.echo(line, err=True))
    except LoginRefused as exc:
        click.echo(f"term2 logout: {exc}", err=True)
        sys.exit(exc.status)


@cli.command()
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
@click.option(
    "-n", "--limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many to list, newest first."
)
def sessions(folder: str | None, limit: int) -> None:
    """List stored sessions, newest first: id, time, folder and title (the first prompt's line).

    With FOLDER, only the sessions made there. `term2 exec --resume ID` (or
    `--resume last`, the newest in the folder) continues one; editors list the same.
    """
    import anyio

    from term2.app.sessions import filter_cwd

    container = _container()
    root = filter_cwd(os.path.realpath(folder)) if folder else None

    async def listed() -> list[tuple[str, str, str, str]]:
        store = container.store()
        rows: list[tuple[str, str, str, str]] = []
        cursor: str | None = None
        try:
            while len(rows) < limit:
                page = await store.list(root, cursor, min(limit, 100))
                for s in page.sessions[: limit - len(rows)]:
                    when = s.updated_at.astimezone().strftime("%Y-%m-%d %H:%M")
                    rows.append((s.session_id, when, s.cwd, s.title or "(untitled)"))
                cursor = page.next_cursor
                if cursor is None:
                    break
        finally:
            await store.aclose()
        return rows

    rows = anyio.run(listed)
    if not rows:
        click.echo("no sessions" + (f" in {folder}" if folder else ""), err=True)
        return
    for session_id, when, cwd, title in rows:
        click.echo(f"{session_id}  {when}  {cwd}  {title}")


@cli.command()
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
def prompt(folder: str | None) -> None:
    """Print the system prompt a session in FOLDER (default: here) starts with, project instructions included.

    Instruction files and `.git` markers that are not yours (another user's, or
    in a folder every user may write to) are left out; stderr names each one and why.
    """
    from term2.app.conversation import system_prompt
    from term2.app.instructions import ProjectInstructions
    from term2.app.tools import WorkspaceToolbox

    _settings()  # stdout is the prompt alone
    root = os.path.realpath(folder or os.getcwd())
    instructions = ProjectInstructions(root)
    click.echo(system_prompt(root, WorkspaceToolbox().specs(), instructions.current()), nl=False)
    for ignored in instructions.ignored:
        click.echo(f"term2: project instructions: ignored {ignored}", err=True)
