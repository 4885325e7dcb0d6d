"""The one validation error that matters, out of a server's list of them.

Servers built on FastAPI and pydantic (llama-cpp-python, many proxies) answer a
request they cannot parse with a list of errors, one per member of every union
the value failed: an assistant message with ``"content": null`` checked against
llama-cpp-python's six message types is "7 validation errors", six of them
saying the role is not ``system``, ``user``, ``tool``... Cutting that text at a
fixed length shows the user only those. What matters is the error of the
member whose discriminator matched: the union members whose ``role`` (or
``type``) was refused are dropped, and the first error left is reported with
its field.

Three shapes arrive: FastAPI's own ``{"detail": [{"loc", "msg", "type"}, ...]}``
(HTTP 422), FastAPI's exception text inside an OpenAI-style error message
("7 validation errors:" then one Python dict a line, as llama-cpp-python
returns it with HTTP 500), and pydantic's own text ("2 validation errors for
Model", then the location and the message on alternate lines). Parsing the
dict lines uses `ast.literal_eval`, which evaluates literals only.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ValidationDetail", "validation_detail"]

_FASTAPI_HEAD = re.compile(r"^\s*(\d+) validation errors?:\s*$", re.MULTILINE)
_PYDANTIC_HEAD = re.compile(r"^\s*(\d+) validation errors? for \S+", re.MULTILINE)
_PYDANTIC_MSG = re.compile(r"^\s+(.+?)(?: \[type=([\w.-]+)(?:, input_value=(.*?))?(?:, input_type=\w+)?\])?$")
_DISCRIMINATOR_TYPES = frozenset(
    {"literal_error", "union_tag_invalid", "model_type", "dict_type", "model_attributes_type"}
)
_MAX_LINE = 4_000  # longer lines are not parsed: an error line that long is not one worth showing
_MAX_SHOWN = 200  # characters of an offending input shown


@dataclass(frozen=True, slots=True)
class _Error:
    loc: tuple[str | int, ...]
    msg: str
    type: str
    input: str | None = None


@dataclass(frozen=True, slots=True)
class ValidationDetail:
    """The relevant error (``field: message``) and how many the server listed."""

    text: str
    count: int

    def __str__(self) -> str:
        if self.count > 1:
            return f"{self.text} ({self.count} validation errors; this is the one for the value sent)"
        return self.text


def validation_detail(data: Any) -> ValidationDetail | None:
    """The relevant validation error of a parsed error body (or its message text), or None if it is not one."""
    errors, count = _errors_of(data)
    if not errors:
        return None
    chosen = _relevant(errors)
    return ValidationDetail(_describe(chosen), max(count, len(errors)))


def _errors_of(data: Any) -> tuple[list[_Error], int]:
    if isinstance(data, Mapping):
        detail = data.get("detail")
        if isinstance(detail, list):
            errors = [e for e in (_from_dict(item) for item in detail) if e is not None]
            return errors, len(detail)
        error = data.get("error")
        if isinstance(error, Mapping):
            message = error.get("message")
            return _errors_of(message) if isinstance(message, str) else ([], 0)
        message = data.get("message")
        return _errors_of(message) if isinstance(message, str) else ([], 0)
    if isinstance(data, str):
        head = _FASTAPI_HEAD.search(data)
        if head:
            return _from_fastapi_text(data[head.end() :]), int(head.group(1))
        head = _PYDANTIC_HEAD.search(data)
        if head:
            return _from_pydantic_text(data[head.end() :]), int(head.group(1))
    return [], 0


def _from_dict(item: Any) -> _Error | None:
    if not isinstance(item, Mapping):
        return None
    loc = item.get("loc")
    msg = item.get("msg")
    if not isinstance(loc, Sequence) or isinstance(loc, str) or not isinstance(msg, str):
        return None
    parts = tuple(p if isinstance(p, int) and not isinstance(p, bool) else str(p) for p in loc)
    shown = _shown(item["input"]) if "input" in item else None
    return _Error(parts, msg, str(item.get("type") or ""), shown)


def _shown(value: Any) -> str:
    """An offending input as JSON (``null``, not Python's ``None``): what the user's request spelled."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _from_fastapi_text(text: str) -> list[_Error]:
    out: list[_Error] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{") or len(line) > _MAX_LINE:
            continue
        try:
            value = ast.literal_eval(line)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        error = _from_dict(value)
        if error is not None:
            out.append(error)
    return out


def _from_pydantic_text(text: str) -> list[_Error]:
    """Pydantic's text: a location line, then an indented message line (and a "For further information" one)."""
    out: list[_Error] = []
    location: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("For further information"):
            continue
        if not line.startswith(" "):
            location = line.strip()
            continue
        if location is None:
            continue
        found = _PYDANTIC_MSG.match(line)
        if found:
            loc = tuple(int(p) if p.isdigit() else p for p in location.split("."))
            out.append(_Error(loc, found.group(1), found.group(2) or "", found.group(3)))
        location = None
    return out


def _relevant(errors: list[_Error]) -> _Error:
    """The first error of a union member whose discriminator matched; else the first error at all."""
    refused = {e.loc[:-1] for e in errors if e.type in _DISCRIMINATOR_TYPES and e.loc and e.loc[-1] in ("role", "type")}
    kept = [e for e in errors if e.loc[:-1] not in refused and e.type not in _DISCRIMINATOR_TYPES]
    return (kept or errors)[0]


def _is_member_tag(part: str | int) -> bool:
    """A union member's name in a location (``ChatCompletionRequestAssistantMessage``, ``typed-dict``), not a field."""
    return isinstance(part, str) and (part[:1].isupper() or "-" in part or "[" in part)


def _describe(error: _Error) -> str:
    path = ""
    member = None
    for part in error.loc:
        if part in ("body",) and not path:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        elif _is_member_tag(part):
            member = part
        else:
            path += f".{part}" if path else part
    text = f"{path or 'request'}: {error.msg}"
    if error.input is not None:
        shown = error.input if len(error.input) <= _MAX_SHOWN else error.input[:_MAX_SHOWN] + "…"
        text += f" (got {shown})"
    if member:
        text += f" [as {member}]"
    return text
