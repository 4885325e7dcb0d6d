"""Resolve `--model` against the catalog without ever asking the user.

`term2 acp` speaks the protocol on stdin, so an ambiguous pattern must be
refused with the candidates listed, never answered interactively.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from term2.ports.catalog import ModelCatalog, ModelInfo

CANDIDATES_SHOWN = 20


class ModelResolutionError(Exception):
    def __init__(self, message: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    model: str  # the string handed to the provider adapter
    provider: str
    info: ModelInfo | None  # None for a provider/model no catalog lists


def resolve_model(
    pattern: str, provider: str | None, models: tuple[ModelInfo, ...], providers: Collection[str]
) -> ResolvedModel:
    if provider and not pattern.startswith(provider + "/"):
        by_key = {m.model_id: m for m in models}
        exact = by_key.get(pattern) or by_key.get(f"{provider}/{pattern}")
        if exact is not None and _same_provider(exact.provider, provider):
            return ResolvedModel(exact.model_id if "/" in exact.model_id else f"{provider}/{pattern}", provider, exact)
        return _qualified(f"{provider}/{pattern}", models, providers)
    for info in models:
        if info.model_id == pattern:
            return ResolvedModel(pattern, info.provider, info)
    if "/" in pattern:
        return _qualified(pattern, models, providers)
    needle = pattern.lower()
    matches = sorted({m.model_id for m in models if needle in m.model_id.lower()})
    if len(matches) == 1:  # even one match is a guess: the launcher takes exact names only
        raise ModelResolutionError(
            f"no model is named {pattern!r}; did you mean {matches[0]!r}? (use the exact id)", (matches[0],)
        )
    if not matches:
        raise ModelResolutionError(
            f"no model matches {pattern!r}; use an exact model id or <provider>/<model> (see `term2 models`)"
        )
    raise ModelResolutionError(
        f"model {pattern!r} is ambiguous ({len(matches)} matches); use an exact id or <provider>/<model>",
        tuple(matches[:CANDIDATES_SHOWN]),
    )


def resolve_quickly(pattern: str, provider: str | None, catalog: ModelCatalog) -> ResolvedModel | None:
    """The same answer as `resolve_model` for an exact id or `<provider>/<model>`, without parsing the catalog.

    None when it cannot be sure (a pattern to search, a catalog it cannot read
    entry by entry): the caller then resolves the slow way.
    """
    try:
        if provider:
            return None
        info = catalog.lookup(pattern)
        if info is not None:
            return ResolvedModel(pattern, info.provider, info)
        head, slash, rest = pattern.partition("/")
        if not (slash and rest):
            return None
        listed = catalog.lookup(rest)
    except LookupError:
        return None
    if listed is not None and _same_provider(listed.provider, head):
        return ResolvedModel(pattern, head, listed)
    if listed is None and catalog.routes(head):
        return ResolvedModel(pattern, head, None)
    return None


def _qualified(name: str, models: tuple[ModelInfo, ...], providers: Collection[str]) -> ResolvedModel:
    provider, _, rest = name.partition("/")
    if not rest:
        raise ModelResolutionError(f"model {name!r} is missing its name after the provider")
    for info in models:
        if info.model_id in (name, rest) and _same_provider(info.provider, provider):
            return ResolvedModel(name, provider, info)
    if provider not in providers:
        raise ModelResolutionError(f"unknown provider {provider!r} in model {name!r}")
    return ResolvedModel(name, provider, None)


def _same_provider(catalog_provider: str, provider: str) -> bool:
    """litellm names some providers by family (`vertex_ai-language-models`); a bare prefix is not enough."""
    return catalog_provider == provider or catalog_provider.startswith(provider + "-")
