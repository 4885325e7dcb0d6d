"""The image rules of issue 29 (ADR 0046): term2's checks, the summariser's note, and the fakes' provider rules.

The fakes are each provider's specification in the end-to-end tests, so a shape the real API refuses
must be refused by them too: checked here directly, beside term2's own checks of what it accepts.
"""

from __future__ import annotations

import base64
import struct

import pytest

from term2.app.compaction import render_for_summary
from term2.domain.images import MAX_IMAGE_BYTES, InvalidImage, checked_image, dimensions, sniff
from term2.domain.transcript import ChatMessage, ModelMessage
from tests.fakes.images import png
from tests.fakes.llm_image_rules import anthropic_images, openai_images

PNG = base64.b64encode(png(3, 2)).decode()
GIF = b"GIF89a" + struct.pack("<HH", 5, 7) + b"\x00" * 8
WEBP_X = b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x00" * 8 + (9 - 1).to_bytes(3, "little") + (4 - 1).to_bytes(3, "little")
JPEG = (
    b"\xff\xd8\xff\xe0" + struct.pack(">H", 4) + b"JF" + b"\xff\xc0" + struct.pack(">HBHH", 11, 8, 6, 10) + b"\x00" * 8
)


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("raw", "kind", "size"),
    [
        (png(3, 2), "image/png", (3, 2)),
        (GIF, "image/gif", (5, 7)),
        (WEBP_X, "image/webp", (9, 4)),
        (JPEG, "image/jpeg", (10, 6)),
    ],
)
def test_the_type_and_size_come_from_the_bytes(raw: bytes, kind: str, size: tuple[int, int]) -> None:
    assert sniff(raw) == kind
    assert dimensions(raw, kind) == size
    assert checked_image(b64(raw), None, "x").mime_type == kind


def test_a_declared_type_must_match_the_bytes_and_jpg_is_jpeg() -> None:
    with pytest.raises(InvalidImage, match="not image/gif"):
        checked_image(PNG, "image/gif", "x")
    assert checked_image(b64(JPEG), "image/jpg", "x").mime_type == "image/jpeg"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b64(b"%PDF-1.7"), "not a PNG, JPEG, GIF or WebP"),
        (b64(png(8001, 1)), "8001x1"),
        (b64(b"\x89PNG\r\n\x1a\n" + b"\x00" * (MAX_IMAGE_BYTES)), "at most"),
        ("not base64!", "not base64"),
        (b64(b"\x89PNG\r\n\x1a\n\x00\x00"), "damaged"),
    ],
)
def test_what_a_provider_would_refuse_is_refused_by_name(data: str, needle: str) -> None:
    with pytest.raises(InvalidImage, match=needle):
        checked_image(data, None, "prompt[0]")


def test_the_summariser_is_told_that_images_are_dropped() -> None:
    from term2.domain.images import Image

    item = ModelMessage("m1", ChatMessage("user", "look", images=(Image("image/png", PNG),)))
    text = render_for_summary([item], 10_000, "n0nce")
    assert "1 image(s) went with the part above; compaction drops them" in text


def _openai_user(part: dict[str, object], role: str = "user") -> list[dict[str, object]]:
    return [{"role": role, "content": [{"type": "text", "text": "hi"}, part]}]


def test_the_fake_openai_takes_its_real_shape_and_refuses_others() -> None:
    good = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert openai_images("gpt-4o-mini", _openai_user(good)) is None
    assert openai_images("gpt-4o-mini", _openai_user(good, "system")) is not None  # images in user messages only
    assert openai_images("gpt-3.5-turbo", _openai_user(good)) is not None  # a model without vision
    wrong_type = {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}}
    assert openai_images("gpt-4o-mini", _openai_user(wrong_type)) is not None
    anthropic_shape = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    assert openai_images("gpt-4o-mini", _openai_user(anthropic_shape)) is not None


def test_the_fake_anthropic_takes_its_real_shape_and_refuses_others() -> None:
    def user(block: dict[str, object]) -> list[dict[str, object]]:
        return [{"role": "user", "content": [{"type": "text", "text": "hi"}, block]}]

    source = {"type": "base64", "media_type": "image/png", "data": PNG}
    assert anthropic_images(user({"type": "image", "source": source})) is None
    assert anthropic_images(user({"type": "image", "source": {**source, "media_type": "image/bmp"}})) is not None
    assert anthropic_images(user({"type": "image", "source": {**source, "media_type": "image/gif"}})) is not None
    big = b64(png(9000, 1))
    assert anthropic_images(user({"type": "image", "source": {**source, "data": big}})) is not None
    openai_shape = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert anthropic_images(user(openai_shape)) is not None
    in_result = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "image", "source": {**source, "data": "%%"}}],
    }
    assert anthropic_images(user(in_result)) is not None
