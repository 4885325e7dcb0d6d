"""Model catalog port: which models exist, for resolving --model non-interactively."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from term2.domain.usage import Prices


@dataclass(frozen=True, slots=True)
class ModelInfo:
    model_id: str  # the catalog key, e.g. "gpt-5" or "gemini/gemini-2.5-pro"
    provider: str
    context_window: int | None = None
    supports_reasoning: bool = False
    supports_tools: bool = False
    prices: Prices | None = None  # per token, USD; None when the catalog lists none
    max_output_tokens: int | None = None  # the most one response may be, when the catalog says
    supports_vision: bool = False  # takes images in prompts (litellm's `supports_vision`; config's `images`)


@dataclass(frozen=True, slots=True)
class DeclaredModel:
    """A model the user declares in config.toml because no catalog knows it (local, self-hosted).

    A port type: configuration produces it and every catalog adapter takes it.
    """

    provider: str
    context_window: int | None = None
    supports_reasoning: bool = False
    max_output_tokens: int | None = None  # the most one response may be: what each turn request asks for
    images: bool = False  # the model takes images (config's `images = true`; no catalog can tell for a local one)


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """How requests to one model differ from what OpenAI itself takes, where compatible servers disagree.

    A port type like `DeclaredModel`: configuration (`[models."<id>"]`) produces
    it and the OpenAI-compatible wire reads it. The defaults are what OpenAI
    accepts. ``tool_choice`` is sent with tools when set (llama-cpp-python's
    ``chatml-function-calling`` shows tools to the model only then);
    ``stream_usage`` False leaves ``stream_options`` out (for servers that refuse
    it; those that ignore it cost nothing); ``extra_body`` is merged into every
    request body (sampling, ``cache_prompt``, a server's own switches).
    ``stream`` False asks for whole answers (``"stream": false``), for servers
    that cannot stream tool calls (llama-cpp-python's chatml-function-calling):
    the adapter turns the whole answer into the same events a stream gives.
    """

    tool_choice: str | None = None
    stream_usage: bool = True
    extra_body: tuple[tuple[str, object], ...] = ()  # a tuple, so the value stays hashable and frozen
    stream: bool = True


class ModelCatalog(Protocol):
    def models(self) -> tuple[ModelInfo, ...]: ...

    def lookup(self, model_id: str) -> ModelInfo | None:
        """The model listed under exactly ``model_id``, or None; raises LookupError when it cannot tell cheaply.

        The start-up path resolves the configured model with this before
        anything parses a whole catalog.
        """
        ...

    def routes(self, provider: str) -> bool:
        """True when the provider is certainly routable, decided cheaply (False: not sure)."""
        ...

    def providers(self) -> frozenset[str]:
        """Provider names the LLM adapter can route, for accepting unlisted <provider>/<model>."""
        ...
