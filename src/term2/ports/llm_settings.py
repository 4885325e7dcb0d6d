"""The settings that reach one model, apart from the LLM port that uses them.

A session's configuration options (the model and effort pickers) need the
configured model's settings when `session/new` is answered; the rest of the
port (requests, events, errors) is what a turn needs, and loads with the turn
part (ADR 0052). `term2.ports.llm` re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from term2.domain.usage import Prices
from term2.ports.catalog import RequestOptions


@dataclass(frozen=True, slots=True)
class ProviderSettings:
    """Everything an adapter needs to reach one model; built from configuration."""

    model: str  # "<provider>/<model>" or a bare catalog id
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    effort: str | None = None
    timeout_s: float = 120.0
    connect_timeout_s: float = 10.0  # opening the endpoint's connection (httpx wires; litellm keeps its own)
    context_window: int | None = None
    supports_reasoning: bool = False
    provider: str | None = None  # the catalog's provider name ("openai", "anthropic", "groq", …)
    wire: str = "litellm"  # which adapter serves it: "openai", "anthropic" or "litellm"
    prices: Prices | None = None  # the catalog's, per token (USD): what usage updates are costed at
    max_output_tokens: int | None = None  # the model's limit on one response, when the catalog knows it
    request_options: RequestOptions = field(default_factory=RequestOptions)  # per model, from config.toml
    supports_images: bool = False  # the model takes images: a prompt with one is refused otherwise (ADR 0046)
