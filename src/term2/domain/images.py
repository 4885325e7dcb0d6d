"""Images a user attaches to a prompt: what term2 accepts, checked before anything is stored or sent.

The bounds are the strictest of the wires term2 speaks (Anthropic's Messages
API: 5 MB a base64-decoded image, 8000 px a side, 100 images a request;
OpenAI takes more), so an image accepted here is never refused by a provider
for its size, and one over a bound is refused with a message the user can act
on rather than dropped. The type is read from the bytes (magic numbers), never
trusted from the client: a provider refuses data whose declared media type is
not what it holds, and a client mislabelling a file must not make term2 send
what the provider will refuse mid-turn.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass

from term2.domain.errors import InvalidInput

MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000
MAX_IMAGES_PER_PROMPT = 20  # well under Anthropic's 100 a request, so a few prompts' worth still fit one request
MAX_IMAGES_PER_REQUEST = 100  # Anthropic's limit; the oldest images beyond it are left out with a note
# What one image is counted as in the context estimate: Anthropic's ~1600 tokens for a 1.15 MP image (larger ones
# are scaled down to it); OpenAI's high-detail tiles come to less. An estimate only: a provider's count replaces it.
IMAGE_TOKENS = 1600
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}


class InvalidImage(InvalidInput):
    """An attached image term2 will not send: not an image it knows, or over a provider's bound."""


@dataclass(frozen=True, slots=True)
class Image:
    """One image as every wire takes it: its media type (read from its bytes) and its base64 text."""

    mime_type: str
    data: str


def is_image_type(mime_type: str | None) -> bool:
    """Whether a client's mime type names an image every vision provider takes."""
    named = (mime_type or "").lower()
    return _ALIASES.get(named, named) in IMAGE_TYPES


def sniff(raw: bytes) -> str | None:
    """The media type the bytes' magic number says, among the four every vision provider takes."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def dimensions(raw: bytes, mime_type: str) -> tuple[int, int] | None:
    """(width, height) from the header, or None when the header is cut or unknown."""
    try:
        if mime_type == "image/png":
            return struct.unpack(">II", raw[16:24]) if raw[12:16] == b"IHDR" else None
        if mime_type == "image/gif":
            return struct.unpack("<HH", raw[6:10])
        if mime_type == "image/webp":
            return _webp_size(raw)
        if mime_type == "image/jpeg":
            return _jpeg_size(raw)
    except struct.error:
        return None
    return None


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (not DHT, JPG, DAC)


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 9 < len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            at += 2
            continue
        (length,) = struct.unpack(">H", raw[at + 2 : at + 4])
        if marker in _SOF:
            height, width = struct.unpack(">HH", raw[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def checked_image(data: str, declared: str | None, what: str) -> Image:
    """The image `data` (base64) holds, checked; InvalidImage naming `what` (the prompt block) otherwise.

    `declared` (the client's mime type) must agree with the bytes; common
    aliases (image/jpg) are read as their type.
    """
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        raise InvalidImage(f"{what}: the image data is not base64") from None
    if len(raw) > MAX_IMAGE_BYTES:
        raise InvalidImage(
            f"{what}: the image is {len(raw):,} bytes; term2 sends images of at most {MAX_IMAGE_BYTES:,} bytes "
            "(the providers' limit). Attach a smaller or compressed image."
        )
    kind = sniff(raw)
    if kind is None:
        raise InvalidImage(f"{what}: the data is not a PNG, JPEG, GIF or WebP image (the types models take)")
    named = _ALIASES.get((declared or kind).lower(), (declared or kind).lower())
    if named != kind:
        raise InvalidImage(f"{what}: the data is a {kind} image, not {declared} as the prompt says")
    size = dimensions(raw, kind)
    if size is None:
        raise InvalidImage(f"{what}: the {kind} image's header is damaged; term2 cannot tell its size")
    if max(size) > MAX_IMAGE_SIDE:
        raise InvalidImage(
            f"{what}: the image is {size[0]}x{size[1]} pixels; models take at most {MAX_IMAGE_SIDE} pixels a side. "
            "Attach a smaller image."
        )
    return Image(kind, data)
