"""The request models term2 validates with (`adapters/acp/params.py`) agree with the generated wire types.

term2 checks what it receives with its own pydantic models, more lenient than the
schema on purpose (v1's `mcpServers` may be left out, for one). What they must not
do is read a field the schema does not define or require one the schema leaves
optional: that would refuse valid requests. Those two rules are checked here,
against the types generated from each version's schema.
"""

from __future__ import annotations

import typing
from types import ModuleType

import pytest
from pydantic import BaseModel

from term2.adapters.acp import params as p
from term2.adapters.acp.wire_types import v1, v2

# (model, schema module, definition, fields the model has that this version never reads)
CASES: list[tuple[type[BaseModel], ModuleType, str, frozenset[str]]] = [
    (p.NewSession, v1, "NewSessionRequest", frozenset()),
    (p.NewSession, v2, "NewSessionRequest", frozenset()),
    (p.ListSessions, v1, "ListSessionsRequest", frozenset()),
    (p.ListSessions, v2, "ListSessionsRequest", frozenset()),
    (p.ResumeSession, v1, "ResumeSessionRequest", frozenset({"replayFrom"})),  # v1 resumes without replay
    (p.ResumeSession, v1, "LoadSessionRequest", frozenset({"replayFrom"})),
    (p.ResumeSession, v2, "ResumeSessionRequest", frozenset()),
    (p.ReplayFrom, v2, "ReplayFromStartVariant", frozenset()),
    (p.SessionRef, v1, "CloseSessionRequest", frozenset()),
    (p.SessionRef, v2, "CloseSessionRequest", frozenset()),
    (p.Prompt, v1, "PromptRequest", frozenset()),
    (p.Prompt, v2, "PromptRequest", frozenset()),
    (p._Text, v1, "ContentBlockText", frozenset()),
    (p._Text, v2, "ContentBlockText", frozenset()),
    (p._Link, v1, "ContentBlockResourceLink", frozenset()),
    (p._Link, v2, "ContentBlockResourceLink", frozenset()),
]


def _schema_keys(typed_dict: type) -> tuple[set[str], set[str]]:
    """(required, all) keys; `__required_keys__` cannot tell under postponed annotations."""
    hints = typing.get_type_hints(typed_dict, include_extras=True)
    required = {key for key, hint in hints.items() if typing.get_origin(hint) is not typing.NotRequired}
    return required, set(hints)


def _model_keys(model: type[BaseModel]) -> tuple[set[str], set[str]]:
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    return {key for key, info in fields.items() if info.is_required()}, set(fields)


@pytest.mark.parametrize(
    ("model", "module", "definition", "unread"),
    CASES,
    ids=[f"{m.__name__}-{mod.__name__.rsplit('.', 1)[1]}-{d}" for m, mod, d, _ in CASES],
)
def test_request_model_reads_only_schema_fields_and_requires_no_more(
    model: type[BaseModel], module: ModuleType, definition: str, unread: frozenset[str]
) -> None:
    schema_required, schema_fields = _schema_keys(getattr(module, definition))
    model_required, model_fields = _model_keys(model)
    assert model_fields - unread <= schema_fields, f"{model.__name__} reads fields {definition} does not define"
    assert model_required <= schema_required, f"{model.__name__} requires fields {definition} leaves optional"
