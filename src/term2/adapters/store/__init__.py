"""Session store adapters: SQLite for real use, in-memory as the alternate.

Both implement :class:`term2.ports.session_store.SessionStore` with the same
semantics, which the contract suite in ``tests/contract`` checks.
"""

from term2.adapters.store.memory_store import InMemorySessionStore
from term2.adapters.store.sqlite_store import SqliteSessionStore

__all__ = ["InMemorySessionStore", "SqliteSessionStore"]
