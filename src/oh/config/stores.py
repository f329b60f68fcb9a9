"""The stores of a configuration, opened through the backend its locations name
(``oh.storage.backends``), sealed and MACed with its keys (``oh.config``)."""

from __future__ import annotations

from typing import Any

from oh.config.keys import _check_keys, knowledge_macs, open_keyring
from oh.config.locations import Locations
from oh.storage.backends import backend_of
from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore, PurgeAccess
from oh.storage.sqlite.notebooks import Synchronous

__all__ = [
    "open_host_registry",
    "open_knowledge_store",
    "open_memory_store",
    "open_purge_access",
    "open_vector_store",
]


def open_memory_store(locations: Locations, synchronous: Synchronous = "FULL") -> MemoryStore:
    """The memory store, sealing with the configured keyring (``open_keyring``), which it owns:
    closing the store closes the keyring."""
    # The location first: a missing embedded file is refused (not_found) before any key store
    # is opened. The key store is the file in the keys directory, or a database of its own
    # (``Locations.keys_url``), never a PostgreSQL cluster's memory database.
    opened = backend_of(locations.memory_url).memory(locations)
    keyring = open_keyring(locations)
    try:
        _check_keys(locations, keyring)
        return opened(keyring, synchronous)
    except BaseException:
        if keyring is not None:
            keyring.close()
        raise


def open_knowledge_store(locations: Locations, synchronous: Synchronous = "FULL") -> KnowledgeStore:
    """The knowledge store, writing and checking the MAC of every row under the configured
    master key (``knowledge_macs``) when one is configured."""
    # The location first: a missing embedded file is refused before the key store is looked at.
    opened = backend_of(locations.knowledge_url).knowledge(locations)
    return opened(knowledge_macs(locations), synchronous)


def open_host_registry(locations: Locations) -> HostRegistry:
    """The reference host's registry lives in the knowledge database."""
    return backend_of(locations.knowledge_url).host_registry(locations)


def open_purge_access(locations: Locations) -> PurgeAccess:
    """The purge worker's credential on the memory database."""
    # The purge worker never gets the master key: only the key store credential that destroys
    # the data keys of the notebooks it purges.
    opened = backend_of(locations.memory_url).purge_access(locations)
    shredder = locations.key_store().shredder()
    try:
        return opened(shredder)
    except BaseException:
        if shredder is not None:
            shredder.close()
        raise


def open_vector_store(locations: Locations) -> Any:
    """Recall's vector tables in the memory database, on its own connections."""
    return backend_of(locations.memory_url).vectors(locations)
