"""A reference host on the in-memory backend, for tests that exercise ``Host`` itself."""

from __future__ import annotations

from oh.core.clock import Clock
from oh.host import Host
from oh.storage.memory import (
    InMemoryDatabase,
    InMemoryHostRegistry,
    InMemoryKnowledgeStore,
    InMemoryStore,
)

__all__ = ["in_memory_host"]


def in_memory_host(clock: Clock) -> tuple[Host, InMemoryStore]:
    """A ``Host`` over one fresh in-memory database on ``clock``, and its memory store (for the
    checks a test makes of what was stored)."""
    database = InMemoryDatabase()
    memory = InMemoryStore(database)
    host = Host(
        memory, InMemoryKnowledgeStore(database), InMemoryHostRegistry(database), clock=clock
    )
    return host, memory
