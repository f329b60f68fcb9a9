"""The key store on PostgreSQL (docs/keys.md, "A key store for many servers").

Every server of a deployment reads the same wrapped data keys, so any of them can serve any
notebook, and forgetting through one destroys the key for all. ``OH_KEYS_URL`` names the
database; the master key reaches each process as on one machine (``OH_MASTER_KEY`` or a key
file), never through this database.

Destroying a key is a ``DELETE``; PostgreSQL would keep the deleted row's bytes in the table's
file and in the WAL for a while. So the store compacts after destroying: ``VACUUM FULL`` of
the keys table (a new file; the old one is unlinked), a WAL switch and a checkpoint (the
segments that logged the key are removed where ``wal_recycle = off``). The purge worker's role
cannot vacuum: its destroy leaves a mark, and the next server to create a key compacts.

The purge worker holds ``PostgresKeyShredder``: its role has no privilege on any table, only
``EXECUTE`` on ``oh_destroy_data_keys`` (SECURITY DEFINER), so it can destroy keys and never
read, create or change one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from oh.errors import AlreadyExists
from oh.storage.postgres.notebooks import (
    POOL_TIMEOUT,
    PostgresDatabase,
    _psycopg,
    credential_pool,
    translated,
)
from oh.storage.urls import masked_url

__all__ = [
    "COMPACTION_DUE",
    "PostgresKeyShredder",
    "PostgresKeyStore",
    "cluster_id",
    "key_store_exists",
]

COMPACTION_DUE = "compaction_due"  # a marker the purge role leaves when it destroyed keys
KEY_TABLES = ("data_keys",)


def key_store_exists(url: str) -> bool:
    """Whether the database at ``url`` holds a key store (read only: nothing is created)."""
    psycopg, _ = _psycopg()
    with translated(), psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT to_regclass('data_keys') IS NOT NULL").fetchone()
    return bool(row and row[0])


def cluster_id(url: str) -> int:
    """The PostgreSQL cluster's system identifier (what ``initdb`` chose): equal for two URLs
    whose databases share one cluster, its WAL and its backups."""
    psycopg, _ = _psycopg()
    with translated(), psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    assert row is not None
    return int(row[0])


class PostgresKeyStore(PostgresDatabase):
    """``KeyStore`` on a PostgreSQL database, shared by every server. Thread-safe."""

    COMPONENT = "keys"
    MIGRATIONS = "oh.storage.migrations.postgres_keys"
    # Seconds the compaction a key's creation runs (for the mark) waits for older transactions.
    CREATION_WAIT = 2.0

    def __init__(self, url: str, **options: Any) -> None:
        options.setdefault("max_size", 4)
        options.setdefault("application_name", "oh-keys")
        super().__init__(url, **options)
        self.path = masked_url(url)  # where the keys are, as messages show it
        self._retry_after = 0.0  # ``time.monotonic()`` before which ``put`` does not compact

    def _one(self, sql: str, params: Sequence[Any]) -> Any:
        with self._transaction() as conn:
            return conn.execute(sql, params).fetchone()

    def put(self, notebook_id: str, master_id: str, wrapped: bytes) -> None:
        try:
            row = self._one(
                "INSERT INTO data_keys (notebook_id, master_id, wrapped) VALUES (%s, %s, %s)"
                " RETURNING (SELECT value FROM key_markers WHERE name = %s)",
                (notebook_id, master_id, wrapped, COMPACTION_DUE),
            )
        except AlreadyExists:
            raise AlreadyExists(f"notebook {notebook_id} has a data key already") from None
        due = None if row is None else row[0]
        if due is None or time.monotonic() < self._retry_after:
            return
        # The purge worker (or a compaction that could not finish) left the mark. Creating a
        # notebook waits briefly for older transactions; a compaction that fails is tried again
        # only after a while, so a transaction left open on this database slows one creation
        # here, not every one.
        if not self.compact(due=due, wait=self.CREATION_WAIT):
            self._retry_after = time.monotonic() + self.compaction_wait

    def get(self, notebook_id: str) -> tuple[str, bytes] | None:
        row = self._one(
            "SELECT master_id, wrapped FROM data_keys WHERE notebook_id = %s", (notebook_id,)
        )
        return None if row is None else (row[0], bytes(row[1]))

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        """Delete the keys in one transaction, then compact (``compact``): when this returns,
        no file of this cluster holds them. If the compaction could not finish (a transaction
        older than it outlived its wait), the delete leaves the purge worker's mark, so the
        next key created compacts again."""
        ids = list(notebook_ids)
        if not ids:
            return 0
        with self._transaction() as conn:
            row = conn.execute(
                "WITH gone AS (DELETE FROM data_keys WHERE notebook_id = ANY(%s) RETURNING 1),"
                " mark AS (INSERT INTO key_markers (name, value)"
                " SELECT %s, gen_random_uuid()::TEXT WHERE EXISTS (SELECT FROM gone)"
                " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value RETURNING value)"
                " SELECT (SELECT count(*) FROM gone), (SELECT value FROM mark)",
                (ids, COMPACTION_DUE),
            ).fetchone()
        gone, due = (int(row[0]), row[1]) if row is not None else (0, None)
        if gone:
            self.compact(due=due)
        return gone

    def compact(self, *, due: str | None = None, wait: float | None = None) -> bool:
        """``VACUUM FULL`` of the keys table, a WAL switch and a checkpoint; then the purge
        worker's mark (``due``, as read) is cleared. It waits ``wait`` seconds (by default
        ``compaction_wait``) for older transactions to end. False if this role may not do the
        WAL step (``pg_checkpoint``, granted by ``oh postgres roles``) or if a transaction older
        than the compaction outlived its wait; the purge worker's mark then stays, so a key
        created later compacts again."""
        done = self._vacuum(list(KEY_TABLES), full=True, wait=wait)
        if due is not None and done:
            with self._transaction() as conn:
                conn.execute(
                    "DELETE FROM key_markers WHERE name = %s AND value = %s", (COMPACTION_DUE, due)
                )
        return done

    def wrapped(self) -> list[tuple[str, str, bytes]]:
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT notebook_id, master_id, wrapped FROM data_keys ORDER BY notebook_id"
            ).fetchall()
        return [(row[0], row[1], bytes(row[2])) for row in rows]

    def rewrap(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        with self._transaction() as conn, conn.cursor() as cur:
            cur.executemany(
                "UPDATE data_keys SET master_id = %s, wrapped = %s WHERE notebook_id = %s",
                [(master_id, wrapped, notebook_id) for notebook_id, master_id, wrapped in rows],
            )

    def count(self) -> dict[str, int]:
        """How many data keys each master key wraps."""
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT master_id, count(*) FROM data_keys GROUP BY master_id"
            ).fetchall()
        return {row[0]: int(row[1]) for row in rows}

    def marker(self, name: str) -> str | None:
        row = self._one("SELECT value FROM key_markers WHERE name = %s", (name,))
        return None if row is None else str(row[0])

    def mark(self, name: str, value: str) -> None:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO key_markers (name, value) VALUES (%s, %s)"
                " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
                (name, value),
            )

    def claim(self, name: str, value: str) -> str:
        """The marker's value, set to ``value`` first if it has none (atomically: of several
        processes claiming at once, one sets it and every one gets that value)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO key_markers (name, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (name, value),
            )
            row = conn.execute("SELECT value FROM key_markers WHERE name = %s", (name,)).fetchone()
        assert row is not None
        return str(row[0])


class PostgresKeyShredder:
    """What the purge worker holds on a PostgreSQL key store: it can destroy data keys, never
    read or create one (its role may only execute ``oh_destroy_data_keys``)."""

    def __init__(self, url: str, *, timeout: float = POOL_TIMEOUT) -> None:
        self.path = masked_url(url)
        self._pool = credential_pool(url, "oh-purge-keys", max_size=1, timeout=timeout)

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        ids = list(notebook_ids)
        if not ids:
            return 0
        with translated(), self._pool.connection() as conn, conn.transaction():
            row = conn.execute("SELECT oh_destroy_data_keys(%s)", (ids,)).fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def close(self) -> None:
        with translated():
            self._pool.close()
