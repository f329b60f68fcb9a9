"""The key store on an embedded file (docs/keys.md): wrapped data keys, apart from the memory data.

``keys.db`` in the keys directory, never in the data directory operators back up: forgetting a
notebook destroys its row here, and a backup of this file would keep the key alive. The file is
opened with the standard library's SQLite (its authorizer gives the purge worker a credential
that can destroy keys and do nothing else), with ``secure_delete`` and a rollback journal, not
a write-ahead log: a destroyed key's bytes are overwritten in the file itself before the
destroy commits, and no WAL frame can keep them. A commit waits (up to the busy timeout) for
readers in other processes to finish; if they do not, the destroy fails and the forget that
asked for it answers ``storage_unavailable`` with nothing destroyed or deleted. So when a
forget answers, the key is gone from every file of the key store, whoever was reading it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from oh.errors import AlreadyExists, NotFound, StorageUnavailable

__all__ = ["KEY_STORE_FILE", "KeyShredder", "SqliteKeyStore"]

KEY_STORE_FILE = "keys.db"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS data_keys (notebook_id TEXT PRIMARY KEY,"
    " master_id TEXT NOT NULL, wrapped BLOB NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS markers (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
)


def _connect(path: Path) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(
            str(path), isolation_level=None, timeout=5.0, check_same_thread=False
        )
        # A rollback journal (a key store made by an earlier release is in WAL mode: turned back
        # here, which writes the WAL into the file and removes it). Switching needs the file
        # alone for a moment, and SQLite answers "locked" at once there instead of through the
        # busy handler: processes opening the key store at the same moment take turns.
        deadline = time.monotonic() + 5.0
        while True:
            try:
                conn.execute("PRAGMA journal_mode=DELETE")
                break
            except sqlite3.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA secure_delete=ON")
    except sqlite3.Error as exc:
        raise StorageUnavailable(f"cannot open the key store {path}: {exc}") from None
    return conn


class _KeyFile:
    """A connection to the key store file, behind a lock."""

    path: Path
    _lock: threading.Lock
    _conn: sqlite3.Connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError:
                raise
            except sqlite3.Error as exc:
                raise StorageUnavailable(f"key store {self.path}: {exc}") from None


class SqliteKeyStore(_KeyFile):
    """``KeyStore`` on one SQLite file. Thread-safe."""

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise NotFound(f"no key store at {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._conn = _connect(self.path)
        with self._write() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
        self.path.chmod(0o600)  # wrapped keys: readable by the host's user only

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchone()
            except sqlite3.Error as exc:
                raise StorageUnavailable(f"key store {self.path}: {exc}") from None

    def put(self, notebook_id: str, master_id: str, wrapped: bytes) -> None:
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO data_keys (notebook_id, master_id, wrapped) VALUES (?, ?, ?)",
                    (notebook_id, master_id, wrapped),
                )
        except sqlite3.IntegrityError:
            raise AlreadyExists(f"notebook {notebook_id} has a data key already") from None

    def get(self, notebook_id: str) -> tuple[str, bytes] | None:
        row = self._one(
            "SELECT master_id, wrapped FROM data_keys WHERE notebook_id = ?", (notebook_id,)
        )
        return None if row is None else (row[0], bytes(row[1]))

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        return _destroy(self, list(notebook_ids))

    def wrapped(self) -> list[tuple[str, str, bytes]]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT notebook_id, master_id, wrapped FROM data_keys ORDER BY notebook_id"
            ).fetchall()
        return [(row[0], row[1], bytes(row[2])) for row in rows]

    def rewrap(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        with self._write() as conn:
            for notebook_id, master_id, wrapped in rows:
                conn.execute(
                    "UPDATE data_keys SET master_id = ?, wrapped = ? WHERE notebook_id = ?",
                    (master_id, wrapped, notebook_id),
                )

    def count(self) -> dict[str, int]:
        """How many data keys each master key wraps."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT master_id, count(*) FROM data_keys GROUP BY master_id"
            ).fetchall()
        return {row[0]: row[1] for row in rows}

    def marker(self, name: str) -> str | None:
        row = self._one("SELECT value FROM markers WHERE name = ?", (name,))
        return None if row is None else str(row[0])

    def mark(self, name: str, value: str) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO markers (name, value) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (name, value),
            )

    def claim(self, name: str, value: str) -> str:
        with self._write() as conn:
            conn.execute(
                "INSERT INTO markers (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                (name, value),
            )
            row = conn.execute("SELECT value FROM markers WHERE name = ?", (name,)).fetchone()
        return str(row[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _destroy(owner: _KeyFile, ids: list[str]) -> int:
    """Delete the keys in one durable transaction: with ``secure_delete`` and no WAL, their
    bytes are overwritten in the file by the commit, which returns only once it is synced."""
    if not ids:
        return 0
    with owner._write() as conn:
        return sum(
            conn.execute("DELETE FROM data_keys WHERE notebook_id = ?", (notebook_id,)).rowcount
            for notebook_id in ids
        )


def _shredder_authorizer(action: int, first: str | None, second: str | None, *_: Any) -> int:
    """The purge credential on the key store: begin and end transactions, delete from
    ``data_keys`` by notebook id, nothing else (not one wrapped key can be read)."""
    if action == sqlite3.SQLITE_TRANSACTION:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_DELETE and first == "data_keys":
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_READ and first == "data_keys" and second == "notebook_id":
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class KeyShredder(_KeyFile):
    """What the purge worker holds on the key store: it can destroy data keys, never read or
    create one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise NotFound(f"no key store at {self.path}")
        self._lock = threading.Lock()
        self._conn = _connect(self.path)
        self._conn.set_authorizer(_shredder_authorizer)

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        return _destroy(self, list(notebook_ids))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
