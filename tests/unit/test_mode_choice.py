"""Choosing a session's approval mode (ADR 0044): live at once, stored, refused when unknown, undone
when it cannot be saved."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from term2.adapters.store.memory_store import InMemorySessionStore
from term2.app.config import Settings
from term2.app.session_config import MODE, SessionConfig
from term2.app.session_models import SessionModels
from term2.app.sessions import SessionRegistry
from term2.domain.approval import ApprovalMode
from term2.domain.errors import InvalidInput
from term2.domain.session import Session

pytestmark = pytest.mark.anyio


class NoModels:
    def choice(self, _session: Session) -> None:
        return None


class FailingStore(InMemorySessionStore):
    async def save(self, session: Session) -> None:
        raise OSError("disk full")


async def _config(store: InMemorySessionStore) -> tuple[SessionConfig, SessionRegistry]:
    now = datetime.now(UTC)
    session = Session("s1", "/w", now, now)
    await InMemorySessionStore.create(store, session)
    registry = SessionRegistry()
    registry.attach(session)
    models = cast(SessionModels, NoModels())  # the mode needs no model
    return SessionConfig(store, registry, models, Settings(), cast(Any, {})), registry


async def test_a_chosen_mode_is_live_and_stored() -> None:
    store = InMemorySessionStore()
    config, registry = await _config(store)
    opened = registry.get("s1")
    assert opened is not None and opened.access.mode is ApprovalMode.ASK
    await config.choose("s1", MODE, "auto")
    assert opened.access.mode is ApprovalMode.AUTO and opened.session.mode is ApprovalMode.AUTO
    stored = await store.get("s1")
    assert stored is not None and stored.mode is ApprovalMode.AUTO


async def test_an_unknown_mode_is_refused_and_changes_nothing() -> None:
    config, registry = await _config(InMemorySessionStore())
    with pytest.raises(InvalidInput, match="unknown mode"):
        await config.choose("s1", MODE, "full-access")
    opened = registry.get("s1")
    assert opened is not None and opened.access.mode is ApprovalMode.ASK


async def test_a_mode_that_cannot_be_saved_is_undone() -> None:
    config, registry = await _config(FailingStore())
    with pytest.raises(OSError, match="disk full"):
        await config.choose("s1", MODE, "read-only")
    opened = registry.get("s1")
    assert opened is not None and opened.access.mode is ApprovalMode.ASK and opened.session.mode is ApprovalMode.ASK
