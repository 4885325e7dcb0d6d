"""Loading, taming and shutting down the litellm library.

litellm costs ~2.7 s and ~3k modules to import, fetches a cost map over the
network unless told otherwise, and prints banners and DEBUG logs to stdout,
which on an ACP server is the JSON-RPC channel. So it is imported lazily, once,
with offline env vars set first and its loggers pinned to WARNING on stderr.
`preload()` lets the server pay the import in a worker thread, off the
`initialize` path.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from typing import Any

import anyio.to_thread

_OFFLINE_ENV = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_DISABLE_BUG_REPORT_LINK": "true",
}
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
_LOAD_LOCK = threading.Lock()
_litellm: Any = None


def _quiet_loggers(handler: logging.Handler | None) -> None:
    """Pin litellm's loggers at WARNING, unpropagated, optionally with only `handler`.

    Done before the import too: `import litellm` already logs DEBUG lines (client
    creation) through a handler that writes below-WARNING records to stdout, and
    those loggers inherit the root level, which a host app may have set to DEBUG.
    """
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        if handler is not None:
            logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def load_litellm() -> Any:
    """Import and configure litellm exactly once (thread-safe); returns the module, untyped."""
    global _litellm
    if _litellm is None:
        with _LOAD_LOCK:  # preload() in a thread may race a first stream()
            if _litellm is None:
                _litellm = _import_and_configure()
    return _litellm


def _import_and_configure() -> Any:
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    _quiet_loggers(None)
    # The import creates ~370k long-lived objects; collecting while they are built
    # only rescans them. Freezing them afterwards also keeps later collections short.
    collecting = gc.isenabled()
    gc.disable()
    try:
        import litellm
    finally:
        if collecting:
            gc.enable()
        gc.freeze()

    # The "Give Feedback / Provider List" banners are print()s to stdout.
    litellm.suppress_debug_info = True
    litellm.disable_hf_tokenizer_download = True
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    _quiet_loggers(handler)  # replaces litellm's stdout-routing handler
    return litellm


def is_loaded() -> bool:
    """True once `load_litellm` has run; shutdown must not import litellm just to close it."""
    return _litellm is not None


async def preload() -> None:
    """Import litellm in a worker thread so the event loop stays responsive meanwhile."""
    # Abandon the wait on cancel: a turn cancelled during its first model call must settle
    # now, not when the multi-second import ends; the thread finishes the import anyway.
    await anyio.to_thread.run_sync(load_litellm, abandon_on_cancel=True)


async def shutdown_litellm() -> None:
    """Stop litellm's logging worker task and close its cached HTTP clients, if it was loaded."""
    if not is_loaded():
        return
    litellm = load_litellm()
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

    await GLOBAL_LOGGING_WORKER.stop(timeout=1.0)
    await litellm.close_litellm_async_clients()
    # litellm keeps the closed clients cached and would hand them out again
    # ("client has been closed"); forget them so a later call builds fresh ones.
    litellm.in_memory_llm_clients_cache.flush_cache()
