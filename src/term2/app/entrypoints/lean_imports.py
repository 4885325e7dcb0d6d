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
import types

# dependency-injector's wiring (imported by its containers) also probes web frameworks for
# `wire()`, which term2 never calls: starlette alone is ~40 ms of the first `session/new` (ADR 0048).
_WIRING = ("fastapi", "fast_depends", "starlette", "werkzeug")
OPTIONAL = {
    "dependency_injector.containers": ("pydantic_settings", "yaml", *_WIRING),
    "dependency_injector.providers": ("pydantic_settings", "yaml", *_WIRING),
    "httpx": ("click", "rich", "pygments"),
    "httpcore": ("h2",),
}

# Without pydantic-settings, dependency-injector imports pydantic only to read `pydantic.VERSION` (pydantic 1
# would have its settings loader); pydantic's own modules are ~15 ms of the first `session/new`, which needs
# only pydantic-core (ADR 0052). It is shown a stand-in saying what the lock file installs, pydantic 2, and
# takes the branch it would take with the real one; pydantic itself loads with the turn part.
_STAND_INS = {
    "dependency_injector.containers": {"pydantic": {"VERSION": "2"}},
    "dependency_injector.providers": {"pydantic": {"VERSION": "2"}},
}


def import_lean(module: str) -> None:
    """Import ``module`` with its optional dependencies (``OPTIONAL``) hidden; a no-op once imported."""
    if module in sys.modules:
        return
    hidden = [name for name in OPTIONAL.get(module, ()) if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    stand_ins: dict[str, types.ModuleType] = {}
    for name, attributes in _STAND_INS.get(module, {}).items():
        if name not in sys.modules:
            stand_ins[name] = stand_in = types.ModuleType(name, "term2's stand-in while a library loads")
            vars(stand_in).update(attributes)
            sys.modules[name] = stand_in
    try:
        importlib.import_module(module)
    finally:
        for name in hidden:
            del sys.modules[name]
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
