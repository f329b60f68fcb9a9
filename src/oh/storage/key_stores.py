"""Where the key store lives, and the one place its backend is chosen (docs/keys.md).

On one machine it is ``keys.db`` in the keys directory (``oh.storage.sqlite.keys``); for many
servers it is a PostgreSQL database every server shares (``OH_KEYS_URL``,
``oh.storage.postgres.keys``). Everything above asks a ``KeyStorePlace`` whether the store
exists and opens it, or the purge worker's shredder on it, without knowing which it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from oh.errors import InvalidArgument, NotFound
from oh.keys import KeyShredding, KeyStore
from oh.storage.sqlite.keys import KEY_STORE_FILE, KeyShredder, SqliteKeyStore
from oh.storage.urls import is_postgres_url, masked_url

__all__ = ["KeyStorePlace", "key_store_place"]


class KeyStorePlace(Protocol):
    """A key store's location: what ``oh.config`` needs to open it."""

    @property
    def where(self) -> str:
        """As Oh shows it: a file's absolute path, a URL with its password masked."""
        ...

    @property
    def shared(self) -> bool:
        """Whether servers on other machines share it (a database, not a file)."""
        ...

    def exists(self) -> bool: ...

    def open(self) -> KeyStore:
        """The key store, created if it is missing."""
        ...

    def open_existing(self) -> KeyStore:
        """The key store; ``not_found`` when there is none."""
        ...

    def shredder(self) -> KeyShredding | None:
        """The purge worker's destroy-only credential; None when there is no key store."""
        ...


@dataclass(frozen=True, slots=True)
class FileKeyStore:
    """``keys.db`` in the keys directory."""

    path: Path

    @property
    def where(self) -> str:
        return str(self.path.resolve())

    @property
    def shared(self) -> bool:
        return False

    def exists(self) -> bool:
        return self.path.is_file()

    def open(self) -> SqliteKeyStore:
        try:
            return SqliteKeyStore(self.path)
        except OSError as exc:  # the keys directory cannot be made: bad input, not a crash
            raise InvalidArgument(
                f"cannot create the key store {self.path}: {exc.strerror}"
            ) from exc

    def open_existing(self) -> SqliteKeyStore:
        return SqliteKeyStore(self.path, create=False)

    def shredder(self) -> KeyShredder | None:
        return KeyShredder(self.path) if self.exists() else None


@dataclass(frozen=True, slots=True)
class PostgresKeyStorePlace:
    """A PostgreSQL database holding the key store (``OH_KEYS_URL``)."""

    url: str

    @property
    def where(self) -> str:
        return masked_url(self.url)

    @property
    def shared(self) -> bool:
        return True

    def exists(self) -> bool:
        from oh.storage.postgres.keys import key_store_exists

        return key_store_exists(self.url)

    def open(self) -> KeyStore:
        from oh.storage.postgres.keys import PostgresKeyStore

        return PostgresKeyStore(self.url)

    def open_existing(self) -> KeyStore:
        if not self.exists():
            raise NotFound(f"no key store in the database {self.where}")
        return self.open()

    def shredder(self) -> KeyShredding | None:
        from oh.storage.postgres.keys import PostgresKeyShredder

        return PostgresKeyShredder(self.url) if self.exists() else None


def key_store_place(keys_dir: Path, keys_url: str | None) -> KeyStorePlace:
    """The key store at ``keys_url`` (a PostgreSQL database) when given, else the file in
    ``keys_dir``."""
    if keys_url is None:
        return FileKeyStore(keys_dir / KEY_STORE_FILE)
    if not is_postgres_url(keys_url):
        raise InvalidArgument(
            "the keys URL (OH_KEYS_URL, --keys-url) names a PostgreSQL database"
            " (postgresql://…); on one machine the key store is a file in the keys directory"
            " (--keys, OH_KEYS)"
        )
    return PostgresKeyStorePlace(keys_url)
