"""One long-lived thread that starts every bwrap process.

Why: ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the
*thread* that forked bwrap exits, not the process. A command started from a
short-lived worker thread (anyio's to_thread pool retires idle threads) is
SIGKILLed mid-run; the sandbox notes measured rc -9. This daemon thread lives
as long as the interpreter, so bwrap dies exactly when term2 dies.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import anyio

_Job = tuple[Callable[[], "subprocess.Popen[bytes]"], "Future[subprocess.Popen[bytes]]"]


class _SpawnerThread:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, start: Callable[[], subprocess.Popen[bytes]]) -> Future[subprocess.Popen[bytes]]:
        future: Future[subprocess.Popen[bytes]] = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="term2-sandbox-spawner", daemon=True)
                self._thread.start()
        self._jobs.put((start, future))
        return future

    def _serve(self) -> None:
        while True:
            start, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(start())
            except BaseException as exc:
                future.set_exception(exc)


_SPAWNER = _SpawnerThread()


async def spawn(argv: list[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` from the spawner thread and return the Popen.

    Shielded: once submitted, the process will exist, and the caller must get
    it back to kill it even if it was cancelled meanwhile (fork+exec takes ms).
    """
    future = _SPAWNER.submit(lambda: subprocess.Popen(argv, **popen_kwargs))
    with anyio.CancelScope(shield=True):
        proc = await anyio.to_thread.run_sync(future.result)
    return proc
