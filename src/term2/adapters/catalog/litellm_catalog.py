"""litellm's bundled model catalog, read as JSON without importing litellm.

Importing litellm costs seconds and ~190 MB; parsing the JSON it ships ~100 ms;
finding one entry in it, mapped, a few milliseconds.
`importlib.util.find_spec` locates the package without executing it
(`importlib.resources.files` would import it).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import mmap
import os
from collections.abc import Mapping
from functools import cache

from term2.domain.usage import Prices
from term2.ports.catalog import DeclaredModel, ModelInfo

CATALOG_FILE = "model_prices_and_context_window_backup.json"
PROVIDERS_FILE = "provider_endpoints_support_backup.json"
CHAT_MODES = {"chat", "responses", None}


def _package_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


def _load(name: str) -> dict[str, object]:
    directory = _package_dir()
    if directory is None:
        return {}
    try:
        with open(os.path.join(directory, name), "rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@cache
def _bundled_models() -> tuple[ModelInfo, ...]:
    raw = _load(CATALOG_FILE)
    raw.pop("sample_spec", None)
    raw.pop("fallback_generalizations", None)
    models: list[ModelInfo] = []
    for key, entry in raw.items():
        if isinstance(entry, dict) and "alias_of" in entry:
            entry = raw.get(str(entry["alias_of"]))
        info = _info(key, entry)
        if info is not None:
            models.append(info)
    return tuple(models)


def _info(key: str, entry: object) -> ModelInfo | None:
    """The chat model an entry describes, or None (an embedding model, a malformed entry)."""
    if not isinstance(entry, dict) or entry.get("mode") not in CHAT_MODES:
        return None
    provider = entry.get("litellm_provider")
    if not isinstance(provider, str):
        return None
    return ModelInfo(
        model_id=key,
        provider=provider,
        context_window=_int(entry.get("max_input_tokens")) or _int(entry.get("max_tokens")),
        supports_reasoning=bool(entry.get("supports_reasoning")),
        supports_tools=bool(entry.get("supports_function_calling")),
        prices=_prices(entry),
        max_output_tokens=_int(entry.get("max_output_tokens")),
        supports_vision=bool(entry.get("supports_vision")),
    )


def _mapped_catalog() -> mmap.mmap | None:
    """The bundled catalog (~3.5 MB) mapped read-only: searched in place, never copied.

    A lookup touches only the pages it scans and the entry it decodes, so an
    idle process does not carry the file in its heap.
    """
    directory = _package_dir()
    if directory is None:
        return None
    try:
        with open(os.path.join(directory, CATALOG_FILE), "rb") as handle:
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable or empty
        return None


_TOP_KEY = b'\n    "'  # a top-level key: four spaces, then its quote (nested keys are indented further)


def _has_layout(data: mmap.mmap) -> bool:
    """Whether the file is laid out as `_entry` relies on: pretty-printed, one top-level key a line."""
    return data[:2] == b"{\n" and data.find(_TOP_KEY + b'sample_spec": {') >= 0


class Unsure(LookupError):
    """The catalog cannot tell without parsing all of it."""


@cache
def _entry(key: str, follow: bool = True) -> ModelInfo | None:
    """One entry of the bundled catalog, decoded alone: a millisecond instead of ~100 ms for all of it.

    The file is pretty-printed with each top-level key on a line of its own,
    indented four spaces (checked by `_has_layout`), so a key's absence from
    that layout is certain, and an entry ends where the next top-level key
    starts. An alias is followed once, as the full parse does.
    """
    data = _mapped_catalog()
    if data is None:
        raise Unsure(key)
    with data:
        if not _has_layout(data):
            raise Unsure(key)
        marker = b"\n    " + json.dumps(key).encode() + b": "
        at = data.find(marker)
        if at < 0:
            return None
        start = at + len(marker)
        end = data.find(_TOP_KEY, start)
        text = data[start : end if end >= 0 else len(data)].decode("utf-8", "replace")
    try:
        entry, _ = json.JSONDecoder().raw_decode(text)
    except ValueError as exc:
        raise Unsure(key) from exc
    if isinstance(entry, dict) and "alias_of" in entry:
        return _entry_target(key, str(entry["alias_of"])) if follow else None
    return _info(key, entry)


def _entry_target(key: str, target: str) -> ModelInfo | None:
    aliased = _entry(target, follow=False)
    if aliased is None:
        return None
    return dataclasses.replace(aliased, model_id=key)


def _price(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _prices(entry: dict[str, object]) -> Prices | None:
    given, taken = _price(entry.get("input_cost_per_token")), _price(entry.get("output_cost_per_token"))
    if given is None or taken is None:
        return None
    read = _price(entry.get("cache_read_input_token_cost"))
    return Prices(given, taken, read, _price(entry.get("cache_creation_input_token_cost")))


@cache
def bundled_providers() -> frozenset[str]:
    """Provider names litellm routes, from its small endpoints file plus the catalog's own."""
    data = _load(PROVIDERS_FILE)
    providers = data.get("providers", data)
    names = set(providers) if isinstance(providers, dict) else set()
    return frozenset(names)


def _lists_key(model_id: str) -> bool:
    """Whether the bundled catalog lists ``model_id`` as a chat model, from its one entry; "not sure" is False."""
    try:
        return _entry(model_id) is not None
    except Unsure:
        return False


def _declared_info(model_id: str, declared: DeclaredModel) -> ModelInfo:
    return ModelInfo(
        model_id,
        declared.provider,
        declared.context_window,
        declared.supports_reasoning,
        True,
        max_output_tokens=declared.max_output_tokens,
        supports_vision=declared.images,
    )


class LitellmCatalog:
    """The bundled catalog merged with the models the user declared in config."""

    def __init__(self, declared: Mapping[str, DeclaredModel]) -> None:
        self._declared = declared

    def quickly_accepts(self, model: str, provider: str | None) -> bool:
        """True when `model` is certainly acceptable, decided without parsing the catalog.

        The launcher checks `--model` before it answers `initialize`; the full
        resolution (with metadata) runs later, off that path. False means
        "resolve it properly", not "refused".
        """
        if provider is not None:
            return False
        if model in self._declared:
            return True
        head, slash, rest = model.partition("/")
        if slash and rest:
            return self.routes(head)
        return _lists_key(model)

    def lookup(self, model_id: str) -> ModelInfo | None:
        """The model listed under exactly ``model_id`` (declared first), or None; LookupError when unsure."""
        declared = self._declared.get(model_id)
        return _declared_info(model_id, declared) if declared is not None else _entry(model_id)

    def routes(self, provider: str) -> bool:
        """True when the provider is certainly routable, known without parsing the catalog."""
        return provider in bundled_providers() or any(d.provider == provider for d in self._declared.values())

    def models(self) -> tuple[ModelInfo, ...]:
        return tuple(_declared_info(name, d) for name, d in self._declared.items()) + _bundled_models()

    def providers(self) -> frozenset[str]:
        known = {m.provider for m in _bundled_models()}
        return frozenset(known | bundled_providers() | {d.provider for d in self._declared.values()})
