"""Session store adapters: SQLite for real use, in-memory as the alternate.

Both implement :class:`term2.ports.session_store.SessionStore` with the same
semantics, which the contract suite in ``tests/contract`` checks. The names
are loaded on first use (PEP 562): `term2 acp` never needs the in-memory one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from term2.adapters.store.memory_store import InMemorySessionStore
    from term2.adapters.store.sqlite_store import SqliteSessionStore

__all__ = ["InMemorySessionStore", "SqliteSessionStore"]

_HOMES = {"InMemorySessionStore": "memory_store", "SqliteSessionStore": "sqlite_store"}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
