"""Where `term2 login` keeps API keys, so a later process reads them like the environment (ADR 0047)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol


class KeyStoreError(Exception):
    """The stored keys cannot be read or written safely; the message says why and what to fix."""


class KeyStore(Protocol):
    def load(self) -> dict[str, str]:
        """The stored keys by variable name (`OPENAI_API_KEY` → key); empty when none are stored."""
        ...

    def save(self, variable: str, key: str) -> None:
        """Store `key` under `variable`, replacing the one stored before."""
        ...

    def remove(self, variables: Collection[str]) -> list[str]:
        """Forget the keys of `variables`; returns the names that were stored."""
        ...
