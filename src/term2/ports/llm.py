"""LLM provider port: stream one completion, with tools, as a sequence of events.

Adapters translate their library's exceptions into the LLMError family below at
their boundary, so use cases never see a provider SDK type. Closing the event
iterator (or cancelling the task consuming it) must close the underlying HTTP
stream: a provider that keeps generating after the user cancelled keeps billing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from term2.domain.retry import is_transient
from term2.domain.transcript import ChatMessage, ReasoningBlock, ToolCallRequest
from term2.domain.turn import FinishReason
from term2.ports.catalog import RequestOptions
from term2.ports.llm_settings import ProviderSettings

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ChatMessage",
    "CompletionRequest",
    "ContextWindowExceeded",
    "Finished",
    "IncompleteResponse",
    "LLMError",
    "LLMEvent",
    "LLMProvider",
    "PromptCount",
    "PromptCounter",
    "ProviderSettings",
    "ProviderTimeout",
    "ProviderUnreachable",
    "QuotaExceeded",
    "RateLimited",
    "ReasoningBlock",
    "ReasoningReady",
    "RequestOptions",
    "TextDelta",
    "ThoughtDelta",
    "ToolCallReady",
    "ToolCallRequest",
    "ToolSpec",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, object]


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """One model request.

    ``cache_key`` is stable for a session and differs between sessions: adapters
    whose provider routes prompt caches by key (OpenAI's ``prompt_cache_key``)
    send it; the others ignore it.
    """

    messages: tuple[ChatMessage, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None
    cache_key: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ThoughtDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallReady:
    """A tool call whose fragments have all arrived and been reassembled."""

    call: ToolCallRequest


@dataclass(frozen=True, slots=True)
class ReasoningReady:
    """A complete reasoning block (its text already streamed as ThoughtDeltas) to keep for the next request."""

    block: ReasoningBlock


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one response as the provider counted them.

    ``input_tokens`` is the whole prompt, cached parts included (adapters add
    Anthropic's separately reported cache reads and writes back in), so that
    it measures how full the context window is.
    """

    input_tokens: int
    output_tokens: int
    context_window: int | None = None
    cached_input_tokens: int = 0  # of input_tokens, read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens, written to the cache (Anthropic bills these higher)
    reasoning_tokens: int = 0  # of output_tokens, spent thinking


@dataclass(frozen=True, slots=True)
class Finished:
    reason: FinishReason


LLMEvent = TextDelta | ThoughtDelta | ToolCallReady | ReasoningReady | Usage | Finished


class LLMError(Exception):
    """Base of provider failures; `str(err)` is a message fit to show the user.

    The attributes are what the agent loop's retry policy reads (`domain/retry.py`):
    `status` is the provider's HTTP status when there was one, `retry_after` the
    delay (seconds) the provider asked for, from its headers or its message.
    Whether waiting can cure the failure is `transient`, decided by the kind and
    the status, so every adapter gets the same answer for the same failure.
    `retry_limit` caps the retries of a failure that is transient by its status
    but deterministic by its body (a 500 carrying a validation error): sending
    the same request again can only fail the same way, but one retry costs
    little against a server that really did fail once.
    """

    kind = "provider_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retry_limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.retry_limit = retry_limit

    @property
    def transient(self) -> bool:
        return is_transient(self.kind, self.status)


class AuthenticationFailed(LLMError):
    kind = "authentication"


class RateLimited(LLMError):
    kind = "rate_limit"


class QuotaExceeded(LLMError):
    """A 429 that waiting does not cure: the account is out of credit (`insufficient_quota`)."""

    kind = "quota"


class ProviderUnreachable(LLMError):
    kind = "connection"


class ProviderTimeout(LLMError):
    kind = "timeout"


class ContextWindowExceeded(LLMError):
    kind = "context_window"


class BadRequest(LLMError):
    kind = "bad_request"


class IncompleteResponse(LLMError):
    """The stream ended, cleanly, before the answer was whole; ``empty`` when not one event came.

    Some servers answer a prompt too long for their context this way when
    streaming (llama-cpp-python: 200 and an empty event stream, the overflow only
    in its log), so the agent loop treats one on a request near the window as a
    probable overflow.
    """

    kind = "incomplete"

    def __init__(self, message: str, *, empty: bool, tool_choice: str | None = None) -> None:
        super().__init__(message)
        self.empty = empty
        self.tool_choice = tool_choice  # what the request asked for, when it asked: a known cause of empty answers


class LLMProvider(Protocol):
    def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        """Yield events until exactly one Finished, or raise an LLMError."""
        ...

    async def prepare(self) -> None:
        """Load what the first request needs (a library, an HTTP client) off the turn; safe to call again.

        Called in the background once a session exists, so the first prompt
        does not pay for it; a request made meanwhile waits for it rather than
        doing the work twice.
        """
        ...

    async def keep_connected(self) -> None:
        """Keep a connection to the model's endpoint open, no request sent on it, for the next request to take.

        Runs while the process idles (it returns by itself after a while, or at
        once where there is nothing to open), in the background once a session
        exists, so that the first request does not pay the TCP and TLS
        handshakes. Never raises: a failure leaves the request to dial as usual.
        """
        ...

    async def aclose(self) -> None:
        """Release background workers and HTTP clients; called once at shutdown."""
        ...


@dataclass(frozen=True, slots=True)
class PromptCount:
    """A server's own count for a request it was shown, asked for because its answers carry none.

    ``whole``: the count of the whole request as the model sees it (its chat
    template, and the tools when it shows them), from a non-streamed answer's
    usage. Otherwise ``tokens`` is only the request's text (system prompt and
    messages) through the server's tokenizer (a tokenize endpoint): it teaches
    the bytes-a-token ratio, not whether the tools are shown.
    """

    tokens: int
    whole: bool


@runtime_checkable
class PromptCounter(Protocol):
    async def count_prompt(self, request: CompletionRequest) -> PromptCount | None:
        """The server's count for ``request``, or None when it cannot tell; never raises an LLMError."""
        ...
