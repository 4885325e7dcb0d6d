"""The Turn object: one foreground turn per session, and the revision that makes questions stale."""

from __future__ import annotations

import anyio
import pytest

from term2.app.turn import Turn
from term2.domain.errors import Busy

pytestmark = pytest.mark.anyio


async def test_one_turn_at_a_time() -> None:
    turn = Turn()
    assert not turn.busy and turn.settled and turn.current() is None
    turn.admit("s1")
    assert turn.busy and not turn.settled
    with pytest.raises(Busy, match="s1"):
        turn.admit("s1")
    turn.settle()
    assert not turn.busy and turn.settled
    turn.admit("s1")  # the slot is free again


async def test_every_change_that_makes_a_question_moot_moves_the_revision() -> None:
    turn = Turn()
    turn.admit("s1")
    asked = turn.current()
    assert asked is not None and turn.is_current(asked)
    turn.invalidate()  # the session is being closed
    assert not turn.is_current(asked)
    asked = turn.current()
    assert asked is not None
    turn.cancel()
    assert not turn.is_current(asked)
    turn.settle()
    assert turn.current() is None and not turn.is_current(asked)


async def test_cancel_ends_what_runs_in_the_scope_and_waiters_see_the_settle() -> None:
    turn = Turn()
    turn.admit("s1")
    reached_end = False

    async def body() -> None:
        nonlocal reached_end
        with turn.scope:
            await anyio.sleep_forever()
        reached_end = True
        turn.settle()

    async with anyio.create_task_group() as tg:
        tg.start_soon(body)
        await anyio.sleep(0.01)
        assert not await turn.wait_settled(0.01)
        turn.cancel()
        assert await turn.wait_settled(60)  # a guard: the settle follows the cancel at once
    assert reached_end and not turn.busy


async def test_cancel_without_a_turn_is_harmless() -> None:
    turn = Turn()
    turn.cancel()
    assert turn.current() is None and turn.settled


async def test_a_cancel_before_the_turn_enters_its_scope_still_cancels_it() -> None:
    turn = Turn()
    turn.admit("s1")
    turn.cancel()  # e.g. session/cancel right behind session/prompt, before the turn started
    with turn.scope:
        await anyio.sleep_forever()
    assert turn.scope.cancel_called


def test_admission_needs_no_event_loop() -> None:
    turn = Turn()
    turn.admit("s1")
    assert turn.busy and turn.current() is not None
