"""The environment term2 reads: the process's own, with keys `term2 login` stored where it has none (ADR 0047)."""

from __future__ import annotations

from collections.abc import Mapping

from term2.adapters.credentials.file_keys import FileKeyStore, key_folder
from term2.app.stored_keys import with_stored_keys


def key_store(env: Mapping[str, str]) -> FileKeyStore:
    return FileKeyStore(key_folder(env))


def user_env(env: Mapping[str, str]) -> dict[str, str]:
    return with_stored_keys(env, key_store(env))
