"""The one foreground turn of an open session, from admission to settling.

A session runs at most one prompt at a time. Admission, cancellation and
settling used to be loose fields mutated from several modules; they live here
so that the rules hold in one place:

* admitting a turn while one runs is refused (``Busy``);
* everything the turn does runs in its cancel scope, so a cancel or a close
  ends it at once;
* every change that may make a pending question moot (a new turn, a cancel,
  a close, the settle itself) moves the *revision* on. An approval asked
  during revision N and answered after the revision moved is stale, and the
  tool gate denies it (``app/tools/gate.py``), whatever the approver said.
"""

from __future__ import annotations

import anyio

from term2.domain.errors import Busy


class Turn:
    """Implements the ``LiveInteraction`` port for the tool gate.

    Admission does not need the event loop (the cancel scope is made when the
    turn first enters it), so a turn can be admitted by synchronous code too.
    """

    def __init__(self) -> None:
        self._busy = False
        self._scope: anyio.CancelScope | None = None
        self._cancelled = False
        self._waiters: list[anyio.Event] = []  # made by wait_settled, inside the event loop
        self._revision = 0

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def settled(self) -> bool:
        return not self._busy

    @property
    def scope(self) -> anyio.CancelScope:
        """The running turn's cancel scope, already cancelled if a cancel came first (a fresh one when idle)."""
        if not self._busy:
            return anyio.CancelScope()
        if self._scope is None:
            self._scope = anyio.CancelScope()
            if self._cancelled:
                self._scope.cancel()
        return self._scope

    def admit(self, session_id: str) -> None:
        """Claim the session's one foreground slot, before any preparation starts."""
        if self._busy:
            raise Busy(f"session {session_id} already has a prompt in progress")
        self._busy = True
        self._scope = None
        self._cancelled = False
        self._revision += 1

    def cancel(self) -> None:
        """Cancel the running turn, if any; pending questions become stale."""
        if self._busy:
            self._revision += 1
            self._cancelled = True
            if self._scope is not None:
                self._scope.cancel()

    def invalidate(self) -> None:
        """Make pending questions stale without ending the turn (the session is being closed or re-attached)."""
        self._revision += 1

    def settle(self) -> None:
        """The turn has ended (or never started): release the slot and wake whoever waits for it."""
        self._revision += 1
        self._busy = False
        self._scope = None
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.set()

    async def wait_settled(self, timeout: float) -> bool:
        """True when the turn settled within ``timeout`` seconds."""
        if not self._busy:
            return True
        waiter = anyio.Event()
        self._waiters.append(waiter)
        with anyio.move_on_after(timeout):
            await waiter.wait()
            return True
        self._waiters.remove(waiter)
        return False

    # -- LiveInteraction -------------------------------------------------------------

    def current(self) -> int | None:
        """The revision of the live interaction, or None when no turn runs."""
        return self._revision if self._busy else None

    def is_current(self, revision: int) -> bool:
        return self._busy and self._revision == revision
