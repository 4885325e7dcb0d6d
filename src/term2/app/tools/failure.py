"""The one exception every tool raises for a job it could not do.

In a module of its own, with no imports, so the file helpers that project
instructions also use (`anchored`) do not pull in the tool machinery.
"""

from __future__ import annotations


class ToolFailed(Exception):
    """The tool ran but could not do its job; the message is meant for the model."""
