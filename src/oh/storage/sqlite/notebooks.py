"""The embedded backend: the memory database as one libSQL file.

WAL journal, ``synchronous=FULL`` by default (an acknowledged write survives power loss), one
writer at a time with ``BEGIN IMMEDIATE``, ``secure_delete`` so forgotten text is overwritten.

Two drivers open the same file format (docs/design.md, "The embedded driver"): the standard
library's ``sqlite3`` (the default: it keeps prepared statements, so a one-statement read costs
a third of what it costs through ``libsql``) and the ``libsql`` package. Every connection of a
process uses one driver: two SQLite libraries in one process do not share POSIX lock
bookkeeping. Driver errors (``sqlite3.Error``, or a plain ``ValueError`` from ``libsql``) are
translated in ``translated`` and nowhere else.
"""

from __future__ import annotations

import json
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from oh.core.changes import (
    LogEntry,
    Refused,
    RememberResult,
)
from oh.core.clock import utc_text
from oh.core.decision import Call, Reuse, Seen, Write, decide
from oh.core.notebook import check_not_closed
from oh.core.records import StoredRecord
from oh.core.seals import closed_seal, sealed_row_or_none, vector_seal
from oh.errors import (
    AlreadyExists,
    Forbidden,
    IntegrityError,
    InvalidArgument,
    NotFound,
    OhError,
    Purged,
    StorageUnavailable,
)
from oh.keys import Keyring, KeyShredding
from oh.keys.sealing import (
    opened_values,
    tokens,
)
from oh.storage.base import OPENING_GRACE_FLOOR, PURGE_CLOCK_ALLOWANCE, RecordCheck, VectorRow
from oh.storage.group_commit import GroupCommit, Waiter
from oh.storage.log_rows import change_columns, json_rows, new_tuple
from oh.storage.sql.notebooks import SqlMemoryStore

logger = logging.getLogger("oh.storage")

__all__ = [
    "DRIVERS",
    "DRIVER_ERRORS",
    "Driver",
    "SqliteDatabase",
    "SqliteMemoryStore",
    "SqlitePurgeAccess",
    "Synchronous",
    "connect",
    "open_driver",
    "purge_authorizer",
    "translated",
    "when_free",
]

Synchronous = Literal["FULL", "NORMAL", "EXTRA"]
Driver = Literal["sqlite3", "libsql"]
DRIVERS: tuple[Driver, ...] = ("sqlite3", "libsql")

# What a driver raises: ``sqlite3.Error`` subclasses, or a bare ``ValueError`` from ``libsql``.
DRIVER_ERRORS = (ValueError, sqlite3.Error)

_UNAVAILABLE = (
    "database is locked",
    "database table is locked",
    "busy",
    "disk i/o error",
    "database or disk is full",
    "readonly database",
    "unable to open database file",
    "no such table",
)
_DAMAGED = ("database disk image is malformed", "file is not a database")


def translate(exc: Exception) -> OhError:
    """Map a driver error (``sqlite3.Error`` or libsql's bare ``ValueError``) to Oh's error tree
    by its message: both drivers carry SQLite's own messages."""
    message = str(exc)
    lowered = message.lower()
    if "oh: " in lowered:
        # One of our triggers refused: the database enforcing an invariant the code also checks.
        reason = message.split("oh: ", 1)[1]
        if "purged" in reason or "not open" in reason:
            return Purged(f"refused by the database: {reason}")
        if "already decided" in reason:
            return AlreadyExists(f"refused by the database: {reason}")
        return Forbidden(f"refused by the database: {reason}")
    if "unique constraint failed" in lowered or "primary key" in lowered:
        return AlreadyExists(f"already stored: {message}")
    if any(marker in lowered for marker in _DAMAGED):
        return IntegrityError(f"the database file is damaged: {message}")
    if any(marker in lowered for marker in _UNAVAILABLE):
        return StorageUnavailable(f"storage unavailable: {message}")
    return StorageUnavailable(f"storage error: {message}")


class _Translated:
    """The one place where driver errors become ``OhError``s (original chained).

    ``with translated():`` wraps every store call, so it is a stateless object rather than a
    generator-based context manager (measured: 0.2 µs against 0.9 µs a use)."""

    __slots__ = ()

    def __call__(self) -> _Translated:
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, (*DRIVER_ERRORS, OSError, RuntimeError)) and not isinstance(
            exc, OhError
        ):
            raise translate(exc) from exc


translated = _Translated()


BUSY_WAIT_SECONDS = 5.0
CHECKPOINT_PAUSE = 0.01  # seconds between two tries of a truncating checkpoint


def when_free(conn: Any, sql: str, wait: float = BUSY_WAIT_SECONDS) -> None:
    """Run ``sql``, retrying while another connection holds the lock.

    libsql keeps the GIL while SQLite's own busy handler sleeps, which would stall every other
    thread of the process (including the one holding the lock). So SQLite's handler is off
    (``busy_timeout=0``) and the wait happens here, in Python, where sleeping releases the GIL.
    """
    deadline = time.monotonic() + wait
    pause = 0.0005
    while True:
        try:
            conn.execute(sql)
            return
        except DRIVER_ERRORS as exc:
            if "locked" not in str(exc) and "busy" not in str(exc).lower():
                raise
            if time.monotonic() >= deadline:
                raise
        time.sleep(pause * (0.5 + random.random()))
        pause = min(pause * 2, 0.02)


def truncate_wal(conn: Any, lock: AbstractContextManager[Any], wait: float) -> bool:
    """Checkpoint the WAL into the file and truncate it; False if a reader still on an older
    snapshot kept part of it alive for ``wait`` seconds.

    SQLite copies back only the frames every reader has moved past, so the WAL that carried
    forgotten rows stays while a transaction older than their delete is open. Each try holds
    ``lock`` (the caller's writer lock, reentrant); between tries writers go on."""
    deadline = time.monotonic() + wait
    while True:
        with lock, translated():
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(CHECKPOINT_PAUSE)


def open_driver(path: str | Path, driver: Driver = "sqlite3") -> Any:
    """A bare connection of ``driver`` to the file: autocommit (transactions are explicit), no
    settings of Oh's. Benchmarks use it for their raw baselines, tests to reach under a store."""
    if driver == "sqlite3":
        # Usable from any thread (callers hold the store's lock), with room for every statement
        # the stores prepare.
        return sqlite3.connect(
            str(path), isolation_level=None, check_same_thread=False, cached_statements=512
        )
    if driver == "libsql":
        try:
            import libsql
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "the libsql driver needs the libsql extra: pip install 'oh-memory[libsql]'",
                name="libsql",
            ) from exc
        return libsql.connect(str(path), isolation_level=None)
    raise InvalidArgument(f"the embedded driver must be one of {DRIVERS}, not {driver!r}")


def connect(path: str | Path, synchronous: Synchronous = "FULL", driver: Driver = "sqlite3") -> Any:
    """Open a libSQL file with Oh's durability settings, through ``driver``."""
    with translated():
        conn = open_driver(path, driver)
        conn.execute("PRAGMA busy_timeout=0")
        when_free(conn, "PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
    return conn


def migrate(conn: Any, package: str, *, upto: int | None = None) -> int:
    """Apply the numbered ``*.sql`` files of ``package`` not yet applied; return the version.

    Runs inside ``BEGIN IMMEDIATE``, so several processes starting at once apply each step once.
    A step with work SQL cannot do (``_BACKFILLS``) runs it right after its statements, in the
    same transaction. ``upto`` stops after that step (tests build an earlier schema with it).
    """
    steps = sorted(
        (entry.name, entry.read_text("utf-8"))
        for entry in resources.files(package).iterdir()
        if entry.name.endswith(".sql")
        and (upto is None or int(entry.name.split("_", 1)[0]) <= upto)
    )
    backfills = _BACKFILLS.get(package, {})
    with translated():
        when_free(conn, "BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations"
                " (version INTEGER PRIMARY KEY, name TEXT NOT NULL)"
            )
            done = {
                row[0] for row in conn.execute("SELECT version FROM schema_migrations").fetchall()
            }
            for name, sql in steps:
                number = int(name.split("_", 1)[0])
                if number in done:
                    continue
                for statement in _statements(sql):
                    conn.execute(statement)
                if number in backfills:
                    backfills[number](conn)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", (number, name)
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return max((int(name.split("_", 1)[0]) for name, _ in steps), default=0)


def _statements(sql: str) -> list[str]:
    """Split a migration into statements: each ends with ``;`` at a line end, except inside
    a trigger's ``BEGIN ... END;`` body."""
    statements: list[str] = []
    current: list[str] = []
    in_body = False
    for line in sql.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        current.append(line)
        if stripped.upper() == "BEGIN":
            in_body = True
        elif stripped.upper() == "END;":
            in_body = False
        if stripped.endswith(";") and not in_body:
            statements.append("\n".join(current).rstrip().removesuffix(";"))
            current = []
    if current:
        statements.append("\n".join(current))
    return statements


def _seal_existing(conn: Any) -> None:
    """Migration 0007's step in Python: seal every notebook row and every vector written before
    seals existed, as they are now (SQLite has no sha256, and the seal's one definition is
    ``oh.core.seals``). Runs once, inside the migration's transaction."""
    rows = conn.execute(
        "SELECT id, owner, document, run, state, started_at, forgets_at, pinned_revision,"
        " purged_at FROM notebooks"
    ).fetchall()
    for row in rows:
        conn.execute(
            "UPDATE notebooks SET seal = ? WHERE id = ?", (sealed_row_or_none(row), row[0])
        )
    for table, kind in (("note_vectors", "note"), ("reviewed_vectors", "reviewed")):
        last = 0
        while page := conn.execute(
            f"SELECT rowid, {'notebook_id' if kind == 'note' else 'owner'}, model_id, digest,"
            f" vector FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 500",
            (last,),
        ).fetchall():
            for rowid, scope, model_id, digest, vector in page:
                try:
                    seal: str | None = vector_seal(kind, scope, model_id, digest, vector)
                except (TypeError, ValueError):
                    seal = None  # a damaged row stays unsealed, and verify reports it
                conn.execute(f"UPDATE {table} SET seal = ? WHERE rowid = ?", (seal, rowid))
            last = page[-1][0]


# Work a migration step needs beyond its SQL, by migration package and step number.
_BACKFILLS: dict[str, dict[int, Callable[[Any], None]]] = {
    "oh.storage.migrations.libsql": {7: _seal_existing},
}


# Every table holding a notebook's content, children before parents. Forget and purge delete
# from each; later features (answers, vectors) add their tables here.
CONTENT_TABLES = ("note_vectors", "answers", "records", "log")


def delete_content(conn: Any, notebook_id: str) -> dict[str, int]:
    """Delete every row of a notebook's content; return the count per table."""
    return {
        table: conn.execute(f"DELETE FROM {table} WHERE notebook_id = ?", (notebook_id,)).rowcount
        for table in CONTENT_TABLES
    }


# What a remember call reads, in one statement: the notebook's state, version and head, the
# version and fingerprint of an earlier call with the same request id, and which of the named
# records exist (one name: 1 or NULL; several, passed as a JSON array: a JSON array of names).
_REMEMBER_READ = (
    "SELECT n.state, n.forgets_at, n.version, n.head_hash, l.version, l.fingerprint, ({})"
    " FROM notebooks AS n LEFT JOIN log AS l ON l.notebook_id = n.id AND l.request_id = ?2"
    " WHERE n.id = ?1"
)
_REMEMBER_ONE_READ = _REMEMBER_READ.format(
    "SELECT 1 FROM records WHERE notebook_id = ?1 AND name = ?3"
)
_REMEMBER_MANY_READ = _REMEMBER_READ.format(
    "SELECT json_group_array(name) FROM records"
    " WHERE notebook_id = ?1 AND name IN (SELECT value FROM json_each(?3))"
)
_ROWS_PER_STATEMENT = 500


# verify's view of the current records (``MemoryStore.record_checks``): stamps, no content.
_RECORD_CHECKS = (
    "SELECT r.name, r.kind, r.digest, r.author, r.written_at, r.version, EXISTS ("
    " SELECT 1 FROM log AS l WHERE l.notebook_id = r.notebook_id AND l.version = r.version AND"
    " CASE WHEN l.changes = 1"
    " THEN l.op IN ('add', 'replace') AND l.name = r.name AND l.content = r.content"
    " WHEN json_valid(l.op) AND json_valid(l.name) AND json_valid(l.content) THEN EXISTS ("
    " SELECT 1 FROM json_each(l.name) AS j WHERE j.value = r.name"
    " AND l.op ->> j.key IN ('add', 'replace') AND l.content ->> j.key = r.content)"
    " ELSE 0 END)"
    " FROM records AS r WHERE r.notebook_id = ?1 {after} ORDER BY r.name LIMIT ?2"
)


def _insert_records(conn: Any, notebook_id: str, records: Sequence[StoredRecord]) -> None:
    """Insert current records, their rows travelling as JSON arrays a few hundred per statement
    (``executemany`` would prepare one statement, and compile its trigger, per row)."""
    for start in range(0, len(records), _ROWS_PER_STATEMENT):
        rows = [
            [r.name, r.kind, r.content, r.digest, r.author, r.written_at, r.version]
            for r in records[start : start + _ROWS_PER_STATEMENT]
        ]
        conn.execute(
            "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
            " version) SELECT ?1, value ->> 0, value ->> 1, value ->> 2, value ->> 3,"
            " value ->> 4, value ->> 5, value ->> 6 FROM json_each(?2)",
            (notebook_id, json_rows(rows)),
        )


def _closed(seal: Any, state: str, purged_at: str) -> str | None:
    """The tombstone's seal chained from the row's seal; None stays None (verify says so)."""
    return None if type(seal) is not str else closed_seal(seal, state, purged_at)


def _known_heads(store: object) -> dict[str, tuple[int, str]]:
    """The ``(version, head hash)`` of each notebook as this store last read or wrote it.

    Only a guess: ``_append`` writes nothing unless the database still agrees. Kept on the
    store object (created on first use) and bounded by ``_remember_head``.
    """
    heads: dict[str, tuple[int, str]] = vars(store).setdefault("_known_heads", {})
    return heads


def _remember_head(
    heads: dict[str, tuple[int, str]], notebook_id: str, version: int, head_hash: str
) -> None:
    if len(heads) >= 1024 and notebook_id not in heads:
        heads.clear()
    heads[notebook_id] = (version, head_hash)


_INSERT_RECORD = (
    "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at, version)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# The current records of an entry with several changes, from the arrays its log row keeps.
_INSERT_RECORDS = (
    "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at, version)"
    " SELECT ?1, ?5 ->> key, ?8 ->> key, value, ?7 ->> key, ?2, ?3, ?4 FROM json_each(?6)"
)


def _append(conn: Any, entry: LogEntry, kinds: Sequence[str]) -> bool:
    """Write ``entry`` (its ``hash`` computed) and apply it to the current records, inside the
    caller's write transaction; False (or a ``ValueError`` from a unique key) if the database
    does not agree with the assumptions below, and then the caller rolls back.

    ``remember`` decides a call (oh.core) from one read: the notebook's state, version and head,
    an earlier call with the request id, and which named records exist. When the store already
    knows the head the caller's ``based_on`` names, it writes at once, each check being a
    condition these statements test: the entry goes in only from a notebook row that is open,
    unexpired, at version ``based_on`` with that head; the unique request id and an added name's
    primary key refuse a duplicate; every replaced or removed record must be there. So this
    either writes exactly what the decided call writes or nothing, and the full path then reads
    and decides. After the full path has decided, the same statements write its entry.

    One change takes one short statement per table; several take one per table however many
    they are: the log row keeps them as JSON arrays, and their current records go in through
    one statement prepared once for all the rows (``executemany`` on ``sqlite3``; on ``libsql``,
    which prepares every row of an ``executemany`` anew, one statement unpacking the arrays).

    ``entry`` is as kept at rest (sealed, ``SqlMemoryStore._sealed``) and ``kinds`` are its
    changes' kinds as the records keep them (``_kinds``).
    """
    changes = entry.changes
    notebook_id, version, author, written_at = entry[0], entry[1], entry[4], entry[5]
    count, op, name, content, digest = change_columns(changes)
    if (
        conn.execute(
            "INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,"
            " prev_hash, hash, changes, op, name, content, digest)"
            " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13 FROM notebooks"
            " WHERE id = ?1 AND state = 'open' AND forgets_at > ?6 AND version = ?2 - 1"
            " AND head_hash = ?7",
            (*entry[:6], entry.prev_hash, entry.hash, count, op, name, content, digest),
        ).rowcount
        != 1
    ):
        return False
    if count == 1:
        if op == "add":  # the primary key refuses a name that exists
            conn.execute(
                _INSERT_RECORD,
                (notebook_id, name, kinds[0], content, digest, author, written_at, version),
            )
        elif op == "replace":
            if (
                conn.execute(
                    "UPDATE records SET kind = ?, content = ?, digest = ?, author = ?,"
                    " written_at = ?, version = ? WHERE notebook_id = ? AND name = ?",
                    (
                        kinds[0],
                        content,
                        digest,
                        author,
                        written_at,
                        version,
                        notebook_id,
                        name,
                    ),
                ).rowcount
                != 1
            ):
                return False
        elif (
            conn.execute(
                "DELETE FROM records WHERE notebook_id = ? AND name = ?", (notebook_id, name)
            ).rowcount
            != 1
        ):
            return False
    else:
        # Replaced and removed records must all be there: they are deleted first (and counted),
        # then added and replaced ones inserted, where the primary key refuses an added name
        # that exists.
        gone = [c.name for c in changes if c.op != "add"]
        if gone and (
            conn.execute(
                "DELETE FROM records WHERE notebook_id = ? AND name IN"
                " (SELECT value FROM json_each(?))",
                (notebook_id, json_rows(gone)),
            ).rowcount
            != len(gone)
        ):
            return False
        kept = len(changes) - sum(1 for c in changes if c.op == "remove")
        if kept and type(conn) is sqlite3.Connection:
            # The standard library prepares the statement once for all the rows. (Reading them
            # out of the log row's arrays, below, makes SQLite before 3.45 parse a whole array
            # for every value it takes: writing 64 changes took 670-913 µs that way, 400-478
            # this way.)
            conn.executemany(
                _INSERT_RECORD,
                [
                    (notebook_id, c.name, kind, c.content, c.digest, author, written_at, version)
                    for c, kind in zip(changes, kinds, strict=True)
                    if c.op != "remove"
                ],
            )
        elif kept:
            # ``libsql`` prepares a statement for every row of ``executemany``: one statement
            # takes each value by index from its array; kinds travel as an array too (measured:
            # cheaper than deriving each from its name in SQL).
            values = (
                notebook_id,
                author,
                written_at,
                version,
                name,
                content,
                digest,
                json_rows(kinds),
            )
            if kept == count:
                conn.execute(_INSERT_RECORDS, values)
            else:
                conn.execute(_INSERT_RECORDS + " WHERE ?9 ->> key != 'remove'", (*values, op))
    conn.execute(
        "UPDATE notebooks SET version = ?, head_hash = ? WHERE id = ?",
        (version, entry.hash, notebook_id),
    )
    return True


class _Statement:
    """``SqliteDatabase._statement``: a connection's lock and the error translation as one
    stateless object, since one-statement reads are the hot path (a generator-based context
    manager costs about four times as much a use)."""

    __slots__ = ("_conn", "_lock")

    def __init__(self, lock: threading.RLock, conn: Any) -> None:
        self._lock = lock
        self._conn = conn

    def __enter__(self) -> Any:
        self._lock.acquire()
        return self._conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        self._lock.release()
        translated.__exit__(kind, exc, tb)


class SqliteDatabase:
    """One libSQL file, migrated on open. Thread-safe.

    Two connections, each behind its own lock: one for writes (and for reads made while a
    write is in progress on the same thread, which must see it), one for every other read. In
    WAL mode a reader never waits for a writer, so a read does not queue behind a flush, its
    fsync included; it sees every write committed before it began.
    """

    MIGRATIONS = ""  # the package holding this database's numbered *.sql steps

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "FULL",
        busy_wait: float = BUSY_WAIT_SECONDS,
        driver: Driver = "sqlite3",
    ) -> None:
        self.path = Path(path)
        self.busy_wait = busy_wait
        self.synchronous = synchronous
        self.driver = driver
        self._lock = threading.RLock()
        self._conn = connect(self.path, synchronous, driver)
        migrate(self._conn, self.MIGRATIONS)
        self._reader_lock = threading.RLock()
        self._reader = connect(self.path, synchronous, driver)
        self._own = _Statement(self._lock, self._conn)
        self._one = _Statement(self._reader_lock, self._reader)

    FOR_UPDATE = ""  # a write transaction (BEGIN IMMEDIATE) excludes every other writer

    def _statement(self) -> _Statement:
        """The connection for one statement, under its lock, errors translated: the writer's
        if this thread is writing (so it reads its own write), else the reader's."""
        return self._own if self._lock._is_owned() else self._one  # type: ignore[attr-defined]

    @contextmanager
    def _write(self) -> Iterator[Any]:
        """One write transaction: ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""
        with self._lock, translated():
            conn = self._conn
            when_free(conn, "BEGIN IMMEDIATE", self.busy_wait)
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """One read transaction: a consistent snapshot across several statements, on the
        reader's connection (the writer's if this thread is writing)."""
        writing = self._lock._is_owned()  # type: ignore[attr-defined]
        lock, conn = (self._lock, self._conn) if writing else (self._reader_lock, self._reader)
        with lock, translated():
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def compact(self) -> bool:
        """Make deleted bytes leave the files: ``VACUUM`` rewrites every page (secure_delete
        zeroes a deleted cell in place, but a b-tree rebalance can leave copies of cells in the
        free part of a rebuilt page), then the WAL that carried the old pages is checkpointed
        and truncated (``truncate_wal``). False if a reader older than the compaction kept
        part of the WAL alive past ``busy_wait`` (the next pass finishes)."""
        with self._lock, translated():
            when_free(self._conn, "VACUUM", self.busy_wait)
        return truncate_wal(self._conn, self._lock, self.busy_wait)

    def close(self) -> None:
        with self._lock, self._reader_lock, translated():
            self._reader.close()
            self._conn.close()


class SqliteMemoryStore(SqliteDatabase, SqlMemoryStore):
    """``MemoryStore`` on one libSQL file: the shared statements (``oh.storage.sql.notebooks``) and
    the log in this backend's layout (one row per entry)."""

    MIGRATIONS = "oh.storage.migrations.libsql"

    def __init__(self, path: str | Path, *, keyring: Keyring | None = None, **options: Any) -> None:
        """``options`` as for ``SqliteDatabase``; then the group commit's queue (``_remember``).

        With ``keyring`` the notebooks' content is sealed (docs/keys.md); the first time a
        database is opened with one, every notebook written before is sealed (``_seal_notebooks``).
        A database whose content is sealed is refused without one (``storage_unavailable``)."""
        super().__init__(path, **options)
        self._keyring = keyring
        try:
            self._check_sealing()
        except BaseException:
            self.close()
            raise
        self._group: GroupCommit[Call, RememberResult] = GroupCommit(
            self._remember_one, self._flush_group
        )

    def close(self) -> None:
        """Close the database, then the keyring it was given (its key store with it)."""
        super().close()
        if self._keyring is not None:
            self._keyring.close()

    def _sealing_recorded(self) -> bool:
        with self._own as conn:  # the writer's: a ":memory:" database is one connection's
            return conn.execute("SELECT since FROM sealing").fetchone() is not None

    def _where(self) -> str:
        return str(self.path)

    def _compact_sealed(self) -> None:
        self.compact()  # the plain text the rows held leaves the file and the WAL

    @contextmanager
    def _ephemeral(self) -> Iterator[Any]:
        """A write transaction committed without the fsync (WAL, ``synchronous=NORMAL``)."""
        with self._lock, translated():
            self._conn.execute("PRAGMA synchronous=NORMAL")
            try:
                with self._write() as conn:
                    yield conn
            finally:
                self._conn.execute(f"PRAGMA synchronous={self.synchronous}")

    @staticmethod
    def _insert_records(conn: Any, notebook_id: str, records: Sequence[StoredRecord]) -> None:
        _insert_records(conn, notebook_id, records)

    # -- writes ---------------------------------------------------------------------------

    def _remember(self, call: Call) -> RememberResult:
        """Group commit (``oh.storage.group_commit``): calls that arrive while a flush is in
        progress share the next one, each in its own savepoint, with one fsync
        (``_flush_group``); a call with nobody flushing is written alone (``_remember_one``)."""
        return self._group.one(call)

    def remember_all(self, calls: Sequence[Call]) -> list[RememberResult | Exception]:
        """Several calls of one thread queued at once, so they share flushes as concurrent
        callers' calls do (``_remember``), each answered on its own."""
        return self._group.all(calls)

    def _flush_group(self, group: list[Waiter[Call, RememberResult]], gather: bool) -> None:
        """Run ``group``'s calls in one write transaction, each in its own savepoint, and commit
        once. Each waiter gets its own result or error; a call that fails is rolled back to its
        savepoint and touches no other. If the transaction cannot begin or commit, every call
        of the group gets that error (none of them was written)."""
        heads = _known_heads(self)
        touched: set[str] = set()
        with self._lock:
            conn = self._conn
            try:
                deadline = time.perf_counter() + self._group.company(gather)
                written = 0
                with translated():
                    when_free(conn, "BEGIN IMMEDIATE", self.busy_wait)
                    while written < len(group) or self._group.more(group, deadline):
                        waiter = group[written]
                        written += 1
                        touched.add(waiter.call.notebook_id)
                        conn.execute("SAVEPOINT oh_call")
                        try:
                            with translated():
                                waiter.result = self._decide_at_head(conn, waiter.call, heads)
                        except Exception as exc:
                            conn.execute("ROLLBACK TO oh_call")
                            heads.pop(waiter.call.notebook_id, None)
                            waiter.error = exc
                        conn.execute("RELEASE oh_call")
                    conn.execute("COMMIT")
            except BaseException as exc:
                for notebook_id in touched:
                    heads.pop(notebook_id, None)
                try:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                except DRIVER_ERRORS:
                    pass  # the connection is gone; its transaction with it
                failure = (
                    exc
                    if isinstance(exc, OhError)
                    else StorageUnavailable(
                        f"storage unavailable: the group of writes was not committed ({exc!r})"
                    )
                )
                for waiter in group:
                    waiter.result, waiter.error = None, failure
                if not isinstance(exc, Exception):
                    raise

    def _decide_at_head(
        self, conn: Any, call: Call, heads: dict[str, tuple[int, str]]
    ) -> RememberResult:
        """One call of a group, inside its savepoint: written at once from the head the store
        knows (as ``_remember_one``'s first step), else read, decided and written."""
        known = heads.get(call.notebook_id)
        if known is not None and known[0] == call.based_on:
            entry = call.entry(call.based_on + 1, known[1])
            try:
                done = _append(conn, self._sealed(entry), self._kinds(entry))
            except (*DRIVER_ERRORS, Purged):
                done = False
            if done:
                heads[call.notebook_id] = (entry.version, entry.hash)
                return call.applied(entry.version)
            conn.execute("ROLLBACK TO oh_call")
        result, written = self._decide(conn, call, heads)
        if written is not None:
            heads[call.notebook_id] = written
        return result

    def _decide(
        self, conn: Any, call: Call, heads: dict[str, tuple[int, str]]
    ) -> tuple[RememberResult, tuple[int, str] | None]:
        """Read what ``call`` depends on, decide it and write it, inside the caller's write
        transaction; returns the result and the ``(version, hash)`` written, if any."""
        notebook_id = call.notebook_id
        logged = call.logged
        single = len(logged) == 1
        request_id = call.request_id
        cipher = None
        keyring = self._keyring
        if keyring is not None:
            try:
                cipher = keyring.cipher(notebook_id)
            except Purged:
                cipher = None  # no such notebook, or a closed one: ``decide`` says which
            else:
                request_id = cipher.token(request_id, "request", keep=False)
        kept = tokens(cipher, call.names, "name")
        names = kept[0] if single else json_rows(kept)
        # One statement reads all the call depends on: the notebook, an earlier call with this
        # request id, and which of the named records exist.
        row = conn.execute(
            _REMEMBER_ONE_READ if single else _REMEMBER_MANY_READ,
            (notebook_id, request_id, names),
        ).fetchone()
        if row is None:
            raise NotFound(f"no notebook {notebook_id}")
        state, forgets_at, version, head_hash, prior, prior_payload, existing = row
        present = ((names,) if existing else ()) if single else json.loads(existing)
        if cipher is not None:
            head_hash = cipher.untoken(head_hash, "hash")
            if prior_payload is not None:
                prior_payload = cipher.untoken(prior_payload, "fingerprint")
            present = opened_values(cipher, present, "name")
        _remember_head(heads, notebook_id, version, head_hash)
        seen = (state, forgets_at, version, head_hash, prior, prior_payload, present)
        match decide(call, new_tuple(Seen, seen)):
            case Write(entry, result):
                if not _append(conn, self._sealed(entry), self._kinds(entry)):
                    raise IntegrityError(
                        f"notebook {notebook_id}: the current records disagree with the"
                        " checks just made (run oh verify)"
                    )
                return result, (entry.version, entry.hash)
            case Reuse(prior):
                return self._entry(conn, notebook_id, prior).result(), None
            case Refused() as refused:
                return refused, None
        raise AssertionError("decide returns a Write, a Reuse or a Refused")

    def _remember_one(self, call: Call) -> RememberResult:
        """A call alone: written at once from the head the store knows, else decided."""
        notebook_id, based_on = call.notebook_id, call.based_on
        heads = _known_heads(self)
        with self._lock, translated():
            conn = self._conn
            known = heads.get(notebook_id)
            if known is not None and known[0] == based_on:
                # The store wrote or read this head last: write at once, as ``_append`` says.
                entry = call.entry(based_on + 1, known[1])
                when_free(conn, "BEGIN IMMEDIATE", self.busy_wait)
                try:
                    done = _append(conn, self._sealed(entry), self._kinds(entry))
                except (*DRIVER_ERRORS, Purged):
                    done = False  # a unique key refused it (or anything else: the full path tells)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                if done:
                    try:
                        conn.execute("COMMIT")
                    except BaseException:
                        heads.pop(notebook_id, None)
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    heads[notebook_id] = (entry.version, entry.hash)
                    return call.applied(entry.version)
                conn.execute("ROLLBACK")
            when_free(conn, "BEGIN IMMEDIATE", self.busy_wait)
            try:
                result, written = self._decide(conn, call, heads)
                conn.execute("COMMIT")
            except BaseException:
                heads.pop(notebook_id, None)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            if written is not None:
                heads[notebook_id] = written
        return result

    def forget(self, notebook_id: str, now: datetime) -> dict[str, int]:
        """Delete a notebook's content at once, leave its tombstone; return what was removed."""
        with self._write() as conn:
            notebook = self._notebook(conn, notebook_id)
            if notebook.state in ("purged", "empty"):
                check_not_closed(notebook_id, notebook.state)
            if self._keyring is not None:
                # Crypto-shredding: the key goes first, durably, in its own step; from then on
                # no copy of this notebook's content anywhere can be opened. The rows follow.
                self._keyring.destroy([notebook_id])
            stamp = utc_text(now)
            # Fetched at once: a cursor left open would keep its statement running, and the
            # VACUUM that compaction runs after the forget refuses to run beside it.
            (sealed,) = conn.execute(
                "SELECT seal FROM notebooks WHERE id = ?", (notebook_id,)
            ).fetchone()
            conn.execute(
                "UPDATE notebooks SET state = 'purged', purged_at = ?, seal = ? WHERE id = ?",
                (stamp, _closed(sealed, "purged", stamp), notebook_id),
            )
            removed = delete_content(conn, notebook_id)
        try:
            self.compact()
        except OhError:
            # The notebook is forgotten (committed above); the bytes leave the files at the next
            # compaction that succeeds (every purge pass compacts).
            logger.warning("forgot %s; compaction failed and will be retried", notebook_id)
        return removed

    # -- reads ----------------------------------------------------------------------------

    def record_checks(self, notebook_id: str, *, page: int = 2000) -> Iterator[RecordCheck]:
        # Keyset pages by name, each one read; the database compares each record's text with
        # the change its entry logged (a plain column for one change, the array element of
        # the name for several, arrays that are not JSON comparing as not logged).
        last: Any = None
        while True:
            with self._read() as conn:
                rows = conn.execute(
                    _RECORD_CHECKS.format(after="" if last is None else "AND r.name > ?3"),
                    (notebook_id, page) if last is None else (notebook_id, page, last),
                ).fetchall()
            opened = self._check_values(notebook_id, rows)
            for row in opened:
                yield new_tuple(RecordCheck, (*row[:6], row[6] == 1))
            if len(rows) < page:
                return
            last = rows[-1][0]

    def note_vector_rows(self, notebook_id: str, *, page: int = 500) -> Iterator[VectorRow]:
        rows = self._vector_rows(
            "SELECT rowid, notebook_id, model_id, digest, vector, seal FROM note_vectors"
            " WHERE notebook_id = ? AND rowid > ? ORDER BY rowid LIMIT ?",
            (notebook_id,),
            page,
        )
        return self._opened_vector_rows(notebook_id, rows)

    def reviewed_vector_rows(self, *, page: int = 500) -> Iterator[VectorRow]:
        yield from self._vector_rows(
            "SELECT rowid, owner, model_id, digest, vector, seal FROM reviewed_vectors"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (),
            page,
        )

    def _vector_rows(self, sql: str, params: tuple[Any, ...], page: int) -> Iterator[VectorRow]:
        # Pages by rowid, each one read: a page of vectors is ~0.8 MB at 384 dimensions.
        last = 0
        while True:
            with self._read() as conn:
                rows = conn.execute(sql, (*params, last, page)).fetchall()
            for row in rows:
                yield VectorRow(*row[1:])
            if len(rows) < page:
                return
            last = rows[-1][0]

    # -- export and import (docs/cli.md) ------------------------------------------------------


# -- the purge credential ----------------------------------------------------------------------

# What the purge connection may read: notebook metadata and the notebook_id column of the
# content tables (to find rows to delete), nothing else.
_PURGE_READABLE = {
    "notebooks": {"id", "state", "started_at", "forgets_at", "purged_at", "seal"},
    **{table: {"notebook_id"} for table in CONTENT_TABLES},
    "schema_migrations": {"version"},
}
_PURGE_UPDATABLE = {"notebooks": {"state", "purged_at", "seal"}}
# Functions no statement on the purge connection may call (the standard library disables
# extension loading already; this says so where the rest of the rules are).
_PURGE_FUNCTIONS_DENIED = {"load_extension"}

# The database's own clock, as `utc_text` writes a stamp (SQLite's %f is seconds with three
# decimals, so the stamp ends in 000Z), and where the purge may stamp at most.
_STAMP_FORMAT = "%Y-%m-%dT%H:%M:%f000Z"
_STAMP_SHAPE = "'" + "-".join(["[0-9]" * 4, "[0-9]" * 2, "[0-9]" * 2]) + "T"
_STAMP_SHAPE += ":".join(["[0-9]" * 2] * 3) + "." + "[0-9]" * 6 + "Z'"
_ALLOWANCE = f"'+{int(PURGE_CLOCK_ALLOWANCE.total_seconds())} seconds'"
_FLOOR = f"'-{int(OPENING_GRACE_FLOOR.total_seconds())} seconds'"
_BOUND = f"strftime('{_STAMP_FORMAT}', 'now', {_ALLOWANCE})"


# The values the purge connection may write, checked by TEMP triggers: they exist only on this
# connection (the application's connections pay nothing), and the authorizer forbids dropping
# or adding any, so no statement on it can get around them. A notebook's state changes only from
# `open` (or `expired`) to `purged` once its forget time has passed, or from `opening` to
# `empty` once it has been opening for the grace floor, with a well-formed stamp no later than
# the database's clock plus the allowance, and the tombstone's seal chained from the notebook's
# (oh.core.seals); a tombstone may be touched only without changing it.
# Content is deleted by the second trigger, after such a change and nowhere else: the authorizer
# allows a DELETE only inside it. So a tombstone always takes its notebook's content with it,
# and nothing else on this connection can delete a row.
_TOMBSTONE_GUARD = "oh_purge_changes"
_CONTENT_DELETER = "oh_purge_content"
_PURGE_GUARDS = [
    f"CREATE TEMP TRIGGER {_TOMBSTONE_GUARD} BEFORE UPDATE ON main.notebooks"
    " WHEN NOT coalesce(OLD.state IN ('purged', 'empty') AND NEW.state IS OLD.state"
    " AND NEW.purged_at IS OLD.purged_at AND NEW.seal IS OLD.seal"
    f" OR NEW.purged_at GLOB {_STAMP_SHAPE} AND NEW.purged_at <= {_BOUND}"
    " AND NEW.seal IS oh_closed_seal(OLD.seal, NEW.state, NEW.purged_at)"
    " AND (OLD.state IN ('open', 'expired') AND NEW.state = 'purged'"
    " AND OLD.forgets_at <= NEW.purged_at"
    " OR OLD.state = 'opening' AND NEW.state = 'empty'"
    f" AND OLD.started_at <= strftime('{_STAMP_FORMAT}', NEW.purged_at, {_FLOOR})), 0)"
    " BEGIN SELECT RAISE(ABORT, 'oh: denied to the purge credential: it may only tombstone"
    " a notebook past its forget time, or mark empty one stuck opening'); END",
    f"CREATE TEMP TRIGGER {_CONTENT_DELETER} AFTER UPDATE ON main.notebooks BEGIN "
    + " ".join(f"DELETE FROM {table} WHERE notebook_id = OLD.id;" for table in CONTENT_TABLES)
    + " END",
]
# What `purge` reports: the rows each content table holds for a notebook that is due.
_CONTENT_COUNTS = ", ".join(
    f"(SELECT count(*) FROM {table} WHERE notebook_id = n.id)" for table in CONTENT_TABLES
)


def purge_authorizer(
    action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None
) -> int:
    """SQLite authorizer for the purge connection: reads of metadata and updates of a notebook's
    state and stamp on the main database, and deletes from content tables only inside the TEMP
    trigger that follows a tombstone; no PRAGMA, DDL, ATTACH or INSERT. (Which values an update
    may write, the TEMP trigger before it decides.) ``trigger`` is the innermost trigger running
    the statement: only the purge connection's own, since no other can be created on it."""
    allowed = sqlite3.SQLITE_OK
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_TRANSACTION):
        return allowed
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_DENY if arg2 in _PURGE_FUNCTIONS_DENIED else allowed
    if db != "main":
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_READ:
        return allowed if arg2 in _PURGE_READABLE.get(arg1 or "", ()) else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_DELETE:
        deleting = arg1 in CONTENT_TABLES and trigger == _CONTENT_DELETER
        return allowed if deleting else sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_UPDATE:
        return allowed if arg2 in _PURGE_UPDATABLE.get(arg1 or "", ()) else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY  # PRAGMA, INSERT, CREATE, DROP, ALTER, ATTACH, ANALYZE, ...


class SqlitePurgeAccess:
    """The purge worker's credential on an embedded memory database, and nothing more.

    It can list notebooks past their forget time, delete one that is (still) past it leaving the
    tombstone, and mark ``empty`` one stuck in ``opening``. The connection behind it carries an
    SQLite authorizer that denies every INSERT, PRAGMA and schema change, every read of a
    content column and every other update, and TEMP triggers that check the values it writes:
    even arbitrary SQL on it cannot create, reopen, write or read notes, tombstone a notebook
    that is not expired or keep its content, or mark empty an opening still within its grace.
    "Expired" and "within its grace" are judged against the stamp it records, which the
    database bounds by its own clock (``PURGE_CLOCK_ALLOWANCE``), not by the caller's ``now``.

    It needs an authorizer hook, which only the standard library's SQLite has, so it always uses
    that driver, the stores' default too. Beside stores on the ``libsql`` driver, run it in its
    own process (``oh purge`` does): two SQLite libraries in one process do not share POSIX lock
    bookkeeping.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        shredder: KeyShredding | None = None,
        busy_wait: float = BUSY_WAIT_SECONDS,
    ) -> None:
        """``shredder``: the purge credential on the key store of a sealed database
        (docs/keys.md); with it, the keys of the notebooks purged are destroyed first."""
        if not Path(path).exists():
            raise NotFound(f"no memory database at {path}")
        self._shredder = shredder
        self._lock = threading.RLock()  # reentrant: compaction's checkpoint takes it again
        self.busy_wait = busy_wait
        try:
            self._conn = sqlite3.connect(
                str(path), isolation_level=None, timeout=busy_wait, check_same_thread=False
            )
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.execute("PRAGMA synchronous=FULL")
            # A tombstone's seal is chained from the notebook's seal (oh.core.seals) inside the
            # statement that makes the tombstone, so the worker never needs owner, document or
            # run; the guard recomputes it to check what a statement wrote.
            self._conn.create_function("oh_closed_seal", 3, _closed, deterministic=True)
            for guard in _PURGE_GUARDS:
                self._conn.execute(guard)
        except sqlite3.Error as exc:
            raise translate(ValueError(str(exc))) from exc
        self._conn.set_authorizer(purge_authorizer)

    @contextmanager
    def _session(self, write: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                raise translate(ValueError(str(exc))) from exc

    @staticmethod
    def _stamp(conn: sqlite3.Connection, now: datetime) -> str:
        """``now`` as the stamp to record, at most the database's bound (what the triggers
        accept), so a worker whose clock runs ahead purges less rather than failing."""
        bound: str = conn.execute(f"SELECT {_BOUND}").fetchone()[0]
        return min(utc_text(now), bound)

    def expired(self, now: datetime, limit: int = 1000) -> list[str]:
        """Ids of open notebooks whose forget time has passed."""
        with self._session(write=False) as conn:
            rows = conn.execute(
                "SELECT id FROM notebooks WHERE state IN ('open', 'expired') AND forgets_at <= ?"
                " ORDER BY forgets_at LIMIT ?",
                (self._stamp(conn, now), limit),
            ).fetchall()
        return [row[0] for row in rows]

    def stale_openings(self, cutoff: datetime, limit: int = 1000) -> list[str]:
        """Ids of notebooks still ``opening`` that started before ``cutoff``."""
        with self._session(write=False) as conn:
            rows = conn.execute(
                "SELECT id FROM notebooks WHERE state = 'opening' AND started_at <= ?"
                f" AND started_at <= strftime('{_STAMP_FORMAT}', 'now', {_ALLOWANCE}, {_FLOOR})"
                " LIMIT ?",
                (utc_text(cutoff), limit),
            ).fetchall()
        return [row[0] for row in rows]

    def purge(self, notebook_ids: Iterable[str], now: datetime) -> dict[str, dict[str, int]]:
        """Delete each notebook that is still past its forget time; return counts per notebook.

        The forget-time condition is checked inside the transaction, so a notebook that is not
        (or no longer) expired is left alone. Setting the tombstone deletes the content (the
        connection's TEMP trigger), so the rows are counted just before.
        """
        purged: dict[str, dict[str, int]] = {}
        notebook_ids = list(notebook_ids)
        if self._shredder is not None:
            # Crypto-shredding first, durably, for the notebooks that are due (a forget time
            # never moves, so one due now is due at the transaction below too).
            with self._session(write=False) as conn:
                stamp = self._stamp(conn, now)
                due = [
                    notebook_id
                    for notebook_id in notebook_ids
                    if conn.execute(
                        "SELECT 1 FROM notebooks WHERE id = ? AND state IN ('open', 'expired')"
                        " AND forgets_at <= ?",
                        (notebook_id, stamp),
                    ).fetchone()
                ]
            self._shredder.destroy(due)
        with self._session(write=True) as conn:
            stamp = self._stamp(conn, now)
            for notebook_id in notebook_ids:
                counts = conn.execute(
                    f"SELECT {_CONTENT_COUNTS} FROM notebooks AS n"
                    " WHERE n.id = ? AND n.state IN ('open', 'expired') AND n.forgets_at <= ?",
                    (notebook_id, stamp),
                ).fetchone()
                if counts is None:
                    continue
                conn.execute(
                    "UPDATE notebooks SET state = 'purged', purged_at = ?1,"
                    " seal = oh_closed_seal(seal, 'purged', ?1) WHERE id = ?2",
                    (stamp, notebook_id),
                )
                purged[notebook_id] = dict(zip(CONTENT_TABLES, counts, strict=True))
        return purged

    def mark_empty(self, notebook_ids: Iterable[str], cutoff: datetime, now: datetime) -> list[str]:
        """Mark ``empty`` each notebook still ``opening`` since before ``cutoff`` (and since at
        least ``OPENING_GRACE_FLOOR`` before the stamp recorded)."""
        marked = []
        with self._session(write=True) as conn:
            stamp = self._stamp(conn, now)
            for notebook_id in notebook_ids:
                changed = conn.execute(
                    "UPDATE notebooks SET state = 'empty', purged_at = ?1,"
                    " seal = oh_closed_seal(seal, 'empty', ?1)"
                    " WHERE id = ?2 AND state = 'opening' AND started_at <= ?3"
                    f" AND started_at <= strftime('{_STAMP_FORMAT}', ?1, {_FLOOR})",
                    (stamp, notebook_id, utc_text(cutoff)),
                ).rowcount
                if changed:
                    marked.append(notebook_id)
        if self._shredder is not None:
            self._shredder.destroy(marked)  # an opening notebook has its key, never any content
        return marked

    def compact(self) -> bool:
        """As the store's ``compact``: rewrite every page, then truncate the WAL.

        ``VACUUM`` copies every table through a temporary database, which the authorizer would
        refuse (it attaches one, and reads content to copy it), and no PRAGMA passes it; these
        two fixed statements, issued here and nowhere else, run with the authorizer lifted.
        Nothing is returned to the caller but a flag."""
        with self._lock:
            try:
                self._conn.set_authorizer(None)
                try:
                    self._conn.execute("VACUUM")
                    return truncate_wal(self._conn, self._lock, self.busy_wait)
                finally:
                    self._conn.set_authorizer(purge_authorizer)
            except sqlite3.Error as exc:
                raise translate(ValueError(str(exc))) from exc

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        if self._shredder is not None:
            self._shredder.close()
