"""What a connection's prompts and replays need beyond sessions: built once per connection, after sessions.

Start-up builds it with the turn part (`term2.app.entrypoints.serve`), so it is imported then, not with the
first session (ADR 0053).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from term2.adapters.acp.approval_bridge import AcpApprover
    from term2.adapters.acp.updates import AcpUpdateSink
    from term2.app.prompting import PromptService
    from term2.ports.client_files import ClientFiles


@dataclass(frozen=True)
class Turns:
    """The prompt use case and the connection's sink, approver and editor files for it."""

    prompts: PromptService
    sink: AcpUpdateSink
    approver: AcpApprover
    files: ClientFiles | None = None  # the editor's reads and writes, where a v1 client offered them
