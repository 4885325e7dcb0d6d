"""Map HTTP failures of the native adapters into the port's LLMError family.

Why here: the native adapters see the raw exchange (status, headers, the
provider's JSON error body, httpx exceptions, in-stream error events), so they
can classify exactly instead of by exception names as `litellm_errors` must.
The messages read the same as the litellm adapter's ("Rate limited by
openai/gpt-5 (HTTP 429): <the provider's sentence>"), and every error carries
`status` and `retry_after` for the agent loop's retry policy. An exhausted
quota is told apart from a rate limit, and a context-window overflow from
other bad requests, by the provider's error code *and* its wording, since
OpenAI-compatible servers and Anthropic say it only in words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from term2.adapters.llm import retry_hints
from term2.adapters.llm.provider_words import (
    CONTEXT_CODES,
    QUOTA_CODE,
    says_quota,
    says_too_long,
    says_unsupported,
)
from term2.adapters.llm.validation_errors import validation_detail
from term2.domain.mended_text import loads, mend_text
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

__all__ = ["ProviderError", "error_from_event", "error_from_response", "error_from_transport", "parse_error_body"]

_MAX_DETAIL = 300
_MAX_VALIDATION = 1_000  # the one relevant validation error, with its field and the offending value
# Anthropic's in-stream (and body) error types, as the HTTP status they stand for.
_ANTHROPIC_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
DETERMINISTIC_RETRIES = 1  # a validation error comes back the same; one retry covers a server that failed once
_OPENAI_CODE_STATUS = {
    "rate_limit_exceeded": 429,
    QUOTA_CODE: 429,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
}


class ProviderError:
    """What a provider said about a failure: its sentence, and its code/type if it gave them.

    ``validation`` is set when the body lists validation errors (FastAPI,
    pydantic, OpenAI's ``invalid_request_error`` naming a ``param``): then the
    message is the one relevant error with its field, not the body's head.
    """

    __slots__ = ("code", "message", "type", "validation")

    def __init__(
        self, message: str, code: str | None = None, type_: str | None = None, *, validation: bool = False
    ) -> None:
        # Mended: a provider's body may escape a lone surrogate, and the message is told and stored.
        self.message, self.code, self.type = mend_text(message), _mended(code), _mended(type_)
        self.validation = validation

    @property
    def tags(self) -> set[str]:
        return {t for t in (self.code, self.type) if t}


def _mended(text: str | None) -> str | None:
    return None if text is None else mend_text(text)


def _clean(text: str) -> str:
    return keep_head(" ".join(text.split()), _MAX_DETAIL, ELLIPSIS)


def parse_error_body(raw: bytes | str | Any) -> ProviderError:
    """Read OpenAI's ``{"error": {...}}``, Anthropic's ``{"type": "error", "error": {...}}``, or plain text."""
    data: Any = raw
    if isinstance(raw, (bytes, str)):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        try:
            data = loads(text)  # mended: the message is told to the user and kept in the session
        except ValueError:
            return ProviderError(_clean(text.strip().split("\n", 1)[0]))
    if isinstance(data, Mapping):
        detail = validation_detail(data)
        error = data.get("error", data)
        if isinstance(error, Mapping):
            message = error.get("message") or error.get("detail") or ""
            code, kind = error.get("code"), error.get("type")
            code_text = str(code) if code not in (None, "") else None
            kind_text = str(kind) if kind not in (None, "") else None
            if detail is not None:
                return ProviderError(
                    keep_head(str(detail), _MAX_VALIDATION, ELLIPSIS), code_text, kind_text, validation=True
                )
            text = _clean(str(message))
            param = error.get("param")
            if kind_text == "invalid_request_error" and isinstance(param, str) and param and param not in text:
                return ProviderError(f"{param}: {text}", code_text, kind_text, validation=True)
            return ProviderError(text, code_text, kind_text, validation=kind_text == "invalid_request_error")
        if detail is not None:
            return ProviderError(keep_head(str(detail), _MAX_VALIDATION, ELLIPSIS), validation=True)
        if isinstance(error, str):
            return ProviderError(_clean(error))
    return ProviderError(_clean(json.dumps(data)) if data not in (None, "") else "")


def _is_context(said: ProviderError) -> bool:
    return bool(said.tags & CONTEXT_CODES) or says_too_long(said.message)


def _is_quota(said: ProviderError) -> bool:
    return QUOTA_CODE in said.tags or says_quota(said.message)


def _classify(status: int | None, said: ProviderError) -> tuple[type[LLMError], str]:
    if status in (401,):
        return AuthenticationFailed, "Authentication failed for {model}"
    if status == 403:
        return AuthenticationFailed, "Permission denied for {model}"
    if status == 429:
        if _is_quota(said):
            return QuotaExceeded, "Quota exceeded for {model}"
        return RateLimited, "Rate limited by {model}"
    if status == 402 or (status is not None and status < 500 and _is_quota(said)):
        return QuotaExceeded, "Quota exceeded for {model}"
    if status in (400, 413, 422) and _is_context(said):
        return ContextWindowExceeded, "Context window exceeded for {model}"
    if status == 404:
        return BadRequest, "Model or endpoint not found for {model}"
    if status in (400, 413, 422):
        return BadRequest, "{model} rejected the request"
    if status == 408:
        return ProviderTimeout, "Timed out waiting for {model}"
    if status is not None and status >= 500:
        return LLMError, "Provider error from {model}"
    return LLMError, "Provider call failed for {model}"


def _build(
    status: int | None, said: ProviderError, model: str, *, http: bool, retry_after: float | None = None
) -> LLMError:
    port_error, template = _classify(status, said)
    deterministic = said.validation or says_unsupported(said.message)
    if deterministic and port_error is LLMError and status is not None and status >= 500:
        # A server error whose body is a validation error: the request, not the server, is at fault.
        template = "{model} rejected the request"
    head = template.format(model=model)
    if http and status is not None:
        head += f" (HTTP {status})"
    message = f"{head}: {said.message}" if said.message else head
    hint = retry_after if retry_after is not None else retry_hints.from_message(said.message)
    limit = DETERMINISTIC_RETRIES if deterministic else None
    return port_error(message, status=status, retry_after=hint, retry_limit=limit)


def error_from_response(status: int, headers: Mapping[str, str], body: bytes, model: str) -> LLMError:
    """The port error for an HTTP error response (status >= 400, or an unexpected 3xx)."""
    said = parse_error_body(body)
    return _build(status, said, model, http=True, retry_after=retry_hints.from_headers(headers))


def error_from_event(payload: Any, model: str) -> LLMError:
    """The port error for an error inside a 200 stream (OpenAI ``data: {"error":...}``, Anthropic ``event: error``).

    No HTTP status exists there, so one is inferred from the error's type or
    code (Anthropic's ``overloaded_error`` stands for 529, a server error the
    retry policy treats as transient); unknown in-stream errors count as 500,
    as litellm reports them.
    """
    said = parse_error_body(payload)
    status = _ANTHROPIC_TYPE_STATUS.get(said.type or "") or _OPENAI_CODE_STATUS.get(said.code or "")
    if status is None and _is_context(said):
        status = 400
    return _build(status or 500, said, model, http=False)


def error_from_transport(exc: Exception, model: str, api_base: str, *, streaming: bool) -> LLMError:
    """Map an httpx exception; no HTTP status exists, so none is set (connection failures are transient)."""
    detail = _clean(str(exc)) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        what = "no data" if isinstance(exc, httpx.ReadTimeout) else type(exc).__name__
        return ProviderTimeout(f"Timed out waiting for {model} at {api_base}: {what}")
    if isinstance(exc, httpx.ConnectError):
        return ProviderUnreachable(f"Cannot reach {model} at {api_base}: {detail}")
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.NetworkError)):
        if streaming:
            return ProviderUnreachable(f"Connection to {model} at {api_base} broke mid-response: {detail}")
        return ProviderUnreachable(f"Cannot reach {model} at {api_base}: {detail}")
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol)):
        return BadRequest(f"Invalid API base for {model}: {api_base} ({detail})")
    return LLMError(f"Provider call failed for {model}: {detail}")
