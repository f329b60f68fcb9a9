"""Where Oh keeps its data, and the one module that picks the concrete backend for it.

It sits at the top, beside the command line: nothing in the library imports it. Everything
below takes stores and services already open; this module opens them for a set of
``Locations``: the stores (``open_memory_store``, ``open_knowledge_store``,
``open_purge_access``), the recall service (``open_recall``) and the reference host over them
(``open_host``, ``open_agent_host``; ``close_host`` closes what they opened).

Locations: a data directory with the two embedded databases, or URLs.

``--data DIR`` (``OH_DATA``, default ``./oh-data``) holds ``memory.db`` and ``knowledge.db``.
``--memory-url`` / ``--knowledge-url`` (``OH_MEMORY_URL``, ``OH_KNOWLEDGE_URL``) override either
database: a file path, ``file:PATH`` or ``libsql:PATH`` for the embedded backend, or
``postgresql://...`` for PostgreSQL (the ``postgres`` extra). ``OH_EMBEDDED_DRIVER`` picks how the
embedded files are opened: ``sqlite3`` (the default, the standard library's SQLite) or ``libsql``
(the libsql package); both read and write the same files (docs/design.md, "The embedded driver").

Opening an embedded database may create it: ``Locations(create=True)``, the library's default,
makes the data directory and the database files as needed. The command line opens only what
exists (``oh.cli.options.read_locations``): a data directory or an embedded database file that
is not there is refused with ``not_found`` before anything is created, so a mistyped ``--data``
never yields fresh empty databases that verify as OK. Only ``oh serve`` and ``oh token create``,
the commands that start a data directory, pass ``create=True``.

Keys (docs/keys.md): ``--keys DIR`` (``OH_KEYS``, default the data directory's sibling
``<name>-keys``, so ``./oh-data`` has ``./oh-data-keys``) holds the master key file and the key
store, deliberately outside the data directory operators back up. ``OH_MASTER_KEY`` overrides
the key file. ``open_keyring`` (the embedded memory store's) and ``knowledge_macs`` (every
knowledge store's) open what is configured and never create a key; ``start_master_key`` is what
a command that starts a data directory does when none is configured. ``rotate_master_key`` (and
its steps) replaces the key file's key.

One idea per module: ``locations`` (where), ``keys`` (the keys a configuration opens),
``stores`` (the stores, through ``oh.storage.backends``), ``rotation`` (master key rotation) and
``hosts`` (the reference host and its recall service).
"""

from __future__ import annotations

from oh.config.hosts import (
    RECALL_MODES,
    RecallConfig,
    close_host,
    close_recall,
    open_agent_host,
    open_host,
    open_recall,
)
from oh.config.keys import (
    KeyStatus,
    UnsealedWarning,
    create_master_key,
    key_status,
    knowledge_macs,
    open_keyring,
    sealed_memory,
    start_master_key,
)
from oh.config.locations import DEFAULT_DATA_DIR, UNSEALED_ENV, Locations, embedded_driver
from oh.config.rotation import (
    Rotation,
    begin_rotation,
    check_rotation,
    finish_rotation,
    remac_knowledge,
    rewrap_data_keys,
    rotate_master_key,
)
from oh.config.stores import (
    open_host_registry,
    open_knowledge_store,
    open_memory_store,
    open_purge_access,
    open_vector_store,
)
from oh.storage.urls import is_postgres_url, masked_url

__all__ = [
    "DEFAULT_DATA_DIR",
    "RECALL_MODES",
    "UNSEALED_ENV",
    "KeyStatus",
    "Locations",
    "RecallConfig",
    "Rotation",
    "UnsealedWarning",
    "begin_rotation",
    "check_rotation",
    "close_host",
    "close_recall",
    "create_master_key",
    "embedded_driver",
    "finish_rotation",
    "is_postgres_url",
    "key_status",
    "knowledge_macs",
    "masked_url",
    "open_agent_host",
    "open_host",
    "open_host_registry",
    "open_keyring",
    "open_knowledge_store",
    "open_memory_store",
    "open_purge_access",
    "open_recall",
    "open_vector_store",
    "remac_knowledge",
    "rewrap_data_keys",
    "rotate_master_key",
    "sealed_memory",
    "start_master_key",
]
