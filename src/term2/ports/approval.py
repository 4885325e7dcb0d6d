"""Approval port: ask the user whether a tool call may proceed.

Every implementation fails closed: anything but an explicit allow from the
offered options comes back as a denial.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from term2.domain.approval import Choice, PermissionOption, is_allow
from term2.domain.history import ToolCall


@dataclass(frozen=True, slots=True)
class CommandSubject:
    command: str
    cwd: str


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    session_id: str
    tool_call: ToolCall
    title: str
    description: str | None
    options: tuple[PermissionOption, ...]
    command: CommandSubject | None = None


DenialReason = Literal[
    "rejected", "cancelled", "unknown_option", "malformed", "disconnected", "stale", "no_interaction", "read_only"
]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    choice: Choice | None  # the allow choice, or None when denied
    denial: DenialReason | None = None

    @property
    def allowed(self) -> bool:
        return is_allow(self.choice)


class Approver(Protocol):
    async def request(self, request: ApprovalRequest) -> ApprovalDecision: ...
