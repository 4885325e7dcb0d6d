"""Request parameters as pydantic models: the boundary where client input is checked.

Unknown keys (including `_meta`) are accepted and ignored, as ACP's
extensibility rules require; wrong types and missing fields become -32602
with a message naming the field. The models are deliberately more lenient than
the schema (v1's `mcpServers` may be omitted); that they read only fields the
schema defines and require none it leaves optional is checked against the
generated wire types (`tests/unit/test_wire_params_schema.py`, ADR 0012).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from term2.adapters.acp.errors import INVALID_PARAMS, RpcError
from term2.domain.content import ContentBlock, ResourceLink, TextBlock

T = TypeVar("T", bound=BaseModel)


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class NewSession(_Params):
    cwd: str
    mcp_servers: list[Any] | None = Field(default=None, alias="mcpServers")
    additional_directories: list[Any] | None = Field(default=None, alias="additionalDirectories")


class ListSessions(_Params):
    cwd: str | None = None
    cursor: str | None = None


class ReplayFrom(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class ResumeSession(_Params):
    session_id: str = Field(alias="sessionId")
    cwd: str
    mcp_servers: list[Any] | None = Field(default=None, alias="mcpServers")
    additional_directories: list[Any] | None = Field(default=None, alias="additionalDirectories")
    replay_from: ReplayFrom | None = Field(default=None, alias="replayFrom")


class SessionRef(_Params):
    session_id: str = Field(alias="sessionId")


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str


class _Text(_Block):
    type: Literal["text"]
    text: str


class _Link(_Block):
    type: Literal["resource_link"]
    uri: str
    name: str


class Prompt(_Params):
    session_id: str = Field(alias="sessionId")
    prompt: list[dict[str, Any]]


def _has_lone_surrogate(value: Any) -> bool:
    """JSON may escape lone surrogates ("\\ud800"); they are not Unicode and no store can keep them."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse(model: type[T], params: Any, method: str) -> T:
    if _has_lone_surrogate(params):
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: a string is not valid Unicode (lone surrogate)")
    try:
        return model.model_validate(params if params is not None else {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: {problems}") from None


def prompt_blocks(raw: list[dict[str, Any]]) -> tuple[ContentBlock, ...]:
    """Accept the ACP baseline (text, resource_link); refuse what term2 does not advertise."""
    blocks: list[ContentBlock] = []
    for index, item in enumerate(raw):
        kind = item.get("type")
        if kind == "text":
            blocks.append(TextBlock(parse(_Text, item, f"session/prompt (prompt[{index}])").text))
        elif kind == "resource_link":
            link = parse(_Link, item, f"session/prompt (prompt[{index}])")
            blocks.append(ResourceLink(link.uri, link.name))
        else:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params for session/prompt: prompt[{index}] is a {kind!r} block, which term2 "
                "does not support (supported: text, resource_link)",
            )
    if not blocks:
        raise RpcError(INVALID_PARAMS, "Invalid params for session/prompt: prompt must not be empty")
    return tuple(blocks)
