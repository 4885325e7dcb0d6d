"""Request parameters, checked by pydantic-core validators: the boundary where client input is checked.

Unknown keys (including `_meta`) are accepted and ignored, as ACP's
extensibility rules require; wrong types and missing fields become -32602
with a message naming the field. The requests are deliberately more lenient
than the schema (v1's `mcpServers` may be omitted); that they read only fields
the schema defines and require none it leaves optional is checked against the
generated wire types (`tests/unit/test_wire_params_schema.py`, ADR 0012).

Why core schemas and not `BaseModel`s: the first BaseModel a process defines
costs ~170 ms of pydantic imports and schema building on the machines we
measure, and `session/new` would wait for it; pydantic-core, pydantic's own
engine, validates a core schema with the same rules and messages and builds
one in microseconds (ADR 0018). Each request is a TypedDict for the code that
reads it and a `Request` holding the validator for it, declared side by side.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, cast

from term2.adapters.acp.errors import INVALID_PARAMS, RpcError
from term2.domain.mended_text import MendedText, mend_text
from term2.support.pydantic_core_native import native

if TYPE_CHECKING:
    from pydantic_core import SchemaValidator, ValidationError
else:  # the compiled module alone: the package's schema typing is not needed here (see the module)
    SchemaValidator, ValidationError = native().SchemaValidator, native().ValidationError

if TYPE_CHECKING:  # a prompt's blocks: imported by the first prompt, not by the first session (ADR 0052)
    from term2.domain.content import ContentBlock, EmbeddedResource, ImageBlock

T = TypeVar("T")
Schema = dict[str, Any]

STR: Schema = {"type": "str"}
LIST: Schema = {"type": "list"}
OBJECT: Schema = {"type": "dict", "keys_schema": STR}


def _or_none(schema: Schema) -> Schema:
    return {"type": "nullable", "schema": schema}


class Request(Generic[T]):
    """The fields of one request object (wire names): those it requires, and optional ones (None when absent)."""

    def __init__(
        self,
        required: Mapping[str, Schema],
        optional: Mapping[str, Schema] | None = None,
        meta: bool = True,
        names: frozenset[str] = frozenset(),
    ) -> None:
        """``meta``: the object may carry ACP's ``_meta`` (an object or null), as every request does.
        ``names``: the fields that name something term2 acts on (a path), where mended text is refused."""
        self.names = names
        optional = {**(optional or {}), **({"_meta": OBJECT} if meta else {})}
        self.required = frozenset(required)
        self.optional = frozenset(optional)
        fields: dict[str, Schema] = {
            name: {"type": "typed-dict-field", "schema": schema} for name, schema in required.items()
        }
        for name, schema in optional.items():
            defaulted = {"type": "default", "schema": _or_none(schema), "default": None}
            fields[name] = {"type": "typed-dict-field", "schema": defaulted, "required": False}
        self.schema: Schema = {"type": "typed-dict", "fields": fields, "extra_behavior": "ignore"}
        self.validator = SchemaValidator(self.schema)


class NewSession(TypedDict):
    cwd: str
    mcpServers: list[Any] | None
    additionalDirectories: list[Any] | None


CWD = frozenset({"cwd"})
ROOTS = frozenset({"cwd", "additionalDirectories"})  # each a folder term2 reads, writes and binds (ADR 0051)
NEW_SESSION = Request[NewSession]({"cwd": STR}, {"mcpServers": LIST, "additionalDirectories": LIST}, names=ROOTS)


class ListSessions(TypedDict):
    cwd: str | None
    cursor: str | None


LIST_SESSIONS = Request[ListSessions]({}, {"cwd": STR, "cursor": STR}, names=CWD)


class ReplayFrom(TypedDict):
    type: str


REPLAY_FROM = Request[ReplayFrom]({"type": STR}, meta=False)


class ResumeSession(TypedDict):
    sessionId: str
    cwd: str
    mcpServers: list[Any] | None
    additionalDirectories: list[Any] | None
    replayFrom: ReplayFrom | None


RESUME_SESSION = Request[ResumeSession](
    {"sessionId": STR, "cwd": STR},
    {"mcpServers": LIST, "additionalDirectories": LIST, "replayFrom": REPLAY_FROM.schema},
    names=ROOTS,
)


class SessionRef(TypedDict):
    sessionId: str


SESSION_REF = Request[SessionRef]({"sessionId": STR})


class SetConfigOption(TypedDict):
    sessionId: str
    configId: str
    value: object  # a value id (string) for a select; the schema's boolean variant is refused by name
    type: str | None


SET_CONFIG_OPTION = Request[SetConfigOption](
    {"sessionId": STR, "configId": STR, "value": {"type": "any"}}, {"type": STR}
)


class SetMode(TypedDict):
    sessionId: str
    modeId: str


SET_MODE = Request[SetMode]({"sessionId": STR, "modeId": STR})


class Prompt(TypedDict):
    sessionId: str
    prompt: list[dict[str, Any]]


PROMPT = Request[Prompt]({"sessionId": STR, "prompt": {"type": "list", "items_schema": OBJECT}})


class _Text(TypedDict):
    text: str


TEXT_BLOCK = Request[_Text]({"type": {"type": "literal", "expected": ["text"]}, "text": STR})


class _Link(TypedDict):
    uri: str
    name: str


LINK_BLOCK = Request[_Link]({"type": {"type": "literal", "expected": ["resource_link"]}, "uri": STR, "name": STR})


class _Resource(TypedDict):
    resource: dict[str, Any]


RESOURCE_BLOCK = Request[_Resource]({"type": {"type": "literal", "expected": ["resource"]}, "resource": OBJECT})


class _TextResource(TypedDict):
    uri: str
    text: str
    mimeType: str | None


TEXT_RESOURCE = Request[_TextResource]({"uri": STR, "text": STR}, {"mimeType": STR})


class _BlobResource(TypedDict):
    uri: str
    blob: str
    mimeType: str | None


BLOB_RESOURCE = Request[_BlobResource]({"uri": STR, "blob": STR}, {"mimeType": STR})


class _Image(TypedDict):
    data: str
    mimeType: str
    uri: str | None


IMAGE_BLOCK = Request[_Image](
    {"type": {"type": "literal", "expected": ["image"]}, "data": STR, "mimeType": STR}, {"uri": STR}
)


def mended(value: Any) -> bool:
    """Whether `value` holds a string the connection mended (a lone surrogate the client escaped, now U+FFFD),
    or a lone surrogate still (params built in process, not read from the wire)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if isinstance(item, MendedText) or mend_text(item) is not item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse(request: Request[T], params: Any, method: str) -> T:
    """The request's fields, checked; `params` come from the connection, which mended any lone surrogate.

    Mended text is kept where it is only told (a prompt, `_meta`), but a field that names something to act
    on (`Request.names`: a directory, a command to start) refuses it: U+FFFD is a character a real name may
    hold, and term2 will not guess which one the client meant.
    """
    if isinstance(params, dict):
        for name in sorted(request.names):
            if mended(params.get(name)):
                raise RpcError(
                    INVALID_PARAMS,
                    f"Invalid params for {method}: {name} is not valid Unicode: it holds a lone surrogate "
                    f"(an unpaired \\ud800-\\udfff escape), and term2 will not guess what it names",
                )
    try:
        return cast(T, request.validator.validate_python(params if params is not None else {}))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'params'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise RpcError(INVALID_PARAMS, f"Invalid params for {method}: {problems}") from None


def prompt_blocks(raw: list[dict[str, Any]], embedded: bool = False) -> tuple[ContentBlock, ...]:
    """Accept the ACP baseline (text, resource_link), and `resource` and `image` on v1 (`embedded`),
    where term2 advertises `embeddedContext` and, for a model that takes them, `image`; refuse what
    term2 does not advertise. Images are checked here (`domain.images`: type from the bytes, bounds);
    whether the session's model takes them is the prompt use case's to say."""
    from term2.domain.content import ImageBlock, ResourceLink, TextBlock
    from term2.domain.images import MAX_IMAGES_PER_PROMPT

    supported = "text, resource_link, resource, image" if embedded else "text, resource_link"
    blocks: list[ContentBlock] = []
    for index, item in enumerate(raw):
        kind = item.get("type")
        if kind == "text":
            blocks.append(TextBlock(parse(TEXT_BLOCK, item, f"session/prompt (prompt[{index}])")["text"]))
        elif kind == "resource_link":
            link = parse(LINK_BLOCK, item, f"session/prompt (prompt[{index}])")
            blocks.append(ResourceLink(link["uri"], link["name"]))
        elif kind == "resource" and embedded:
            blocks.append(_resource(item, f"session/prompt (prompt[{index}])"))
        elif kind == "image" and embedded:
            image = parse(IMAGE_BLOCK, item, f"session/prompt (prompt[{index}])")
            blocks.append(_image(image["data"], image["mimeType"], image["uri"], f"prompt[{index}]", embedded=False))
        else:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params for session/prompt: prompt[{index}] is a {kind!r} block, which term2 "
                f"does not support (supported: {supported})",
            )
    if not blocks:
        raise RpcError(INVALID_PARAMS, "Invalid params for session/prompt: prompt must not be empty")
    if sum(isinstance(b, ImageBlock) for b in blocks) > MAX_IMAGES_PER_PROMPT:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid params for session/prompt: term2 sends at most {MAX_IMAGES_PER_PROMPT} images a prompt",
        )
    return tuple(blocks)


def _image(data: str, mime_type: str | None, uri: str | None, where: str, *, embedded: bool) -> ImageBlock:
    from term2.domain.content import ImageBlock
    from term2.domain.images import InvalidImage, checked_image

    try:
        image = checked_image(data, mime_type, where)
    except InvalidImage as exc:
        raise RpcError(INVALID_PARAMS, f"Invalid params for session/prompt: {exc}") from None
    return ImageBlock(image.data, image.mime_type, uri, embedded)


def _resource(item: dict[str, Any], where: str) -> EmbeddedResource | ImageBlock:
    """A text resource, a blob of an image type models take (an image, checked as one), or another
    blob whose base64 must decode (its size is told to the model)."""
    from term2.domain.content import EmbeddedResource
    from term2.domain.images import is_image_type

    resource = parse(RESOURCE_BLOCK, item, where)["resource"]
    if "text" in resource:
        text = parse(TEXT_RESOURCE, resource, f"{where}.resource")
        return EmbeddedResource(text["uri"], text=text["text"], mime_type=text["mimeType"])
    if "blob" not in resource:
        raise RpcError(INVALID_PARAMS, f"Invalid params for {where}: resource must carry text or blob")
    blob = parse(BLOB_RESOURCE, resource, f"{where}.resource")
    if is_image_type(blob["mimeType"]):
        where = where.removeprefix("session/prompt (").removesuffix(")")
        return _image(blob["blob"], blob["mimeType"], blob["uri"], f"{where}.resource", embedded=True)
    try:
        binascii.a2b_base64(blob["blob"], strict_mode=True)
    except (binascii.Error, ValueError):
        raise RpcError(INVALID_PARAMS, f"Invalid params for {where}: resource.blob is not base64") from None
    return EmbeddedResource(blob["uri"], blob=blob["blob"], mime_type=blob["mimeType"])
