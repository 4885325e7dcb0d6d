"""Translate litellm exceptions into the port's LLMError family.

Why here: use cases and the ACP layer must never see a litellm (or openai SDK)
type, and the user deserves a message that says which model failed, with which
HTTP status, and what the provider said, without litellm's prefixes and banners.
Classes are matched by name along the MRO so this module needs no litellm import
(and works for openai/httpx exceptions that leak through, too).
"""

from __future__ import annotations

import json
import re

from term2.ports.llm import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    LLMError,
    ProviderTimeout,
    ProviderUnreachable,
    RateLimited,
)

_MAX_DETAIL = 300
# "litellm.RateLimitError: AnthropicException - " and "InternalServerError: OpenAIException - "
_PREFIX = re.compile(r"^((litellm\.)?\w+(Error|Exception)(:|\s+-)\s*)+")
_MESSAGE = re.compile(r"[\"']message[\"']\s*:\s*\"((?:[^\"\\]|\\.)*)\"")
_SUFFIX = re.compile(
    r"\.?\s*(Received Model Group|Handle with `litellm|LiteLLM Retried).*$", re.DOTALL
)

# First match along the exception's MRO wins; most specific names first.
_BY_CLASS: tuple[tuple[str, type[LLMError], str], ...] = (
    (
        "ContextWindowExceededError",
        ContextWindowExceeded,
        "Context window exceeded for {model}",
    ),
    ("AuthenticationError", AuthenticationFailed, "Authentication failed for {model}"),
    ("PermissionDeniedError", AuthenticationFailed, "Permission denied for {model}"),
    ("RateLimitError", RateLimited, "Rate limited by {model}"),
    ("Timeout", ProviderTimeout, "Timed out waiting for {model}"),
    ("APITimeoutError", ProviderTimeout, "Timed out waiting for {model}"),
    ("TimeoutException", ProviderTimeout, "Timed out waiting for {model}"),
    ("APIConnectionError", ProviderUnreachable, "Cannot reach {model}"),
    ("ConnectError", ProviderUnreachable, "Cannot reach {model}"),
    (
        "UnsupportedParamsError",
        BadRequest,
        "{model} does not support a requested parameter",
    ),
    ("NotFoundError", BadRequest, "Model or endpoint not found for {model}"),
    ("BadRequestError", BadRequest, "{model} rejected the request"),
    ("UnprocessableEntityError", BadRequest, "{model} rejected the request"),
)
_UNREACHABLE = (ProviderUnreachable, "Cannot reach {model}")
_SERVER_ERROR = (LLMError, "Provider error from {model}")
_OTHER = (LLMError, "Provider call failed for {model}")


def _detail(exc: BaseException) -> str:
    """The provider's own words, stripped of litellm prefixes, JSON wrapping and hints."""
    text = str(getattr(exc, "message", None) or exc).strip()
    found = _MESSAGE.search(text)  # provider JSON bodies, often inside a b'...' repr
    if found:
        raw = found.group(1).replace("\\'", "'")
        try:
            text = json.loads(f'"{raw}"')
        except ValueError:
            text = raw
    text = _SUFFIX.sub("", _PREFIX.sub("", text)).split("\n", 1)[0].strip()
    return text[:_MAX_DETAIL] + ("…" if len(text) > _MAX_DETAIL else "")


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _unwrap(exc: BaseException) -> BaseException:
    """MidStreamFallbackError wraps the real failure; judge by the original."""
    original = getattr(exc, "original_exception", None)
    if type(exc).__name__ == "MidStreamFallbackError" and isinstance(
        original, BaseException
    ):
        return original
    return exc


def _classify(exc: BaseException) -> tuple[type[LLMError], str]:
    names = {cls.__name__ for cls in type(exc).__mro__}
    # openai/anthropic report a refused connection as a 500 "Connection error."
    if "InternalServerError" in names and "connection error" in str(exc).lower():
        return _UNREACHABLE
    for name, port_error, template in _BY_CLASS:
        if name in names:
            return port_error, template
    if names & {
        "InternalServerError",
        "ServiceUnavailableError",
        "BadGatewayError",
        "APIError",
    }:
        return _SERVER_ERROR
    return _OTHER


def map_litellm_error(exc: BaseException, model: str) -> LLMError:
    """Build the port error for `exc`; the caller raises it `from exc` to keep the chain."""
    if isinstance(exc, LLMError):
        return exc
    inner = _unwrap(exc)
    port_error, template = _classify(inner)
    status = _status(inner)
    head = template.format(model=model) + (
        f" (HTTP {status})" if status is not None else ""
    )
    detail = _detail(inner)
    return port_error(f"{head}: {detail}" if detail else head)
