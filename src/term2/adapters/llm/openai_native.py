"""`LLMProvider` speaking OpenAI Chat Completions directly over httpx, without litellm.

Why: litellm costs about 4 s and 190 MB to import, which the common case (OpenAI
or an OpenAI-compatible server: vLLM, llama.cpp, Ollama, OpenRouter, ...) does
not need (ADR 0016). The port's rules hold as for litellm: no hidden retries,
errors mapped at the boundary (`http_errors`), the stream closed in a `finally`
(`native_http`).

The endpoint is ``{api_base}/chat/completions``. The default base is
``https://api.openai.com/v1``; a configured base is used as given, with no
version path added, because compatible servers mount the API in different
places (``http://localhost:8000/v1``, ``https://openrouter.ai/api/v1``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace

import httpx

from term2.adapters.llm.native_http import SSEClient, stream_events, wire_model
from term2.adapters.llm.openai_wire import OpenAIStream, chat_body
from term2.ports.llm import CompletionRequest, LLMError, LLMEvent, PromptCount, ProviderSettings
from term2.support.deferred_log import get_logger

__all__ = ["DEFAULT_OPENAI_BASE", "OpenAIChatProvider"]

DEFAULT_OPENAI_BASE = "https://api.openai.com/v1"
log = get_logger("term2.llm")


class OpenAIChatProvider:
    """Streams ``POST {api_base}/chat/completions``; ``provider`` is the model-id prefix to drop ("openai/gpt-5")."""

    def __init__(
        self,
        settings: ProviderSettings,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        provider: str | None = "openai",
    ) -> None:
        self._settings = settings
        self._base = (settings.api_base or DEFAULT_OPENAI_BASE).rstrip("/")
        self._model = wire_model(settings.model, provider)
        self._http = SSEClient(settings, self._base, transport)

    @property
    def settings(self) -> ProviderSettings:
        return self._settings

    def _headers(self) -> dict[str, str]:
        streamed = self._settings.request_options.stream
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream" if streamed else "application/json",
        }
        if self._settings.api_key:
            headers["authorization"] = f"Bearer {self._settings.api_key}"
        return headers

    def body(self, request: CompletionRequest) -> dict[str, object]:
        s = self._settings
        return chat_body(
            request, self._model, effort=s.effort, reasoning=s.supports_reasoning, options=s.request_options
        )

    async def stream(self, request: CompletionRequest) -> AsyncIterator[LLMEvent]:
        """Yield deltas as they arrive, then tool calls, usage and exactly one Finished.

        An async generator, so the body is built and every error raised while iterating, as the port expects.
        """
        state = OpenAIStream(self._settings.model, self._settings.context_window)
        url = f"{self._base}/chat/completions"
        model = self._settings.model
        events = stream_events(self._http, url, self._headers(), self.body(request), state, model)
        async with aclosing(events):
            async for item in events:
                yield item

    async def count_prompt(self, request: CompletionRequest) -> PromptCount | None:
        """The server's count for ``request``, for servers whose streams carry no usage (llama-cpp-python).

        First the same request, not streamed, with ``max_tokens`` 1: its ``usage`` is the count of the
        whole prompt as the model sees it (a local server's prefix cache then makes the next real request
        cheap). Failing that, the request's text through a tokenize endpoint at the server's root:
        llama-cpp-python's ``/extras/tokenize`` (``{"input": ...}``), llama.cpp's ``/tokenize``
        (``{"content": ...}``). Any failure is None: a count is a refinement, never a reason to fail a turn.
        """
        s = self._settings
        options = replace(s.request_options, stream=False)
        body = chat_body(replace(request, max_tokens=1), self._model, options=options)
        headers = {**self._headers(), "accept": "application/json"}
        try:
            payload = await self._http.whole(f"{self._base}/chat/completions", headers, body)
            usage = payload.get("usage")
            prompt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
            if isinstance(prompt, int) and not isinstance(prompt, bool) and prompt > 0:
                return PromptCount(prompt, whole=True)
        except LLMError as exc:
            log.info("no count from a whole answer", model=s.model, error=str(exc))
        text = "\n".join(m.content for m in request.messages)
        root = self._base.removesuffix("/v1")
        for path, key in (("/extras/tokenize", "input"), ("/tokenize", "content")):
            try:
                tokens = (await self._http.whole(root + path, headers, {key: text})).get("tokens")
            except LLMError:
                continue
            if isinstance(tokens, list) and tokens:
                return PromptCount(len(tokens), whole=False)
        return None

    async def prepare(self) -> None:
        """Build the HTTP client (httpcore, the CA bundle) before the first request needs it."""
        await self._http.prepare()

    async def keep_connected(self) -> None:
        """Keep the endpoint's connection open ahead of the next request (`SSEClient.keep_connected`)."""
        await self._http.keep_connected(f"{self._base}/chat/completions")

    async def aclose(self) -> None:
        """Close the HTTP client; idempotent, and a no-op before the first request."""
        await self._http.aclose()
