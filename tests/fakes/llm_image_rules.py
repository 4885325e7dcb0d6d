"""The providers' rules for images in a request, enforced by the fake LLM server (see `llm_rules`).

Written from the providers' documentation and error bodies, independently of
term2's own checks (`term2.domain.images`), so that a shape or a bound term2
gets wrong is refused here as the real API would refuse it.

OpenAI chat completions
  * A content part list holds `text` parts (`{"type": "text", "text": str}`) and,
    in user messages only, `image_url` parts (`{"type": "image_url", "image_url":
    {"url": str, "detail"?: "auto"|"low"|"high"}}`); any other role takes text parts only.
  * A `data:` URL must be `data:image/<png|jpeg|gif|webp>;base64,<base64>` whose
    bytes are such an image, at most 20 MB.
  * A model without vision (`TEXT_ONLY_MODELS`) refuses any image part.
Anthropic Messages
  * `{"type": "image", "source": {"type": "base64", "media_type": one of
    image/jpeg|png|gif|webp, "data": str}}` (or `{"type": "url", "url": str}`),
    in user messages (directly or inside a `tool_result`'s content) only.
  * The data decodes to an image of the declared type, at most 5 MB, at most
    8000 px a side; at most 100 images a request.
  * Any block type the API does not know (OpenAI's `image_url`) is refused.
"""

from __future__ import annotations

import base64
import binascii
import struct
from typing import Any

from tests.fakes.llm_rules import Rejection, anthropic_error, openai_error

TEXT_ONLY_MODELS = frozenset({"gpt-3.5-turbo", "o3-mini", "text-only"})
ANTHROPIC_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
OPENAI_FORMATS = ("png", "jpeg", "gif", "webp")
ANTHROPIC_MAX_BYTES = 5 * 1024 * 1024
OPENAI_MAX_BYTES = 20 * 1024 * 1024
MAX_SIDE = 8000


def _kind(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _png_side(raw: bytes) -> int:
    if raw.startswith(b"\x89PNG") and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(max(width, height))
    return 0


def _decode(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


# --------------------------------------------------------------------------- OpenAI


def openai_images(model: str, messages: list[dict[str, Any]]) -> Rejection | None:
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                if not isinstance(part.get("text"), str):
                    return openai_error(
                        f"Invalid type for 'messages[{i}].content[{j}].text': expected a string.",
                        param=f"messages[{i}].content[{j}].text",
                        code="invalid_type",
                    )
                continue
            if kind != "image_url" or msg.get("role") != "user":
                return openai_error(
                    f"Invalid value: '{kind}'. Supported values are: 'text'"
                    + (
                        ", 'image_url', 'input_audio', 'refusal', 'audio', and 'file'."
                        if msg.get("role") == "user"
                        else "."
                    )
                    if kind != "image_url"
                    else f"Invalid 'messages[{i}]': image_url content parts are only allowed in user messages.",
                    param=f"messages[{i}].content[{j}].type",
                    code="invalid_value",
                )
            if rejection := _openai_image(model, part, f"messages[{i}].content[{j}]"):
                return rejection
    return None


def _openai_image(model: str, part: dict[str, Any], where: str) -> Rejection | None:
    if model.rpartition("/")[2] in TEXT_ONLY_MODELS:
        return openai_error(
            "Invalid content type. image_url is only supported by certain models.",
            param=f"{where}.type",
            code="invalid_value",
        )
    image_url = part.get("image_url")
    url = image_url.get("url") if isinstance(image_url, dict) else None
    if not isinstance(url, str):
        return openai_error(
            f"Missing required parameter: '{where}.image_url.url'.",
            param=f"{where}.image_url.url",
            code="missing_required_parameter",
        )
    unsupported = openai_error(
        "You uploaded an unsupported image. Please make sure your image is below 20 MB in size and is of one the "
        f"following formats: {list(OPENAI_FORMATS)}.",
        code="invalid_image_format",
        reason=f"{where}: unsupported image",
    )
    if not url.startswith("data:"):
        return None if url.startswith("https://") else openai_error("Invalid image URL.", code="invalid_image_url")
    head, comma, data = url.partition(",")
    mime = head.removeprefix("data:").removesuffix(";base64")
    if not comma or not head.endswith(";base64") or mime.removeprefix("image/") not in OPENAI_FORMATS:
        return unsupported
    raw = _decode(data)
    if raw is None or _kind(raw) != mime or len(raw) > OPENAI_MAX_BYTES:
        return unsupported
    return None


# --------------------------------------------------------------------------- Anthropic


ANTHROPIC_BLOCKS = (  # the content block types the Messages API takes in a request
    "text", "image", "document", "search_result", "tool_use", "tool_result", "thinking", "redacted_thinking",
    "server_tool_use", "web_search_tool_result", "container_upload",
)  # fmt: skip


def anthropic_images(messages: list[dict[str, Any]]) -> Rejection | None:
    count = 0
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for j, block in enumerate(content):
            if not isinstance(block, dict):
                continue
            if block.get("type") not in ANTHROPIC_BLOCKS:  # e.g. OpenAI's image_url part sent to Anthropic
                return anthropic_error(
                    f"messages.{i}.content.{j}: Input tag '{block.get('type')}' found using 'type' does not match "
                    f"any of the expected tags: {', '.join(repr(t) for t in ANTHROPIC_BLOCKS)}"
                )
            nested = block.get("content") if block.get("type") == "tool_result" else None
            inner = [(f"{j}.content.{k}", b) for k, b in enumerate(nested)] if isinstance(nested, list) else []
            for where, image in [(str(j), block), *inner]:
                if not isinstance(image, dict) or image.get("type") != "image":
                    continue
                count += 1
                if msg.get("role") != "user":
                    return anthropic_error(
                        f"messages.{i}.content.{where}: image blocks are only allowed in user messages"
                    )
                if rejection := _anthropic_image(image, f"messages.{i}.content.{where}.image"):
                    return rejection
    if count > 100:
        return anthropic_error(f"messages: Too many images in request: {count} > 100")
    return None


def _anthropic_image(block: dict[str, Any], where: str) -> Rejection | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return anthropic_error(f"{where}.source: Field required")
    if source.get("type") == "url":
        return None if isinstance(source.get("url"), str) else anthropic_error(f"{where}.source.url: Field required")
    if source.get("type") != "base64":
        return anthropic_error(f"{where}.source: Input tag '{source.get('type')}' found using 'type' does not match")
    media = source.get("media_type")
    if media not in ANTHROPIC_TYPES:
        return anthropic_error(
            f"{where}.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
        )
    raw = _decode(source.get("data"))
    if raw is None:
        return anthropic_error(f"{where}.source.base64.data: Invalid base64 data")
    if len(raw) > ANTHROPIC_MAX_BYTES:
        return anthropic_error(
            f"{where}.source.base64: image exceeds 5 MB maximum: {len(raw)} bytes > {ANTHROPIC_MAX_BYTES} bytes"
        )
    kind = _kind(raw)
    if kind != media:
        return anthropic_error(
            f"{where}.source.base64.data: The image was specified using the {media} media type, but the image "
            f"appears to be a {kind or 'unknown'} image"
        )
    if _png_side(raw) > MAX_SIDE:
        return anthropic_error(
            f"{where}.source.base64.data: At least one of the image dimensions exceed max allowed size: 8000 pixels"
        )
    return None
