"""Parse and check the JSON arguments a model sends with a tool call.

Models send malformed or incomplete arguments often enough that this is a
normal outcome, not a bug: every problem becomes an ArgumentError whose text
is returned to the model so that it can correct the call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping


class ArgumentError(Exception):
    """The call's arguments are unusable; the message is meant for the model."""


Arguments = Mapping[str, object]


def parse_arguments(raw: str) -> dict[str, object]:
    """Decode the raw argument text; an empty text means "no arguments"."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise ArgumentError(f"arguments are not valid JSON ({err.msg} at position {err.pos})") from None
    if not isinstance(value, dict):
        raise ArgumentError("arguments must be a JSON object")
    return value


def required_str(args: Arguments, name: str, *, allow_empty: bool = False) -> str:
    value = args.get(name)
    if value is None:
        raise ArgumentError(f"missing required argument {name!r}")
    if not isinstance(value, str):
        raise ArgumentError(f"argument {name!r} must be a string")
    if not allow_empty and not value:
        raise ArgumentError(f"argument {name!r} must not be empty")
    return value


def optional_str(args: Arguments, name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"argument {name!r} must be a string")
    return value or None


def optional_int(args: Arguments, name: str, *, minimum: int = 1) -> int | None:
    value = args.get(name)
    if value is None:
        return None
    # bool is an int subclass; `true` is never a meaningful line number.
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ArgumentError(f"argument {name!r} must be an integer")
    if value < minimum:
        raise ArgumentError(f"argument {name!r} must be at least {minimum}")
    return value


def optional_number(args: Arguments, name: str) -> float | None:
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ArgumentError(f"argument {name!r} must be a number")
    if value <= 0:
        raise ArgumentError(f"argument {name!r} must be positive")
    return float(value)


def optional_bool(args: Arguments, name: str, *, default: bool = False) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ArgumentError(f"argument {name!r} must be true or false")
    return value


def optional_str_list(args: Arguments, name: str) -> list[str] | None:
    value = args.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ArgumentError(f"argument {name!r} must be a list of strings")
    return value
