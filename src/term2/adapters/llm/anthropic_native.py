"""`LLMProvider` speaking Anthropic Messages directly over httpx, without litellm.

Why: litellm costs about 4 s and 190 MB to import (ADR 0016); Anthropic's wire
is small and stable. The port's rules hold as for litellm: no hidden retries,
errors mapped at the boundary (`http_errors`), the stream closed in a
`finally` (`native_http`). The translations live in `anthropic_wire` (the
request) and `anthropic_stream` (its events).

The endpoint is ``{api_base}/v1/messages`` (default base
``https://api.anthropic.com``); a base that already ends in ``/v1`` gets
``/messages`` only, so both spellings of a proxy's address work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx

from term2.adapters.llm.anthropic_stream import AnthropicStream
from term2.adapters.llm.anthropic_wire import messages_body
from term2.adapters.llm.native_http import SSEClient, stream_events, wire_model
from term2.ports.llm import CompletionRequest, LLMEvent, ProviderSettings

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_ANTHROPIC_BASE", "AnthropicMessagesProvider"]

DEFAULT_ANTHROPIC_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"


def messages_url(api_base: str) -> str:
    base = api_base.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


class AnthropicMessagesProvider:
    """Streams ``POST {api_base}/v1/messages``; ``provider`` is the model-id prefix to drop ("anthropic/claude-...")."""

    def __init__(
        self,
        settings: ProviderSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        provider: str | None = "anthropic",
    ) -> None:
        self._settings = settings
        self._base = (settings.api_base or DEFAULT_ANTHROPIC_BASE).rstrip("/")
        self._model = wire_model(settings.model, provider)
        self._http = SSEClient(settings, self._base, transport)

    @property
    def settings(self) -> ProviderSettings:
        return self._settings

    def _headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if self._settings.api_key:
            headers["x-api-key"] = self._settings.api_key
        return headers

    def body(self, request: CompletionRequest) -> dict[str, Any]:
        s = self._settings
        return messages_body(
            request, self._model, effort=s.effort, reasoning=s.supports_reasoning, max_output=s.max_output_tokens
        )

    async def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        """Yield deltas (and reasoning blocks) as they arrive, then tool calls, usage and exactly one Finished.

        An async generator, so the body is built and every error raised while iterating, as the port expects.
        """
        state = AnthropicStream(self._settings.model, self._settings.context_window)
        url = messages_url(self._base)
        model = self._settings.model
        events = stream_events(self._http, url, self._headers(), self.body(request), state, model)
        async with aclosing(events):
            async for item in events:
                yield item

    async def prepare(self) -> None:
        """Build the HTTP client (httpcore, the CA bundle) before the first request needs it."""
        await self._http.prepare()

    async def keep_connected(self) -> None:
        """Keep the endpoint's connection open ahead of the next request (`SSEClient.keep_connected`)."""
        await self._http.keep_connected(messages_url(self._base))

    async def aclose(self) -> None:
        """Close the HTTP client; idempotent, and a no-op before the first request."""
        await self._http.aclose()
