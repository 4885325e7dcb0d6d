"""Keys in one JSON file of mode 0600, in a folder of mode 0700, reached through no symlink.

The file holds secrets worth more than anything else term2 writes, so every
step is done on descriptors: the folder is opened `O_NOFOLLOW|O_DIRECTORY`
and checked to be ours, the file is created `O_EXCL` at 0600 beside the old
one and renamed over it (a rename replaces a planted link, never follows
it), and a read opens `O_NOFOLLOW` and refuses a file another user owns or
could read. A folder or file that fails these checks is an error, never
skipped silently: fail closed, with the fix named.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

from term2.ports.credentials import KeyStoreError

FILE_NAME = "credentials.json"
MAX_BYTES = 64 * 1024  # a handful of keys; anything larger is not ours


def key_folder(env: Mapping[str, str]) -> Path:
    """term2's config folder (`$XDG_CONFIG_HOME/term2`, else `~/.config/term2`), whatever TERM2_CONFIG names."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return Path(base) / "term2"


class FileKeyStore:
    def __init__(self, folder: Path) -> None:
        self._folder = folder

    @property
    def path(self) -> Path:
        return self._folder / FILE_NAME

    def load(self) -> dict[str, str]:
        try:
            with self._opened_folder(create=False) as folder:
                return self._read(folder)
        except FileNotFoundError:
            return {}

    def save(self, variable: str, key: str) -> None:
        with self._opened_folder(create=True) as folder:
            keys = self._read(folder)
            keys[variable] = key
            self._write(folder, keys)

    def remove(self, variables: Collection[str]) -> list[str]:
        try:
            with self._opened_folder(create=False) as folder:
                keys = self._read(folder)
                gone = sorted(v for v in variables if v in keys)
                if gone:
                    self._write(folder, {k: v for k, v in keys.items() if k not in gone})
                return gone
        except FileNotFoundError:
            return []

    @contextlib.contextmanager
    def _opened_folder(self, *, create: bool) -> Iterator[int]:
        if create:
            self._folder.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(self._folder, 0o700)
        try:
            fd = os.open(self._folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except NotADirectoryError as exc:
            raise KeyStoreError(f"{self._folder} is not a folder (a symlink is refused): remove it") from exc
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                raise
            reason = f"{self._folder}: {exc.strerror} (a symlink is refused)"
            raise KeyStoreError(f"{reason}: make it a folder of yours") from exc
        try:
            info = os.fstat(fd)
            if info.st_uid != os.geteuid():
                raise KeyStoreError(f"{self._folder} belongs to another user: make it yours, mode 0700")
            if stat.S_IMODE(info.st_mode) != 0o700:
                os.fchmod(fd, 0o700)  # ours: other users need nothing in it
            yield fd
        finally:
            os.close(fd)

    def _read(self, folder: int) -> dict[str, str]:
        try:
            fd = os.open(FILE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            reason = f"{self.path}: {exc.strerror} (a symlink is refused)"
            raise KeyStoreError(f"{reason}: remove it and log in again") from exc
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                raise KeyStoreError(f"{self.path} is not a file of yours: remove it and log in again")
            if stat.S_IMODE(info.st_mode) & 0o077:
                raise KeyStoreError(f"{self.path} can be read by others: chmod 600 it, and replace its keys")
            data = os.read(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
        try:
            parsed = json.loads(data) if len(data) <= MAX_BYTES else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise KeyStoreError(f"{self.path} is not term2's key file: remove it and log in again")
        return {str(k): v for k, v in parsed.items()}

    def _write(self, folder: int, keys: dict[str, str]) -> None:
        temporary = f".{FILE_NAME}.{secrets.token_hex(8)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600, dir_fd=folder)
        try:
            try:
                os.fchmod(fd, 0o600)  # whatever the umask
                body = json.dumps(keys, indent=1, sort_keys=True).encode() + b"\n"
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temporary, FILE_NAME, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            raise
