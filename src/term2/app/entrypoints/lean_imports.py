"""Importing libraries without the optional parts `term2 acp` never uses.

dependency-injector imports pydantic-settings (installed for litellm) and
PyYAML at import time, for `providers.Configuration` loaders term2 does not
use, and web frameworks for wiring it does not use either; httpx imports its
command-line client (click, rich, pygments) only to offer `httpx.main`;
httpcore imports h2 for HTTP/2, which term2's clients do not enable.
Together that is ~0.4 s and ~10 MB before a first reply. Each
library falls back cleanly when the optional module is missing, so the
module is hidden while its importer loads. Only the composition root does
this, once, before anything else imports the same libraries.
"""

from __future__ import annotations

import importlib
import sys

# dependency-injector's wiring (imported by its containers) also probes web frameworks for
# `wire()`, which term2 never calls: starlette alone is ~40 ms of the first `session/new` (ADR 0048).
_WIRING = ("fastapi", "fast_depends", "starlette", "werkzeug")
OPTIONAL = {
    "dependency_injector.containers": ("pydantic_settings", "yaml", *_WIRING),
    "dependency_injector.providers": ("pydantic_settings", "yaml", *_WIRING),
    "httpx": ("click", "rich", "pygments"),
    "httpcore": ("h2",),
}


def import_lean(module: str) -> None:
    """Import ``module`` with its optional dependencies (``OPTIONAL``) hidden; a no-op once imported."""
    if module in sys.modules:
        return
    hidden = [name for name in OPTIONAL.get(module, ()) if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        importlib.import_module(module)
    finally:
        for name in hidden:
            del sys.modules[name]
