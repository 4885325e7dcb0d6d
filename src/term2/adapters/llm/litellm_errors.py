"""Translate litellm exceptions into the port's LLMError family.

Why here: use cases and the ACP layer must never see a litellm (or openai SDK)
type, and the user deserves a message that says which model failed, with which
HTTP status, and what the provider said, without litellm's prefixes and banners.
Classes are matched by name along the MRO so this module needs no litellm import
(and works for openai/httpx exceptions that leak through, too). Each error also
carries the HTTP status and the provider's retry hint, which the agent loop's
retry policy reads; an exhausted quota (`insufficient_quota`) is told apart from
a rate limit because waiting cannot cure it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from term2.adapters.llm import retry_hints
from term2.adapters.llm.provider_words import CONTEXT_CODES, QUOTA_CODE, says_quota, says_too_long
from term2.domain.mended_text import mend_text
from term2.domain.truncation import ELLIPSIS, keep_head
from term2.ports.llm import (
    AuthenticationFailed,
    BadRequest,
    ContextWindowExceeded,
    LLMError,
    ProviderTimeout,
    ProviderUnreachable,
    QuotaExceeded,
    RateLimited,
)

_MAX_DETAIL = 300
# "litellm.RateLimitError: AnthropicException - " and "InternalServerError: OpenAIException - "
_PREFIX = re.compile(r"^((litellm\.\w+|\w+(Error|Exception))(:|\s+-)\s*)+")
_SSL_NOISE = re.compile(r" ssl:<[^>]*>| ssl:default")
_MESSAGE = re.compile(r"[\"']message[\"']\s*:\s*\"((?:[^\"\\]|\\.)*)\"")
_SUFFIX = re.compile(
    r"\.?\s*(Received Model Group|Handle with `litellm|LiteLLM Retried|Error_str:).*$",
    re.DOTALL,
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
    (
        "UnsupportedParamsError",
        BadRequest,
        "{model} does not support a requested parameter",
    ),
    ("NotFoundError", BadRequest, "Model or endpoint not found for {model}"),
    ("BadRequestError", BadRequest, "{model} rejected the request"),
    ("UnprocessableEntityError", BadRequest, "{model} rejected the request"),
)
_TIMEOUT_NAMES = {"Timeout", "APITimeoutError", "TimeoutException", "TimeoutError"}
# Transport-level failures (httpx, aiohttp, builtins). litellm's own APIConnectionError
# is not one of them: it also wraps provider error events that arrive mid-stream.
_CONNECT_NAMES = {
    "ConnectError",
    "ClientConnectorError",
    "ConnectionError",  # builtins: refused, reset, aborted
    "gaierror",
    "RemoteProtocolError",
    "ServerDisconnectedError",
    "ClientPayloadError",
}
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
    text = _SSL_NOISE.sub("", text)
    return keep_head(text, _MAX_DETAIL, ELLIPSIS)


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _headers(exc: BaseException) -> Mapping[str, str]:
    """The provider's response headers: litellm keeps them on every path, openai's errors on `.response`."""
    response = getattr(exc, "response", None)
    for headers in (getattr(exc, "litellm_response_headers", None), getattr(response, "headers", None)):
        if headers is not None and hasattr(headers, "items"):
            return {str(k): str(v) for k, v in headers.items()}
    return {}


def _is_quota(exc: BaseException) -> bool:
    """OpenAI says so in the body's `code`/`type`; on other paths only the message text tells."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping) and QUOTA_CODE in (body.get("code"), body.get("type")):
        return True
    return says_quota(str(exc))


def _is_too_long(exc: BaseException) -> bool:
    """litellm has a class for it, but not on every provider's path; the body's code or the words tell."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping) and (CONTEXT_CODES & {body.get("code"), body.get("type")}):
        return True
    return says_too_long(str(exc))


def _retry_after(exc: BaseException, detail: str) -> float | None:
    hinted = retry_hints.from_headers(_headers(exc))
    return hinted if hinted is not None else retry_hints.from_message(detail)


def _unwrap(exc: BaseException) -> BaseException:
    """MidStreamFallbackError wraps the real failure; judge by the original."""
    original = getattr(exc, "original_exception", None)
    if type(exc).__name__ == "MidStreamFallbackError" and isinstance(original, BaseException):
        return original
    return exc


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from (bounded, cycle-safe)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _transport_failure(exc: BaseException) -> BaseException | None:
    """The deepest transport-level failure behind `exc` (refused, reset, DNS), if any.

    litellm reports a refused connection as a 500 InternalServerError on the
    openai/ and anthropic/ paths; only the cause chain tells the truth.
    """
    found: BaseException | None = None
    for cause in _causes(exc)[1:]:
        names = {cls.__name__ for cls in type(cause).__mro__}
        if names & _TIMEOUT_NAMES:
            return None
        if names & _CONNECT_NAMES:
            found = cause
    return found


def _classify(exc: BaseException) -> tuple[type[LLMError], str]:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _TIMEOUT_NAMES:
        return ProviderTimeout, "Timed out waiting for {model}"
    if _transport_failure(exc) is not None:
        return _UNREACHABLE
    if "APIConnectionError" in names:
        # With a cause, the provider answered and then failed (e.g. an error event
        # mid-stream); without one, it is a bare connection failure.
        return _SERVER_ERROR if len(_causes(exc)) > 1 else _UNREACHABLE
    for name, port_error, template in _BY_CLASS:
        if name in names:
            return port_error, template
    if names & {"InternalServerError", "ServiceUnavailableError", "BadGatewayError", "APIError"}:
        return _SERVER_ERROR
    return _OTHER


def map_litellm_error(exc: BaseException, model: str, api_base: str | None = None) -> LLMError:
    """Build the port error for `exc`; the caller raises it `from exc` to keep the chain."""
    if isinstance(exc, LLMError):
        return exc
    inner = _unwrap(exc)
    port_error, template = _classify(inner)
    if port_error is RateLimited and _is_quota(inner):
        port_error, template = QuotaExceeded, "Quota exceeded for {model}"
    if port_error is BadRequest and _is_too_long(inner):
        port_error, template = ContextWindowExceeded, "Context window exceeded for {model}"
    if port_error is ProviderUnreachable:
        # No HTTP exchange happened: litellm's "500" would mislead, so say where instead.
        where = f" at {api_base}" if api_base else ""
        root = _transport_failure(inner) or inner
        head = template.format(model=model) + where
        return port_error(mend_text(f"{head}: {_detail(root) or 'connection failed'}"))
    status = _status(inner)
    head = template.format(model=model)
    if status is not None:
        head += f" (HTTP {status})"
    detail = _detail(inner)
    message = mend_text(f"{head}: {detail}" if detail else head)  # a provider's body may escape lone surrogates
    return port_error(message, status=status, retry_after=_retry_after(inner, detail))
