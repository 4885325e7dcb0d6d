"""The approval port over ACP: `session/request_permission`, failing closed.

Only an answer that selects one of the options we offered counts as an allow.
Everything else (a cancelled or malformed outcome, an unknown option, an error
answer, a disconnect) is a denial. Stale and vanished interactions are denied
by the tool gate around every approver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from term2.adapters.acp import wire_v1, wire_v2
from term2.adapters.acp.connection import JsonRpcConnection
from term2.adapters.acp.errors import ConnectionClosed, RpcError
from term2.adapters.acp.updates import AcpUpdateSink
from term2.adapters.acp.wire_common import TOOL_KINDS, locations, parent_meta
from term2.domain.approval import Choice, OptionKind
from term2.ports.approval import ApprovalDecision, ApprovalRequest, DenialReason
from term2.ports.updates import StateChanged
from term2.support.deferred_log import get_logger

if TYPE_CHECKING:
    from term2.adapters.acp.wire_types import v1, v2

log = get_logger("term2.approval")

OPTION_KINDS: dict[OptionKind, v1.PermissionOptionKind] = {
    OptionKind.ALLOW_ONCE: "allow_once",
    OptionKind.ALLOW_ALWAYS: "allow_always",
    OptionKind.REJECT_ONCE: "reject_once",
}


def _deny(reason: DenialReason) -> ApprovalDecision:
    return ApprovalDecision(None, reason)


def _options(request: ApprovalRequest) -> list[v1.PermissionOption]:
    """v1's options, which mypy also checks where v2 params use them."""
    return [{"optionId": o.choice.value, "name": o.name, "kind": OPTION_KINDS[o.kind]} for o in request.options]


def _v1_tool_call(request: ApprovalRequest) -> v1.ToolCallUpdate:
    call = request.tool_call
    update: v1.ToolCallUpdate = {
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": TOOL_KINDS[call.kind],
        "status": "pending",
        "rawInput": call.raw_input,
        "locations": locations(call.locations),
    }
    if call.content:  # the proposed change (a diff), so the editor can show what it is asked to allow
        update["content"] = [wire_v1.tool_content(c) for c in call.content]
    meta = parent_meta(call)
    if meta is not None:
        update["_meta"] = meta
    return update


def _v2_tool_call(request: ApprovalRequest) -> v2.ToolCallUpdate:
    call = request.tool_call
    update: v2.ToolCallUpdate = {
        "toolCallId": call.tool_call_id,
        "title": call.title,
        "kind": TOOL_KINDS[call.kind],
        "status": "pending",
        "rawInput": call.raw_input,
        "locations": locations(call.locations),
    }
    if call.content:
        update["content"] = [wire_v2.tool_content(c) for c in call.content]
    meta = parent_meta(call)
    if meta is not None:
        update["_meta"] = meta
    return update


def v1_params(request: ApprovalRequest) -> v1.RequestPermissionRequest:
    return {"sessionId": request.session_id, "toolCall": _v1_tool_call(request), "options": _options(request)}


def v2_params(request: ApprovalRequest) -> v2.RequestPermissionRequest:
    subject: v2.RequestPermissionSubject
    if request.command is not None:
        subject = {
            "type": "command",
            "command": request.command.command,
            "cwd": request.command.cwd,
            "toolCallId": request.tool_call.tool_call_id,
        }
    else:
        subject = {"type": "tool_call", "toolCall": _v2_tool_call(request)}
    params: v2.RequestPermissionRequest = {
        "sessionId": request.session_id,
        "title": request.title,
        "subject": subject,
        "options": _options(request),
    }
    if request.description:
        params["description"] = request.description
    return params


def decide(request: ApprovalRequest, result: object) -> ApprovalDecision:
    """Interpret a client's answer; anything short of a valid selection denies."""
    if not isinstance(result, dict):
        return _deny("malformed")
    outcome = result.get("outcome")
    if not isinstance(outcome, dict):
        return _deny("malformed")
    kind = outcome.get("outcome")
    if kind == "cancelled":
        return _deny("cancelled")
    if kind != "selected":
        return _deny("malformed")
    option_id = outcome.get("optionId")
    offered = {o.choice.value: o.choice for o in request.options}
    if not isinstance(option_id, str) or option_id not in offered:
        return _deny("unknown_option")
    choice = offered[option_id]
    if choice is Choice.REJECT:
        return _deny("rejected")
    return ApprovalDecision(choice)


class AcpApprover:
    """Maps an approval request to `session/request_permission` and the answer back.

    Whether the prompt is still live (no interaction, stale answers) is the
    tool gate's rule, applied around every approver (`app/tools/gate.py`);
    this bridge only speaks the protocol and fails closed on what it hears.
    """

    def __init__(self, connection: JsonRpcConnection, version: int, sink: AcpUpdateSink) -> None:
        self._connection = connection
        self._version = version
        self._sink = sink

    async def request(self, request: ApprovalRequest) -> ApprovalDecision:
        if not request.options:
            return _deny("no_interaction")
        params = v2_params(request) if self._version == 2 else v1_params(request)
        if self._version == 2:
            await self._sink.send(request.session_id, StateChanged("requires_action"))
        try:
            result = await self._connection.request("session/request_permission", params)
        except ConnectionClosed:
            return _deny("disconnected")
        except RpcError as err:
            log.info("permission request answered with an error", code=err.code, message=err.message)
            return _deny("malformed")
        if self._version == 2:
            await self._sink.send(request.session_id, StateChanged("running"))
        return decide(request, result)
