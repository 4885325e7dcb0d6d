"""Sandbox adapters: bubblewrap for real runs, a scripted fake for callers' tests.

The names are loaded on first use (PEP 562) so that `term2 acp`, which needs
only bubblewrap, does not import the scripted fake at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from term2.adapters.sandbox.bubblewrap import BubblewrapSandbox
    from term2.adapters.sandbox.invocation import Limits
    from term2.adapters.sandbox.scripted import Script, ScriptedSandbox

__all__ = ["BubblewrapSandbox", "Limits", "Script", "ScriptedSandbox"]

_HOMES = {
    "BubblewrapSandbox": "bubblewrap",
    "Limits": "invocation",
    "Script": "scripted",
    "ScriptedSandbox": "scripted",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
