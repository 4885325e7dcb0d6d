"""The sandbox made by the first command, once, whoever asks (ADR 0053); a failure fails that command only."""

from __future__ import annotations

import anyio
import pytest

from term2.app.tools.deferred_sandbox import DeferredSandbox
from term2.ports.sandbox import CommandRequest, Sandbox, SandboxUnavailable
from tests.fakes.sandboxes import CannedSandbox

pytestmark = pytest.mark.anyio

REQUEST = CommandRequest("true", "/work/ws", "/work/ws")


class Maker:
    def __init__(self, fail_first: bool = False) -> None:
        self.made = 0
        self.fail_first = fail_first
        self.sandbox = CannedSandbox()

    def __call__(self) -> Sandbox:
        self.made += 1
        if self.fail_first and self.made == 1:
            raise SandboxUnavailable("bwrap is not installed")
        return self.sandbox


async def test_nothing_is_made_until_a_command_asks_and_then_once_for_all() -> None:
    maker = Maker()
    deferred = DeferredSandbox(maker)
    assert maker.made == 0
    results = []

    async def one() -> None:
        results.append(await deferred.run(REQUEST))

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one)
    assert maker.made == 1 and len(results) == 5 and len(maker.sandbox.commands) == 5
    assert (await deferred.status()).available and maker.made == 1
    assert deferred.made() is maker.sandbox and maker.made == 1


async def test_a_sandbox_that_cannot_be_made_fails_the_command_and_is_tried_again() -> None:
    maker = Maker(fail_first=True)
    deferred = DeferredSandbox(maker)
    with pytest.raises(SandboxUnavailable):
        await deferred.run(REQUEST)
    assert maker.sandbox.commands == []  # nothing ran
    await deferred.run(REQUEST)
    assert maker.made == 2 and maker.sandbox.commands == [REQUEST]
