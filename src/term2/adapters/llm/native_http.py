"""The HTTP half shared by the native adapters: one POST, its SSE events, and its closing.

Why one place: the rules that matter most are the same for every wire and easy
to get subtly wrong. The response is closed in a `finally` that is shielded
from cancellation, so a cancelled turn (or an iterator closed early) hangs up
on the provider instead of letting it generate, and bill, on. Every httpx
failure and every HTTP error status is mapped to the port's errors here
(`http_errors`), so the wire modules only translate JSON. No retries happen
here: the agent loop owns retry policy.
"""

from __future__ import annotations

import os
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from typing import Any, Protocol

import anyio
import anyio.to_thread
import httpcore
import httpx

from term2.adapters.llm.http_errors import error_from_response, error_from_transport
from term2.adapters.llm.kept_connection import KeepingBackend
from term2.adapters.llm.mended_events import StreamMender
from term2.adapters.llm.sse import WHOLE_EVENT, SSEDecoder, SSEEvent, event_json
from term2.ports.llm import IncompleteResponse, LLMError, LLMEvent, ProviderSettings
from term2.support.deferred_log import get_logger

__all__ = ["SSEClient", "WireStream", "event_json", "stream_events", "timeout_for", "tls_for", "wire_model"]

log = get_logger("term2.llm")

_USER_AGENT = "term2"
_MAX_ERROR_BODY = 64 * 1024
_MAX_WHOLE_BODY = 64 * 1024 * 1024  # a non-streamed answer (`stream = false`), read whole
_CLOSE_GRACE_S = 5.0
_DRAIN_S = 1.0
# A connection opened ahead is handed to a request only while younger than this (servers keep idle
# connections for 60 s or more: nginx 75, most providers longer); one is reopened every _REOPEN_S while
# the process is idle, for at most _KEEP_WINDOW_S after the last request or session.
_KEPT_MAX_AGE_S = 30.0
_REOPEN_S = 15.0
_KEEP_WINDOW_S = 300.0
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy")


def timeout_for(seconds: float, connect: float = 10.0) -> httpx.Timeout:
    """``timeout_s`` bounds every wait (the first byte included: it is a read); connecting gets ``connect``
    (`connect_timeout`), never more than the request's own bound: a server that is down fails fast."""
    return httpx.Timeout(connect=min(connect, seconds), read=seconds, write=seconds, pool=seconds)


def tls_for(api_base: str, env: Mapping[str, str]) -> ssl.SSLContext | bool:
    """What the client verifies TLS with: httpx's default (the CA bundle) unless nothing can use TLS.

    Loading the CA bundle is ~50 ms of a cold first reply. A plain-http base
    (a local server: Ollama, vLLM, LM Studio) with no proxy variable set, and
    redirects never followed, makes no TLS connection; it gets a context that
    verifies as strictly but trusts no authority, so a TLS connection that did
    happen would fail its handshake rather than go unverified.
    """
    if not api_base.lower().startswith("http://"):
        return True
    if any(value for key, value in env.items() if key.lower() in ("http_proxy", "all_proxy")):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, hostname checked, no trust anchors


def wire_model(model: str, provider: str | None) -> str:
    """The model id the provider knows: ``"openai/gpt-5"`` → ``"gpt-5"`` when ``provider`` is "openai".

    Only a first segment equal to ``provider`` is dropped, so an OpenRouter id
    keeps its vendor: ``"openrouter/anthropic/claude"`` → ``"anthropic/claude"``.
    """
    if provider:
        head, sep, rest = model.partition("/")
        if sep and head == provider and rest:
            return rest
    return model


async def drain(events: AsyncIterator[SSEEvent], seconds: float = _DRAIN_S) -> None:
    """After the terminal event, read the (normally empty) rest of the body so httpx can reuse the connection.

    Bounded, and failures ignored: the answer is already whole, so a server that
    lingers after ``[DONE]`` or ``message_stop`` costs at most ``seconds``.
    """
    with anyio.move_on_after(seconds):
        try:
            async for _ in events:
                pass
        except LLMError:
            pass


class WireStream(Protocol):
    """A wire's stream state (`OpenAIStream`, `AnthropicStream`) as `stream_events` drives it."""

    @property
    def ended(self) -> bool:
        """The provider's terminal event arrived: nothing more is read but the drain."""
        ...

    @property
    def whole(self) -> bool:
        """What arrived is a whole answer (some servers omit the terminal event after it)."""
        ...

    def feed_sse(self, event: SSEEvent) -> list[LLMEvent]: ...

    def finish_events(self) -> list[LLMEvent]: ...


async def stream_events(
    http: SSEClient, url: str, headers: Mapping[str, str], body: dict[str, Any], state: WireStream, model: str
) -> AsyncGenerator[LLMEvent, None]:
    """One native streaming request, the same for every wire: deltas as ``state`` folds them, then its closing events.

    The events iterator is closed on every exit (`aclosing`), so a consumer that
    stops early or is cancelled hangs up on the provider; after the terminal
    event the rest of the body is drained so the connection can be reused; a
    stream that ends before the answer is whole is a provider error, never a
    silently truncated reply.
    """
    seen = 0
    mender = StreamMender()  # no lone surrogate leaves the adapter; a pair split across deltas is joined
    async with aclosing(http.events(url, headers, body)) as events:
        async for event in events:
            seen += 1
            for item in state.feed_sse(event):
                for mended in mender.feed(item):
                    yield mended
            if state.ended:
                break
        if state.ended:
            await drain(events)
    if not state.whole:
        if not seen:
            choice = body.get("tool_choice")
            raise IncompleteResponse(
                f"Provider error from {model}: the server sent an empty answer. It may have failed (check its log), "
                "or the prompt may be too long for its context (declare the model's context_window in config.toml)",
                empty=True,
                tool_choice=choice if isinstance(choice, str) else None,
            )
        raise IncompleteResponse(
            f"Provider error from {model}: the stream ended before the response was complete", empty=False
        )
    for item in state.finish_events():
        for mended in mender.feed(item):
            yield mended


class SSEClient:
    """An httpx.AsyncClient, created on first use, that POSTs JSON and yields the response's SSE events."""

    def __init__(self, settings: ProviderSettings, api_base: str, transport: httpx.AsyncBaseTransport | None) -> None:
        self._model = settings.model
        self._api_base = api_base
        self._timeout = timeout_for(settings.timeout_s, settings.connect_timeout_s)
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._making: anyio.Lock | None = None  # made in the event loop, on first use
        self._keeping: KeepingBackend | None = None
        self._tls: ssl.SSLContext | None = None  # the pool's, for a connection opened ahead
        self._opening: anyio.Event | None = None  # set while a connection is being opened ahead
        self._last_used = time.monotonic()

    def _new_client(self) -> httpx.AsyncClient:
        # Building one loads httpcore and, for https, the CA bundle (~0.1 s): done in a worker thread.
        verify = tls_for(self._api_base, os.environ)
        return httpx.AsyncClient(
            verify=verify,
            transport=self._transport if self._transport is not None else self._keeping_transport(verify),
            timeout=self._timeout,
            follow_redirects=False,
            headers={"user-agent": _USER_AGENT},
            trust_env=True,  # honour HTTPS_PROXY / SSL_CERT_FILE like the SDKs do
        )

    def _keeping_transport(self, verify: ssl.SSLContext | bool) -> httpx.AsyncHTTPTransport | None:
        """httpx's own transport (same TLS, limits, environment) whose pool can take a connection opened
        ahead (`kept_connection`); None, and httpx's plain default, where no connection is opened ahead:
        through a proxy (the pre-dial would bypass it) or an httpx whose pool is not the one known here."""
        if any(value for key, value in os.environ.items() if key.lower() in _PROXY_VARS):
            return None
        transport = httpx.AsyncHTTPTransport(verify=verify, trust_env=True)
        pool = getattr(transport, "_pool", None)
        if type(pool) is not httpcore.AsyncConnectionPool:
            return None
        backend = getattr(pool, "_network_backend", None)
        tls = getattr(pool, "_ssl_context", None)
        if not isinstance(backend, httpcore.AsyncNetworkBackend) or not isinstance(tls, ssl.SSLContext):
            return None
        self._keeping = KeepingBackend(backend, _KEPT_MAX_AGE_S)
        self._tls = tls
        pool._network_backend = self._keeping
        return transport

    async def prepare(self) -> None:
        await self._get_client()

    async def keep_connected(self, url: str) -> None:
        """Keep a connection to ``url``'s endpoint open, no request sent on it, for the next request to take.

        Opened now, and again while the process stays idle (a kept connection
        ages out before a server's keep-alive would close it), for up to
        `_KEEP_WINDOW_S` after the last request. Every failure is silent: the
        real request dials as it would have.
        """
        try:
            await self._get_client()
        except LLMError:
            return
        target = httpx.URL(url)
        if self._keeping is None or target.scheme not in ("http", "https") or not target.host:
            return
        # The host as httpcore dials it (IDNA-encoded, IPv6 without brackets), so the pool's dial finds it.
        host, port = target.raw_host.decode("ascii"), target.port or (443 if target.scheme == "https" else 80)
        tls = self._tls if target.scheme == "https" else None
        self._last_used = time.monotonic()
        while time.monotonic() - self._last_used < _KEEP_WINDOW_S:
            if not self._keeping.holds(host, port, younger_than=_REOPEN_S):
                await self._open_ahead(self._keeping, host, port, tls)
            await anyio.sleep(_REOPEN_S)

    async def _open_ahead(self, keeping: KeepingBackend, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        opening = self._opening = anyio.Event()
        try:
            await keeping.open(host, port, tls, timeout=self._timeout.connect)
        except Exception as exc:  # the real request dials and reports its own failure
            log.debug("connection opened ahead failed", model=self._model, error=str(exc))
        finally:
            self._opening = None
            opening.set()

    async def _get_client(self) -> httpx.AsyncClient:
        """The client, built once; a request made while `prepare` builds it waits for that one."""
        if self._client is not None:
            return self._client
        if self._making is None:
            self._making = anyio.Lock()
        async with self._making:
            if self._client is None:
                try:
                    self._client = await anyio.to_thread.run_sync(self._new_client)
                except (OSError, ValueError) as exc:  # e.g. an SSL_CERT_FILE that cannot be read or parsed
                    raise LLMError(f"Provider error from {self._model}: cannot set up TLS: {exc}") from exc
        return self._client

    async def events(
        self, url: str, headers: Mapping[str, str], body: dict[str, Any]
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST ``body`` and yield its events; raise the port's errors; always close the response."""
        self._last_used = time.monotonic()
        if self._opening is not None:  # a connection being opened ahead is the one this request should take
            await self._opening.wait()
        try:
            client = await self._get_client()
            request = client.build_request("POST", url, headers=dict(headers), json=body)
            response = await client.send(request, stream=True)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise error_from_transport(exc, self._model, self._api_base, streaming=False) from exc
        try:
            if response.status_code >= 300:
                raw = await self._error_body(response)
                # The whole body goes to the log file; the user's message (the turn's error, said once) keeps
                # only the detail that matters.
                log.info(
                    "provider error response",
                    model=self._model,
                    status=response.status_code,
                    body=raw.decode("utf-8", "replace"),
                )
                raise error_from_response(response.status_code, response.headers, raw, self._model)
            if response.headers.get("content-type", "").startswith("application/json"):
                # A whole answer (a request sent with "stream": false): one event, that the wire folds at once.
                yield SSEEvent(WHOLE_EVENT, (await self._whole_body(response)).decode("utf-8", "replace"))
                return
            decoder = SSEDecoder()
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    yield event
            for event in decoder.flush():
                yield event
        except httpx.HTTPError as exc:
            raise error_from_transport(exc, self._model, self._api_base, streaming=True) from exc
        finally:
            # Shielded: inside a cancelled scope an unshielded await would be cancelled
            # before the socket is closed, and the provider would keep generating.
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_GRACE_S):
                await response.aclose()
            self._last_used = time.monotonic()

    async def whole(self, url: str, headers: Mapping[str, str], body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` for a JSON answer (not a stream); the port's errors as for `events`."""
        async with aclosing(self.events(url, headers, body)) as events:
            async for event in events:
                if event.event == WHOLE_EVENT:
                    payload = event_json(event.data, self._model)
                    if isinstance(payload, dict):
                        return payload
        raise LLMError(f"Provider error from {self._model}: {url} did not answer with JSON")

    async def _whole_body(self, response: httpx.Response) -> bytes:
        """A non-streamed answer, bounded: a server that sends more than any answer holds is an error."""
        out = bytearray()
        async for chunk in response.aiter_bytes():
            out += chunk
            if len(out) > _MAX_WHOLE_BODY:
                raise LLMError(f"Provider error from {self._model}: an answer over {_MAX_WHOLE_BODY:,} bytes")
        return bytes(out)

    @staticmethod
    async def _error_body(response: httpx.Response) -> bytes:
        """Up to 64 KiB of the error body; a body cut short still leaves the status to report."""
        out = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                out += chunk
                if len(out) >= _MAX_ERROR_BODY:
                    break
        except httpx.HTTPError:
            pass
        return bytes(out[:_MAX_ERROR_BODY])

    async def aclose(self) -> None:
        """Close the client if one was created; safe to call twice and before any request."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        if self._keeping is not None:
            await self._keeping.aclose()
