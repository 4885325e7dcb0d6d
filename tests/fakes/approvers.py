"""Approver port doubles: answer without a client, and remember what was asked.

Tool tests assert on the requests a call made (how many, their titles and
options) as much as on what the answer did, so every double records them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from term2.domain.approval import Choice
from term2.ports.approval import ApprovalDecision, ApprovalRequest

ALLOWED_ONCE = ApprovalDecision(Choice.ALLOW_ONCE)
REJECTED = ApprovalDecision(None, "rejected")


@dataclass
class FixedApprover:
    """Gives every request the same `answer` (raises it if it is an exception).

    `hang` never answers, for a cancellation while a request is pending.
    """

    answer: ApprovalDecision | Exception = ALLOWED_ONCE
    hang: bool = False
    requests: list[ApprovalRequest] = field(default_factory=list)

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        if self.hang:
            await anyio.sleep_forever()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@dataclass
class ScriptedApprover:
    """Answers each request with what `script` makes of it."""

    script: Callable[[ApprovalRequest], ApprovalDecision]
    requests: list[ApprovalRequest] = field(default_factory=list)

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        self.requests.append(request)
        return self.script(request)
