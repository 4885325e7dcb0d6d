"""The workspace search port's real adapter: ripgrep in a bubblewrap view of the workspace (ADR 0026, 0032)."""

from term2.adapters.workspace.ripgrep_search import RipgrepWorkspaceSearch

__all__ = ["RipgrepWorkspaceSearch"]
