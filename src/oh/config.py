"""Where Oh keeps its data: a data directory with the two embedded databases, or URLs.

``--data DIR`` (``OH_DATA``, default ``./oh-data``) holds ``memory.db`` and ``knowledge.db``.
``--memory-url`` / ``--knowledge-url`` (``OH_MEMORY_URL``, ``OH_KNOWLEDGE_URL``) override either
database: a file path, ``file:PATH`` or ``libsql:PATH`` for the embedded backend, or
``postgresql://...`` for PostgreSQL (the ``postgres`` extra).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oh.core.clock import Clock, system_clock
from oh.errors import InvalidArgument
from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore, PurgeAccess
from oh.storage.libsql import LibsqlMemoryStore, Synchronous
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore

__all__ = [
    "DEFAULT_DATA_DIR",
    "Locations",
    "is_postgres_url",
    "open_host_registry",
    "open_knowledge_store",
    "open_memory_store",
    "open_purge_access",
    "open_recall",
]

DEFAULT_DATA_DIR = "oh-data"


@dataclass(frozen=True, slots=True)
class Locations:
    data_dir: Path
    memory_url: str | None = None
    knowledge_url: str | None = None

    @classmethod
    def resolve(
        cls,
        data_dir: str | None = None,
        memory_url: str | None = None,
        knowledge_url: str | None = None,
    ) -> Locations:
        """Explicit values win over the environment, which wins over the defaults."""
        return cls(
            data_dir=Path(data_dir or os.environ.get("OH_DATA") or DEFAULT_DATA_DIR),
            memory_url=memory_url or os.environ.get("OH_MEMORY_URL") or None,
            knowledge_url=knowledge_url or os.environ.get("OH_KNOWLEDGE_URL") or None,
        )

    def memory_path(self) -> Path:
        return _embedded_path(self.memory_url, self.data_dir / "memory.db")

    def knowledge_path(self) -> Path:
        return _embedded_path(self.knowledge_url, self.data_dir / "knowledge.db")


def _embedded_path(url: str | None, default: Path) -> Path:
    if url is None:
        default.parent.mkdir(parents=True, exist_ok=True)
        return default
    for prefix in ("libsql:", "file:"):
        if url.startswith(prefix):
            url = url[len(prefix) :].removeprefix("//")
            break
    else:
        if "://" in url:
            scheme = url.split("://", 1)[0]
            raise InvalidArgument(f"no storage backend for {scheme}:// URLs in this install")
    path = Path(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def is_postgres_url(url: str | None) -> bool:
    return url is not None and url.split("://", 1)[0] in ("postgres", "postgresql")


def open_memory_store(locations: Locations, synchronous: Synchronous = "FULL") -> MemoryStore:
    if is_postgres_url(locations.memory_url):
        from oh.storage.postgres import open_postgres_memory

        return open_postgres_memory(str(locations.memory_url))
    return LibsqlMemoryStore(locations.memory_path(), synchronous=synchronous)


def open_knowledge_store(locations: Locations, synchronous: Synchronous = "FULL") -> KnowledgeStore:
    if is_postgres_url(locations.knowledge_url):
        from oh.storage.postgres_knowledge import open_postgres_knowledge

        return open_postgres_knowledge(str(locations.knowledge_url))
    return LibsqlKnowledgeStore(locations.knowledge_path(), synchronous=synchronous)


def open_host_registry(locations: Locations) -> HostRegistry:
    """The reference host's registry lives in the knowledge database."""
    if is_postgres_url(locations.knowledge_url):
        from oh.storage.postgres_host import PostgresHostRegistry

        return PostgresHostRegistry(str(locations.knowledge_url))
    from oh.storage.libsql_host import LibsqlHostRegistry

    return LibsqlHostRegistry(locations.knowledge_path())


def open_purge_access(locations: Locations) -> PurgeAccess:
    """The purge worker's credential on the memory database."""
    if is_postgres_url(locations.memory_url):
        from oh.storage.postgres import open_postgres_purge

        return open_postgres_purge(str(locations.memory_url))
    from oh.storage.libsql import LibsqlPurgeAccess

    return LibsqlPurgeAccess(locations.memory_path())


def open_recall(
    locations: Locations, embedder: str | None = None, *, clock: Clock = system_clock
) -> Any:
    """The recall service over the embedded memory database (``OH_EMBEDDER`` picks the
    embedder: ``hashing`` by default, ``local``, ``openai``). ``clock`` must be the host's:
    recall answers only for notebooks that are open by it."""
    if is_postgres_url(locations.memory_url):
        raise InvalidArgument("recall needs the embedded memory database in this release")
    from oh.recall import Recall, embedder_from_env
    from oh.storage.libsql_vectors import LibsqlVectorStore

    return Recall(
        open_memory_store(locations),
        LibsqlVectorStore(locations.memory_path()),
        embedder_from_env(kind=embedder),
        open_knowledge_store(locations),
        clock=clock,
    )
