"""Wait for child processes with pidfds on Python 3.11, as asyncio itself does from 3.12 on.

asyncio 3.11's default `ThreadedChildWatcher` starts a thread for every child
and the event loop blocks until that thread runs: ~1 ms a child on an idle
machine, more under load, and every `grep` starts two (the search and the
secret count) whose own work is often a few milliseconds. A pidfd is just
another descriptor in the loop's selector. Set by the entrypoints once their
loop runs, never at import; where `pidfd_open` is refused (Linux < 5.3, a
seccomp filter) the default stays.
"""

from __future__ import annotations

import asyncio
import os
import sys


def use_pidfds() -> bool:
    """Make the running loop's subprocesses report their exit through pidfds; False if left as it was."""
    if sys.version_info >= (3, 12):
        return False  # asyncio already does, and the watcher API is deprecated there
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    watcher = asyncio.PidfdChildWatcher()
    watcher.attach_loop(asyncio.get_running_loop())
    asyncio.get_event_loop_policy().set_child_watcher(watcher)
    return True
