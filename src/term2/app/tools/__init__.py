"""The built-in tools the model may call, and the toolbox that runs them.

Tools are use-case logic over the ports: the toolbox applies the workspace
rule, asks the approver, reports progress and records history; each tool only
validates its arguments and does its one job. File I/O is done here directly
on the session's workspace, since the local filesystem is never swapped out;
shell commands only ever run through the Sandbox port.
"""

from term2.app.tools.toolbox import WorkspaceToolbox, default_tools

__all__ = ["WorkspaceToolbox", "default_tools"]
