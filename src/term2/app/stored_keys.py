"""Keys stored by `term2 login`, read like the environment variable they stand for (ADR 0047).

The environment always wins: a stored key fills a variable only where the
environment leaves it empty. The merged mapping is term2's own: it is never
`os.environ`, so nothing term2 starts (bwrap's allow-listed environment, MCP
servers' minimal one, the MCP launcher) inherits a stored key.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, MutableMapping

from term2.app.config import Settings
from term2.app.first_run import DEFAULTS, KEY_ENV, CredentialsMissing, check_credentials, with_default_model
from term2.ports.credentials import KeyStore, KeyStoreError

# The providers `term2 login` offers, in DEFAULTS' order: each with the variable its key stands for.
LOGIN_PROVIDERS: tuple[tuple[str, str], ...] = tuple((provider, KEY_ENV[provider][0]) for provider, _ in DEFAULTS)
KEY_VARIABLES = frozenset(name for names in KEY_ENV.values() for name in names)


def with_stored_keys(env: Mapping[str, str], store: KeyStore) -> dict[str, str]:
    """A copy of `env` with each stored key whose variable `env` leaves empty; a store that fails is said once."""
    merged = dict(env)
    try:
        stored = store.load()
    except KeyStoreError as exc:
        sys.stderr.write(f"term2: stored keys not used: {exc}\n")
        return merged
    for name, key in stored.items():
        if name in KEY_VARIABLES and key and not env.get(name):
            merged[name] = key
    return merged


class KeyRing:
    """Keeps a running process's mapping in step with the store after a login or logout made elsewhere.

    `env` is the mapping the composition root hands every use case (the same
    dict object), so a refresh reaches each session's next model request.
    Variables the environment set itself are never touched.
    """

    def __init__(
        self,
        env: MutableMapping[str, str],
        store: KeyStore,
        hide: Callable[[Iterable[str]], None] = lambda keys: None,
    ) -> None:
        self._env = env
        self._store = store
        self._hide = hide  # the logs' redaction learns each key read after start
        try:
            stored = store.load()
        except KeyStoreError:
            stored = {}
        self._own = {n for n in KEY_VARIABLES if env.get(n) and env.get(n) != stored.get(n)}

    def refresh(self) -> bool:
        """Bring the mapping in step with the store; True when a key variable changed."""
        before = {name: self._env.get(name) for name in KEY_VARIABLES}
        try:
            stored = self._store.load()
        except KeyStoreError as exc:
            sys.stderr.write(f"term2: stored keys not used: {exc}\n")
            stored = {}
        self._hide(stored.values())
        for name in KEY_VARIABLES - self._own:
            if stored.get(name):
                self._env[name] = stored[name]
            else:
                self._env.pop(name, None)
        return any(self._env.get(name) != value for name, value in before.items())

    def forget(self) -> list[str]:
        """Remove every stored key (ACP `logout`); the environment's own keys stay, as they were given."""
        gone = self._store.remove(KEY_VARIABLES)
        self.refresh()  # the caller learns of the change through KeyAuthentication
        return gone


class KeyAuthentication:
    """ACP v1's `authenticate` and `logout` for a process serving `settings`' model (ADR 0047)."""

    def __init__(
        self, ring: KeyRing, settings: Settings, env: Mapping[str, str], changed: Callable[[], None] = lambda: None
    ) -> None:
        self._ring = ring
        self._settings = settings
        self._env = env
        # Called when a key changed: whatever was resolved with the old keys (a provider built ahead by the
        # warm start, ADR 0048, or by an earlier turn) is resolved again at its next use.
        self._changed = changed

    def missing(self) -> str | None:
        if self._ring.refresh():  # a key `term2 login` stored since start counts
            self._changed()
        if not self._settings.model and with_default_model(self._settings, self._env).model:
            # the default model is chosen once, at start, from the keys present then (ADR 0045)
            return "a key is stored now, but this term2 started without any: restart the agent to use it"
        try:
            check_credentials(self._settings, self._env)
        except CredentialsMissing as exc:
            return str(exc)
        return None

    def logout(self) -> None:
        self._ring.forget()
        self._changed()
