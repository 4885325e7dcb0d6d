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


@dataclass(frozen=True, slots=True)
class DeclaredModel:
    """A model the user declares in config.toml because no catalog knows it (local, self-hosted).

    A port type: configuration produces it and every catalog adapter takes it.
    """

    provider: str
    context_window: int | None = None
    supports_reasoning: bool = False


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
