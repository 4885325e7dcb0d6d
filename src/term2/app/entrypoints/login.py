"""`term2 login` and `term2 logout`: a key checked with one small request, then stored 0600 (ADR 0047).

On a terminal the key is read without echo (getpass, from the terminal
itself); without one it is the first line of stdin, as `gh auth login
--with-token` takes a token, so a script or an editor can log in too. The
check goes through the adapter a turn uses, so the provider's base-URL
variables are honoured and a refused key (401) is never stored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import replace

import anyio

from term2.app.config import ConfigError, load_settings
from term2.app.entrypoints.doctor import Check, line_of, probe_endpoint
from term2.app.entrypoints.keys import key_store
from term2.app.first_run import DEFAULTS, KEY_ENV, endpoint_host, key_values
from term2.app.stored_keys import LOGIN_PROVIDERS
from term2.ports.credentials import KeyStoreError

Say = Callable[[str], None]


class LoginRefused(Exception):
    """Nothing was stored; the message says why and what to do (exit 1, or 2 for a usage error)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def providers_text() -> str:
    return "\n".join(f"  {n}. {provider:<11} {variable}" for n, (provider, variable) in enumerate(LOGIN_PROVIDERS, 1))


def pick_provider(answer: str) -> str:
    """A provider by its number or name in LOGIN_PROVIDERS."""
    answer = answer.strip().lower()
    names = [provider for provider, _ in LOGIN_PROVIDERS]
    if answer.isdigit() and 1 <= int(answer) <= len(names):
        return names[int(answer) - 1]
    if answer in names:
        return answer
    raise LoginRefused(f"unknown provider {answer!r}: one of {', '.join(names)}", status=2)


def clean_key(raw: str) -> str:
    key = raw.strip()
    if not key:
        raise LoginRefused("no key given", status=2)
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in key):
        raise LoginRefused("a key is one word of printable characters: paste it again", status=2)
    return key


def login(provider: str, key: str, env: Mapping[str, str], say: Say) -> None:
    """Check `key` against `provider`'s endpoint with one small request, then store it; LoginRefused if not."""
    from term2.adapters.logging_setup import configure_logging

    variable = KEY_ENV[provider][0]
    checked = {name: value for name, value in env.items() if name not in KEY_ENV[provider]} | {variable: key}
    try:
        settings = load_settings(checked)
    except ConfigError as exc:
        raise LoginRefused(str(exc)) from exc
    settings = replace(settings, model=dict(DEFAULTS)[provider], provider=None)
    configure_logging(settings.log_level, secrets=(key, *key_values(settings, checked)))
    host = endpoint_host(settings, checked) or "?"
    failed: list[Check] = []
    if not anyio.run(probe_endpoint, settings, checked, host, failed.append):
        raise LoginRefused(line_of(failed[-1]) + " - nothing was stored" if failed else "the key was not accepted")
    store = key_store(env)
    try:
        store.save(variable, key)
    except (KeyStoreError, OSError) as exc:
        raise LoginRefused(f"the key works, but could not be stored: {exc}") from exc
    say(f"{provider}: the key works ({host} answered); stored in {store.path} (mode 0600)")
    if env.get(variable):
        say(f"note: {variable} is set in this environment, and wins over the stored key")


def logout(provider: str | None, env: Mapping[str, str], say: Say) -> None:
    names = KEY_ENV[provider] if provider else tuple(n for names in KEY_ENV.values() for n in names)
    store = key_store(env)
    try:
        gone = store.remove(names)
    except (KeyStoreError, OSError) as exc:
        raise LoginRefused(str(exc)) from exc
    if gone:
        say(f"removed {', '.join(gone)} from {store.path}")
    else:
        say("no stored key" + (f" for {provider}" if provider else "") + f" in {store.path}")
    still = [n for n in names if env.get(n)]
    if still:
        say(f"note: {', '.join(still)} is still set in this environment")


def read_key(interactive: bool, prompt: str) -> str:
    if interactive:
        import getpass

        return getpass.getpass(prompt)  # from the terminal, not echoed
    return sys.stdin.readline()
