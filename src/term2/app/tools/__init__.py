"""The built-in tools the model may call, and the toolbox that runs them.

Tools are use-case logic over the ports: the toolbox applies the workspace
rule, asks the approver, reports progress and records history; each tool only
validates its arguments and does its one job. File I/O is done here directly
on the session's workspace, since the local filesystem is never swapped out;
shell commands only ever run through the Sandbox port.

The names are loaded on first use (PEP 562): importing one of the helper
modules (as project instructions do) must not load every tool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from term2.app.tools.toolbox import WorkspaceToolbox, default_tools

__all__ = ["WorkspaceToolbox", "default_tools"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.toolbox"), name)
