"""Toolboxes as the composition root builds them, for tests that call the built-in tools directly."""

from __future__ import annotations

from term2.adapters.workspace import RipgrepWorkspaceSearch
from term2.app.edit_tools import EDIT_TOOL_SETS
from term2.app.tools.toolbox import WorkspaceToolbox, default_tools


def workspace_toolbox(edit: tuple[str, ...] = EDIT_TOOL_SETS["edit_file"]) -> WorkspaceToolbox:
    """Every built-in tool, list_dir, glob and grep on the real workspace search (rg in its view)."""
    return WorkspaceToolbox(default_tools(edit, RipgrepWorkspaceSearch()))
