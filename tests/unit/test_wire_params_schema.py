"""The requests term2 validates (`adapters/acp/params.py`) agree with the generated wire types.

term2 checks what it receives with its own validators, more lenient than the
schema on purpose (v1's `mcpServers` may be left out, for one). What they must not
do is read a field the schema does not define or require one the schema leaves
optional: that would refuse valid requests. Those two rules are checked here,
against the types generated from each version's schema.
"""

from __future__ import annotations

import typing
from types import ModuleType
from typing import Any

import pytest

from term2.adapters.acp import params as p
from term2.adapters.acp.wire_types import v1, v2

# (request, its name, schema module, definition, fields the request has that this version never reads)
CASES: list[tuple[p.Request[Any], str, ModuleType, str, frozenset[str]]] = [
    (p.NEW_SESSION, "NEW_SESSION", v1, "NewSessionRequest", frozenset()),
    (p.NEW_SESSION, "NEW_SESSION", v2, "NewSessionRequest", frozenset()),
    (p.LIST_SESSIONS, "LIST_SESSIONS", v1, "ListSessionsRequest", frozenset()),
    (p.LIST_SESSIONS, "LIST_SESSIONS", v2, "ListSessionsRequest", frozenset()),
    (p.RESUME_SESSION, "RESUME_SESSION", v1, "ResumeSessionRequest", frozenset({"replayFrom"})),  # no replay in v1
    (p.RESUME_SESSION, "RESUME_SESSION", v1, "LoadSessionRequest", frozenset({"replayFrom"})),
    (p.RESUME_SESSION, "RESUME_SESSION", v2, "ResumeSessionRequest", frozenset()),
    (p.REPLAY_FROM, "REPLAY_FROM", v2, "ReplayFromStartVariant", frozenset()),
    (p.SESSION_REF, "SESSION_REF", v1, "CloseSessionRequest", frozenset()),
    (p.SESSION_REF, "SESSION_REF", v2, "CloseSessionRequest", frozenset()),
    # v1 only (ADR 0043): `type` tells the schema's boolean variant, which term2 refuses by name
    (p.SET_CONFIG_OPTION, "SET_CONFIG_OPTION", v1, "SetSessionConfigOptionRequestBoolean", frozenset()),
    (p.SET_CONFIG_OPTION, "SET_CONFIG_OPTION", v1, "SetSessionConfigOptionRequestValueId", frozenset({"type"})),
    (p.PROMPT, "PROMPT", v1, "PromptRequest", frozenset()),
    (p.PROMPT, "PROMPT", v2, "PromptRequest", frozenset()),
    (p.TEXT_BLOCK, "TEXT_BLOCK", v1, "ContentBlockText", frozenset()),
    (p.TEXT_BLOCK, "TEXT_BLOCK", v2, "ContentBlockText", frozenset()),
    (p.LINK_BLOCK, "LINK_BLOCK", v1, "ContentBlockResourceLink", frozenset()),
    (p.LINK_BLOCK, "LINK_BLOCK", v2, "ContentBlockResourceLink", frozenset()),
    (p.RESOURCE_BLOCK, "RESOURCE_BLOCK", v1, "ContentBlockResource", frozenset()),  # embeddedContext: v1 only
    (p.TEXT_RESOURCE, "TEXT_RESOURCE", v1, "TextResourceContents", frozenset()),
    (p.BLOB_RESOURCE, "BLOB_RESOURCE", v1, "BlobResourceContents", frozenset()),
]


def _schema_keys(typed_dict: type) -> tuple[set[str], set[str]]:
    """(required, all) keys; `__required_keys__` cannot tell under postponed annotations."""
    hints = typing.get_type_hints(typed_dict, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is not typing.NotRequired}
    return required, set(hints)


@pytest.mark.parametrize(
    ("request_", "name", "module", "definition", "unread"),
    CASES,
    ids=[f"{n}-{mod.__name__.rsplit('.', 1)[1]}-{d}" for _, n, mod, d, _ in CASES],
)
def test_request_reads_only_schema_fields_and_requires_no_more(
    request_: p.Request[Any], name: str, module: ModuleType, definition: str, unread: frozenset[str]
) -> None:
    schema_required, schema_fields = _schema_keys(getattr(module, definition))
    fields = request_.required | request_.optional
    assert fields - unread <= schema_fields, f"{name} reads fields {definition} does not define"
    assert request_.required <= schema_required, f"{name} requires fields {definition} leaves optional"


@pytest.mark.parametrize(
    ("request_", "typed"),
    [
        (p.NEW_SESSION, p.NewSession),
        (p.LIST_SESSIONS, p.ListSessions),
        (p.REPLAY_FROM, p.ReplayFrom),
        (p.RESUME_SESSION, p.ResumeSession),
        (p.SESSION_REF, p.SessionRef),
        (p.PROMPT, p.Prompt),
        (p.TEXT_BLOCK, p._Text),
        (p.LINK_BLOCK, p._Link),
        (p.RESOURCE_BLOCK, p._Resource),
        (p.TEXT_RESOURCE, p._TextResource),
        (p.BLOB_RESOURCE, p._BlobResource),
    ],
)
def test_code_reads_only_keys_its_validator_checked(request_: p.Request[Any], typed: type) -> None:
    """The TypedDict the methods read and the validator beside it name the same fields."""
    keys = set(typing.get_type_hints(typed))
    assert keys <= request_.required | request_.optional
    assert request_.required - {"type"} <= keys  # a block's `type` is checked, never read back
