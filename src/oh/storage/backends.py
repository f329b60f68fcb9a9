"""The storage backends, and the one place one is chosen: by the scheme of a location's URL.

``backend_of(url)`` gives PostgreSQL for a ``postgresql://`` (or ``postgres://``) URL and the
embedded SQLite files for anything else (no URL, a path, ``file:`` or ``libsql:``; the location
says which paths, ``Where``). A backend opens each part Oh keeps in a database: the memory
store, the knowledge store, the reference host's registry, the purge worker's access and
recall's vectors, and reads whether a memory database records that its notebooks are sealed.
``oh.config`` asks the memory location's backend for the memory side and the knowledge
location's for the knowledge side, and knows nothing else of either.

The parts that need more than a location (a keyring, MACs, the purge worker's shredder) are
given as openers: the location is resolved first (an embedded path that is missing is refused
before any key store is touched), the opener is called with the rest. A backend imports its
driver's modules only when it opens something, so choosing one loads nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from oh.storage.urls import is_postgres_url, masked_url

if TYPE_CHECKING:
    from oh.keys import Keyring, KeyShredding
    from oh.keys.macs import KnowledgeMacs
    from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore, PurgeAccess
    from oh.storage.sql.vectors import SqlVectorStore
    from oh.storage.sqlite.notebooks import Driver, Synchronous

__all__ = ["Backend", "Where", "backend_of"]

MemoryOpener = Callable[["Keyring | None", "Synchronous"], "MemoryStore"]
KnowledgeOpener = Callable[["KnowledgeMacs | None", "Synchronous"], "KnowledgeStore"]
PurgeOpener = Callable[["KeyShredding | None"], "PurgeAccess"]


class Where(Protocol):
    """Where the databases are (``oh.config.Locations``)."""

    @property
    def memory_url(self) -> str | None: ...
    @property
    def knowledge_url(self) -> str | None: ...
    @property
    def driver(self) -> Driver: ...

    def memory_path(self) -> Path:
        """The embedded memory file, its directory made (or refused) as the location allows."""
        ...

    def knowledge_path(self) -> Path:
        """The embedded knowledge file, likewise."""
        ...

    def existing_memory_path(self) -> Path | None:
        """The embedded memory file if it exists; nothing is created."""
        ...


class Backend(Protocol):
    # The database is files on this machine: a read is short enough to run on a server's event
    # loop, and writes that wait together share one flush. Not so across a network.
    local: bool

    def place(self, url: str | None, path: Callable[[], Path]) -> str:
        """A location as another process reads it (``path`` gives the embedded file, made or
        refused as the location allows): the absolute path, or the URL unmasked."""
        ...

    def shown(self, url: str | None, path: Callable[[], Path]) -> str:
        """A location as a banner, message or log shows it: never a password."""
        ...

    def check(self, path: Callable[[], Path]) -> None:
        """Check (or make) the location before anything opens it: the embedded file's
        directory; nothing for a server's database."""
        ...

    def cluster(self, url: str | None) -> int | None:
        """What identifies the storage the database's WAL and backups belong to, so that two
        locations can be told to share it; None for a file on this machine."""
        ...

    def memory(self, where: Where) -> MemoryOpener: ...
    def knowledge(self, where: Where) -> KnowledgeOpener: ...
    def host_registry(self, where: Where) -> HostRegistry: ...
    def purge_access(self, where: Where) -> PurgeOpener: ...
    def vectors(self, where: Where) -> SqlVectorStore: ...

    def sealed_memory(self, where: Where) -> str | None:
        """Where the memory database is, if it exists and records that its notebooks are
        sealed; None otherwise. Read only: nothing is created or changed."""
        ...


class Embedded:
    """The SQLite files of one machine (``oh.storage.sqlite``), through ``where.driver``."""

    local = True

    def place(self, url: str | None, path: Callable[[], Path]) -> str:
        return str(path().resolve())

    def shown(self, url: str | None, path: Callable[[], Path]) -> str:
        return str(path().resolve())

    def check(self, path: Callable[[], Path]) -> None:
        path()

    def cluster(self, url: str | None) -> int | None:
        return None

    def memory(self, where: Where) -> MemoryOpener:
        from oh.storage.sqlite.notebooks import SqliteMemoryStore

        path, driver = where.memory_path(), where.driver
        return lambda keyring, synchronous: SqliteMemoryStore(
            path, keyring=keyring, synchronous=synchronous, driver=driver
        )

    def knowledge(self, where: Where) -> KnowledgeOpener:
        from oh.storage.sqlite.knowledge import SqliteKnowledgeStore

        path, driver = where.knowledge_path(), where.driver
        return lambda macs, synchronous: SqliteKnowledgeStore(
            path, macs=macs, synchronous=synchronous, driver=driver
        )

    def host_registry(self, where: Where) -> HostRegistry:
        from oh.storage.sqlite.host import SqliteHostRegistry

        return SqliteHostRegistry(where.knowledge_path(), driver=where.driver)

    def purge_access(self, where: Where) -> PurgeOpener:
        from oh.storage.sqlite.notebooks import SqlitePurgeAccess

        path = where.memory_path()
        return lambda shredder: SqlitePurgeAccess(path, shredder=shredder)

    def vectors(self, where: Where) -> SqlVectorStore:
        from oh.storage.sqlite.vectors import SqliteVectorStore

        return SqliteVectorStore(where.memory_path(), driver=where.driver)

    def sealed_memory(self, where: Where) -> str | None:
        path = where.existing_memory_path()
        if path is None:
            return None
        # A database closed cleanly has no WAL file, and a read-only connection would leave an
        # empty one behind (it cannot delete what opening it made): such a file is read as
        # immutable, which creates nothing. With a WAL there (a writer is live, or was
        # stopped), read-only.
        wal = path.with_name(path.name + "-wal")
        mode = "ro" if wal.exists() else "ro&immutable=1"
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode={mode}", uri=True)
            try:
                row = conn.execute("SELECT since FROM sealing").fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            return None  # not a database Oh sealed (or not one at all): the store says which
        return str(path) if row is not None else None


class Postgres:
    """PostgreSQL (``oh.storage.postgres.notebooks*``): one cluster many servers share."""

    local = False

    def place(self, url: str | None, path: Callable[[], Path]) -> str:
        return str(url)

    def shown(self, url: str | None, path: Callable[[], Path]) -> str:
        return masked_url(str(url))

    def check(self, path: Callable[[], Path]) -> None:
        pass  # the server's to check, when a store connects

    def cluster(self, url: str | None) -> int | None:
        from oh.storage.postgres.keys import cluster_id

        return cluster_id(str(url))

    def memory(self, where: Where) -> MemoryOpener:
        from oh.storage.postgres.notebooks import open_postgres_memory

        url = str(where.memory_url)
        # Durability is the server's (``synchronous_commit``), not a per-store setting.
        return lambda keyring, _synchronous: open_postgres_memory(url, keyring=keyring)

    def knowledge(self, where: Where) -> KnowledgeOpener:
        from oh.storage.postgres.knowledge import open_postgres_knowledge

        url = str(where.knowledge_url)
        return lambda macs, _synchronous: open_postgres_knowledge(url, macs=macs)

    def host_registry(self, where: Where) -> HostRegistry:
        from oh.storage.postgres.host import PostgresHostRegistry

        return PostgresHostRegistry(str(where.knowledge_url))

    def purge_access(self, where: Where) -> PurgeOpener:
        from oh.storage.postgres.notebooks import open_postgres_purge

        url = str(where.memory_url)
        return lambda shredder: open_postgres_purge(url, shredder=shredder)

    def vectors(self, where: Where) -> SqlVectorStore:
        from oh.storage.postgres.vectors import PostgresVectorStore

        return PostgresVectorStore(str(where.memory_url))

    def sealed_memory(self, where: Where) -> str | None:
        from oh.storage.postgres.notebooks import sealing_recorded

        url = str(where.memory_url)
        return masked_url(url) if sealing_recorded(url) else None


_EMBEDDED = Embedded()
_POSTGRES = Postgres()


def backend_of(url: str | None) -> Backend:
    """The backend that keeps a database at ``url`` (None: the embedded default)."""
    return _POSTGRES if is_postgres_url(url) else _EMBEDDED
