"""Start-up in two steps: sessions are served while what a turn needs still loads.

`_Startup` is driven with a stand-in application whose turn half is held
back by a gate the test opens, so the order is observed, not timed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from term2.adapters.acp.errors import INTERNAL_ERROR, RpcError
from term2.adapters.acp.negotiation import ClientCaps
from term2.adapters.acp.server import AcpServer, AgentInfo
from term2.app.config import Settings
from term2.app.entrypoints import serve
from term2.domain.turn import StopReason


@dataclass(frozen=True)
class _Session:
    session_id: str


@dataclass(frozen=True)
class _Opened:
    session: _Session


class _Sessions:
    def __init__(self) -> None:
        self.created: list[str] = []

    async def new(self, cwd: str, directories: Any = ()) -> _Opened:
        self.created.append(cwd)
        return _Opened(_Session(f"s{len(self.created)}"))

    async def connect_servers(self, *_: Any) -> None:
        pass


@dataclass
class _Outcome:
    stop_reason: StopReason
    spent: None = None
    error: str | None = None


class _Prompts:
    """Records what the session methods ask of the prompt use case, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def check_credentials(self, session_id: str) -> None:
        """A key is present here: v1's `auth_required` check passes (tests/e2e/test_first_run_e2e.py)."""

    def admit(self, session_id: str, prompt: object = ()) -> str:
        self.calls.append(("admit", session_id))
        return session_id

    def cancel(self, session_id: str) -> None:
        self.calls.append(("cancel", session_id))

    async def run(self, opened: str, *_: Any, **__: Any) -> _Outcome:
        cancelled = ("cancel", opened) in self.calls
        return _Outcome(StopReason.CANCELLED if cancelled else StopReason.END_TURN)


class _Connection:
    """Where the session methods would send a notification: nowhere here."""

    async def notify(self, method: str, params: Any) -> None:
        pass


class _App:
    """Sessions at once; `prompts()` (called in a worker thread) waits for `gate`, or fails."""

    def __init__(self, fail: bool = False) -> None:
        self.sessions = _Sessions()
        self.config = None  # no pickers or commands: these tests are about the stages
        self.auth = None  # nor authentication (ADR 0047)
        self.turn_part = _Prompts()
        self.gate = threading.Event()
        self.fail = fail
        self.asked = threading.Event()
        self.preloaded = False
        self.kept = False
        self.warmed_after_turn = threading.Event()

    def prompts(self) -> _Prompts:
        self.asked.set()
        self.gate.wait(10)
        if self.fail:
            raise RuntimeError("the tools could not load")
        return self.turn_part

    async def preload(self) -> None:
        self.preloaded = True

    def warm_after_turn(self) -> None:  # in a worker thread, once the first turn is over (ADR 0053)
        self.warmed_after_turn.set()

    def native_wire(self) -> bool:
        return True

    async def keep_connected(self) -> None:
        self.kept = True

    async def background(self, *, task_status: Any) -> None:
        task_status.started()

    async def shutdown(self) -> None:
        pass


def _startup(app: _App, tg: Any, monkeypatch: pytest.MonkeyPatch) -> serve._Startup:
    startup = serve._Startup(Settings(model="openai/x"), {}, tg)
    monkeypatch.setattr(startup, "_build_sessions", lambda: app)
    return startup


@pytest.mark.anyio
async def test_sessions_are_served_before_the_turn_part_has_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _App()
    async with anyio.create_task_group() as tg:
        startup = _startup(app, tg, monkeypatch)
        tg.start_soon(startup.build)
        with anyio.fail_after(10):
            while not app.asked.is_set():  # the turn part loads at once, without waiting for a session (ADR 0048)
                await anyio.sleep(0.01)
        with anyio.fail_after(10):
            methods = await startup.methods(_Connection(), 1, ClientCaps())  # type: ignore[arg-type]
        with anyio.fail_after(10):
            reply = await methods.new({"cwd": "/w", "mcpServers": []})  # and a session does not wait for it
        assert reply == {"sessionId": "s1"} and app.sessions.created == ["/w"]
        assert not app.preloaded and not app.kept  # preparing the adapter and its connection wait for it

        with anyio.fail_after(10):
            await methods.cancel({"sessionId": "s9"})  # no turn can run yet: returns at once, loads nothing
        assert app.turn_part.calls == []

        answer: list[Any] = []

        async def prompt() -> None:
            answer.append(await methods.prompt({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}))

        tg.start_soon(prompt)
        with anyio.fail_after(10):
            while "s1" not in methods._waiting:  # the prompt now waits for the turn part
                await anyio.sleep(0.01)
        with anyio.fail_after(10):
            await methods.cancel({"sessionId": "s1"})  # does not wait for it either
        assert app.turn_part.calls == []
        app.gate.set()
        with anyio.fail_after(10):
            while not answer:
                await anyio.sleep(0.01)
        assert app.turn_part.calls == [("admit", "s1"), ("cancel", "s1")]  # it started cancelled
        assert answer == [{"stopReason": "cancelled"}]
        with anyio.fail_after(10):
            while not app.kept:  # preloading waited for the turn part too, then the connection was opened ahead
                await anyio.sleep(0.01)
        assert app.preloaded
        # the turn is over: what it did not wait for is made now (ADR 0053)
        assert await anyio.to_thread.run_sync(app.warmed_after_turn.wait, 10)


@pytest.mark.anyio
async def test_a_session_asked_for_with_initialize_is_answered_before_the_turn_part_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two would share one interpreter: the session the editor waits for goes first (ADR 0048)."""
    monkeypatch.setattr(serve, "FIRST_SESSION_FIRST_S", 600.0)  # the bound is for a request that opens none
    app = _App()
    turn_part_started_before_the_session: list[bool] = []
    new = app.sessions.new

    async def observed_new(cwd: str, directories: Any = ()) -> _Opened:
        # Give a turn part that does not wait every chance to start (it would within this bound; a
        # loaded machine can only make the check pass on the old code, never fail on the new).
        turn_part_started_before_the_session.append(await anyio.to_thread.run_sync(app.asked.wait, 3.0))
        return await new(cwd)

    monkeypatch.setattr(app.sessions, "new", observed_new)
    async with anyio.create_task_group() as tg:
        startup = _startup(app, tg, monkeypatch)
        tg.start_soon(startup.build)
        with anyio.fail_after(10):
            methods = await startup.methods(_Connection(), 1, ClientCaps())  # type: ignore[arg-type]
            await methods.new({"cwd": "/w", "mcpServers": []})
        assert turn_part_started_before_the_session == [False]
        with anyio.fail_after(10):
            while not app.asked.is_set():  # and once it is answered, the turn part loads
                await anyio.sleep(0.01)
        app.gate.set()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_requests_that_wait_for_the_turn_part_together_share_one_sink_and_approver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = _App()
    got: list[Any] = []
    async with anyio.create_task_group() as tg:
        startup = _startup(app, tg, monkeypatch)
        tg.start_soon(startup.build)
        with anyio.fail_after(10):
            methods = await startup.methods(_Connection(), 1, ClientCaps())  # type: ignore[arg-type]

            async def ask() -> None:
                got.append(await methods._turns())

            async with anyio.create_task_group() as asking:
                for _ in range(3):
                    asking.start_soon(ask)
                await anyio.sleep(0.05)
                app.gate.set()
    assert len(got) == 3 and got[0] is got[1] is got[2]


@pytest.mark.anyio
async def test_a_turn_part_that_fails_to_load_leaves_sessions_working(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _App(fail=True)
    app.gate.set()
    async with anyio.create_task_group() as tg:
        startup = _startup(app, tg, monkeypatch)
        tg.start_soon(startup.build)
        with anyio.fail_after(10):
            methods = await startup.methods(_Connection(), 2, ClientCaps())  # type: ignore[arg-type]
            assert await methods.new({"cwd": "/w"}) == {"sessionId": "s1"}
            with pytest.raises(RpcError) as refused:
                await methods.prompt({"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]})
        assert refused.value.code == INTERNAL_ERROR
        assert "term2 failed to start: the tools could not load" in refused.value.message
        assert not app.preloaded


@pytest.mark.anyio
async def test_a_session_half_that_fails_to_load_is_reported_to_every_request(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> _App:
        raise OSError("the data folder is read-only")

    async with anyio.create_task_group() as tg:
        startup = serve._Startup(Settings(model="openai/x"), {}, tg)
        monkeypatch.setattr(startup, "_build_sessions", broken)
        with anyio.fail_after(10):
            await startup.build()  # ends: nothing waits for a turn part that cannot come
            for _ in range(2):
                with pytest.raises(RpcError) as refused:
                    await startup.methods(_Connection(), 1, ClientCaps())  # type: ignore[arg-type]
                assert refused.value.code == INTERNAL_ERROR
                assert refused.value.message == "term2 failed to start: the data folder is read-only"


@pytest.mark.anyio
async def test_the_server_makes_one_set_of_session_methods_however_many_requests_wait() -> None:
    made: list[int] = []
    release = anyio.Event()

    async def factory(connection: Any, version: int, client: Any) -> Any:
        made.append(version)
        await release.wait()
        return object()

    server = AcpServer(AgentInfo("t", "t", "0"), True, factory)
    server.attach(object())  # type: ignore[arg-type]
    server.initialized(1)
    got: list[Any] = []
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(lambda: _append(got, server._session_methods()))
        await anyio.sleep(0.05)
        release.set()
    assert made == [1] and len(got) == 3 and got[0] is got[1] is got[2]


async def _append(into: list[Any], awaitable: Any) -> None:
    into.append(await awaitable)
