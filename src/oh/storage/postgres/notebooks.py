"""The PostgreSQL backend: the memory database on a server that many ``oh serve`` processes
share (docs/design.md), and the purge worker's delete-only credential.

Every write is one transaction that first locks the notebook's row (``SELECT … FOR UPDATE``),
so writers to one notebook take turns across every process and server; the primary key
``(notebook_id, version)`` and unique ``(notebook_id, request_id)`` hold even if they did not.
What a write means comes from ``oh.core`` exactly as on the embedded backend; only I/O
differs, so digests, hashes and canonical content are byte-identical on both.

A ``remember`` is one statement in the common case (``oh_remember``, migration 0006): the
entry is built in Python on the head the store last saw and the database writes it under the
row lock only if ``decide`` would have written that very entry; anything else goes the full
path (locked reads, ``decide``, writes). The pool checks a connection at checkout only if it
sat idle a while (``CHECK_AFTER_IDLE``): the check is a round trip of its own.

Driver errors are translated in ``translated`` and nowhere else. ``psycopg`` (the ``postgres``
extra) is imported when a store is opened, so ``import oh`` works without it.

With a keyring (docs/keys.md) every notebook's content is sealed with its own data key before it
goes into SQL and opened when it comes out (``oh.keys.sealing``); the keys live in the key
store, an embedded file or a database in a cluster of its own (``oh.storage.postgres.keys``),
never beside the notes: this cluster's base backups and WAL archive would otherwise keep every
key that forgetting destroys.

Schema objects live in the first schema of the connection's ``search_path`` (``public``
unless the URL or the role says otherwise: ``?options=-csearch_path%3Doh``), so memory and
knowledge may share one database or use two. Migrations run at open, serialized across
servers starting at once by a transaction-scoped advisory lock.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from oh.core.changes import (
    Applied,
    LogEntry,
    Refused,
    RememberResult,
    genesis_hash,
)
from oh.core.clock import utc_text
from oh.core.decision import Call, Reuse, Seen, Write, decide
from oh.core.notebook import check_not_closed
from oh.core.records import StoredRecord, kind_of
from oh.core.seals import sealed_row_or_none
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
from oh.keys import Keyring, KeyShredding, NotebookCipher
from oh.keys.sealing import opened_values, tokens
from oh.storage.base import RecordCheck, VectorRow
from oh.storage.postgres.prepared import PreparedCall
from oh.storage.sql import Connection, QmarkConnection
from oh.storage.sql.notebooks import SqlMemoryStore

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "PostgresDatabase",
    "PostgresMemoryStore",
    "PostgresPurgeAccess",
    "credential_pool",
    "migrate",
    "open_postgres_memory",
    "open_postgres_purge",
    "roles_sql",
    "sealing_recorded",
    "translate",
    "translated",
]

logger = logging.getLogger("oh.storage")

MEMORY_MIGRATIONS = "oh.storage.migrations.postgres"
POOL_TIMEOUT = 10.0  # seconds to wait for a free connection before storage_unavailable
CHECK_AFTER_IDLE = 1.0  # seconds idle in the pool after which a connection is checked on checkout
# Seconds a full compaction waits for transactions older than it to end (``_vacuum``).
COMPACTION_WAIT = 60.0
EXTRA_HINT = "PostgreSQL storage needs the postgres extra: pip install 'oh-memory[postgres]'"
_ALL = 2**31 - 1  # oh_expired_notebooks' limit when the ids it is asked about are given


def _psycopg() -> Any:
    """The driver, imported on first use: ``import oh`` must work without the extra."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StorageUnavailable(EXTRA_HINT) from exc
    return psycopg, psycopg_pool


# -- errors ------------------------------------------------------------------------------------


def _refusal(reason: str) -> OhError:
    """One of our triggers refused (the database enforcing an invariant the code also checks):
    the same mapping as the embedded backend's, by the same ``oh: ...`` messages."""
    if "purged" in reason or "not open" in reason:
        return Purged(f"refused by the database: {reason}")
    if "already decided" in reason:
        return AlreadyExists(f"refused by the database: {reason}")
    return Forbidden(f"refused by the database: {reason}")


# SQLSTATE classes (first two characters) and codes that mean "try again later".
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58", "40", "55", "HV")
_DAMAGED = ("XX001", "XX002")  # data_corrupted, index_corrupted


def translate(exc: Exception) -> OhError:
    """Map a psycopg (or pool) error to Oh's error tree, by SQLSTATE where there is one."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if "oh: " in message:
        return _refusal(message.split("oh: ", 1)[1])
    if sqlstate == "23505":
        return AlreadyExists(f"already stored: {message}")
    if sqlstate in _DAMAGED:
        return IntegrityError(f"the database reports damaged data: {message}")
    if sqlstate == "42501":
        return Forbidden(f"the database role may not do this: {message}")
    if sqlstate.startswith("22") or (not sqlstate and isinstance(exc, _psycopg()[0].DataError)):
        # (without a SQLSTATE: psycopg refused the value before sending it, e.g. a NUL in text)
        return InvalidArgument(f"the database refused a value: {message}")
    if sqlstate[:2] in _UNAVAILABLE_CLASSES:
        return StorageUnavailable(f"storage unavailable: {message}")
    if sqlstate == "42P01":
        return StorageUnavailable(f"storage unavailable (schema missing?): {message}")
    return StorageUnavailable(f"storage error: {message}")


@contextmanager
def translated() -> Iterator[None]:
    """The one place where driver errors become ``OhError``s (original chained)."""
    try:
        yield
    except OhError:
        raise
    except Exception as exc:
        psycopg, _ = _psycopg()
        if isinstance(exc, psycopg.Error):
            raise translate(exc) from exc
        raise


# -- migrations --------------------------------------------------------------------------------

_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component  TEXT COLLATE "C" NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
)
"""


def _steps(package: str) -> list[tuple[int, str, str]]:
    return sorted(
        (int(entry.name.split("_", 1)[0]), entry.name, entry.read_text("utf-8"))
        for entry in resources.files(package).iterdir()
        if entry.name.endswith(".sql")
    )


def migrate(
    conn: psycopg.Connection[Any], component: str, package: str, *, upto: int | None = None
) -> int:
    """Apply the numbered ``*.sql`` files of ``package`` not yet applied; return the version.

    One transaction under ``pg_advisory_xact_lock``: servers starting at once queue here, the
    first applies each step, the others find it recorded. Objects go into the connection's
    current schema; SECURITY DEFINER functions pin their ``search_path`` to it. A step with
    work SQL should not do (``_BACKFILLS``) runs it right after its statements, in the same
    transaction. ``upto`` stops after that step (tests build an earlier schema with it).
    """
    steps = [step for step in _steps(package) if upto is None or step[0] <= upto]
    backfills = _BACKFILLS.get(package, {})
    with conn.transaction():
        schema = conn.execute("SELECT current_schema()").fetchone()
        if schema is None or schema[0] is None:
            raise StorageUnavailable("no schema to create Oh's tables in (check search_path)")
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('oh/migrations'), hashtext(%s))", (schema[0],)
        )
        psycopg, _ = _psycopg()
        conn.execute(
            psycopg.sql.SQL("SET LOCAL search_path TO {}, pg_temp").format(
                psycopg.sql.Identifier(schema[0])
            )
        )
        conn.execute(_SCHEMA_MIGRATIONS)
        done = {
            row[0]
            for row in conn.execute(
                "SELECT version FROM schema_migrations WHERE component = %s", (component,)
            ).fetchall()
        }
        for number, name, sql in steps:
            if number in done:
                continue
            conn.execute(sql.encode("utf-8"))  # no parameters: several statements at once
            if number in backfills:
                backfills[number](conn)
            conn.execute(
                "INSERT INTO schema_migrations (component, version, name) VALUES (%s, %s, %s)",
                (component, number, name),
            )
    return max((number for number, _, _ in steps), default=0)


def _seal_existing(conn: psycopg.Connection[Any]) -> None:
    """Migration 0005's step in Python: seal every notebook row written before seals existed,
    as it is now, with the seal's one definition (``oh.core.seals``). Runs once, inside the
    migration's transaction."""
    rows = conn.execute(
        "SELECT id, owner, document, run, state, started_at, forgets_at, pinned_revision,"
        " purged_at FROM notebooks"
    ).fetchall()
    with conn.cursor() as cur:
        cur.executemany(
            "UPDATE notebooks SET seal = %s WHERE id = %s",
            [(sealed_row_or_none(r), r[0]) for r in rows],
        )


# Work a migration step needs beyond its SQL, by migration package and step number.
_BACKFILLS: dict[str, dict[int, Callable[[psycopg.Connection[Any]], None]]] = {
    MEMORY_MIGRATIONS: {5: _seal_existing},
}


_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _ident(name: str) -> str:
    """A safely quoted SQL identifier; only plain lower-case names are accepted."""
    if _IDENTIFIER.fullmatch(name) is None:
        raise InvalidArgument(f"{name!r} is not a plain identifier (a-z, 0-9, _)")
    return f'"{name}"'


def roles_sql(*, schema: str = "oh", app_role: str = "oh_app", purge_role: str = "oh_purge") -> str:
    """The SQL a database administrator runs once (``oh postgres roles``) to create Oh's roles.

    ``app_role`` owns the schema and everything in it: ``oh serve`` connects as it and migrates
    at start. ``purge_role`` holds no table privilege at all: it may use the schema and execute
    its functions, of which only the purge functions (SECURITY DEFINER) do anything it could
    not do itself, which is nothing. Idempotent; run it before the first start or after.
    """
    app, purge, space = _ident(app_role), _ident(purge_role), _ident(schema)
    lines = [
        "-- Oh on PostgreSQL: roles and schema. Run as a superuser (or a role with CREATEROLE",
        "-- that owns the database), once; running it again changes nothing.",
        "DO $$",
        "BEGIN",
        f"    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{app_role}') THEN",
        f"        CREATE ROLE {app} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE;",
        "    END IF;",
        f"    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{purge_role}') THEN",
        f"        CREATE ROLE {purge} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;",
        "    END IF;",
        "END",
        "$$;",
    ]
    if schema == "public":
        lines += [
            f"GRANT USAGE, CREATE ON SCHEMA public TO {app};",
            f"GRANT USAGE ON SCHEMA public TO {purge};",
        ]
    else:
        lines += [
            f"CREATE SCHEMA IF NOT EXISTS {space} AUTHORIZATION {app};",
            f"REVOKE ALL ON SCHEMA {space} FROM PUBLIC;",
            f"GRANT USAGE ON SCHEMA {space} TO {purge};",
            f"ALTER ROLE {app} SET search_path = {space};",
            f"ALTER ROLE {purge} SET search_path = {space};",
        ]
    lines += [
        "-- The purge role may run the schema's functions (today's and those later migrations",
        "-- add) and touch no table: the purge functions act for it.",
        f"ALTER DEFAULT PRIVILEGES FOR ROLE {app} IN SCHEMA {space}",
        f"    GRANT EXECUTE ON FUNCTIONS TO {purge};",
        f"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {space} TO {purge};",
        f"REVOKE ALL ON ALL TABLES IN SCHEMA {space} FROM {purge};",
        "-- So that compaction can release the WAL segments that logged forgotten text.",
        f"GRANT pg_checkpoint TO {app};",
        f"GRANT EXECUTE ON FUNCTION pg_catalog.pg_switch_wal() TO {app};",
        "-- Set passwords (or use certificates) before connecting over a network, e.g. in psql:",
        f"--   \\password {app_role}",
        f"--   \\password {purge_role}",
    ]
    return "\n".join(lines) + "\n"


# -- the database ------------------------------------------------------------------------------


class _CheckWhenIdle:
    """The pool's checkout check, sent only for a connection idle ``CHECK_AFTER_IDLE`` or more.

    The check is a round trip, as costly as a whole ``remember``: skipped for a connection
    back from use a moment ago, which a server restart is unlikely to have cut since. One it
    did cut fails its next statement and the pool discards it: ``remember`` sends its one
    statement again on a new connection (it is idempotent); any other call answers
    ``storage_unavailable`` once (callers retry identically). One that sat idle longer is
    checked and replaced at checkout.
    """

    def __init__(self, check: Callable[[Any], None]) -> None:
        self._check = check
        self._returned: WeakKeyDictionary[Any, float] = WeakKeyDictionary()

    def connection(self, pool: ConnectionPool[Any]) -> _Checkout:
        """``pool.connection()``, noting when the connection goes back. (Not the pool's
        ``reset`` callback: with one the pool returns every connection through its worker
        thread, which the next checkout waits for.)"""
        return _Checkout(pool, self._returned)

    def __call__(self, conn: Any) -> None:
        returned = self._returned.get(conn)
        if returned is None or time.monotonic() - returned >= CHECK_AFTER_IDLE:
            self._check(conn)


_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE: no transaction open, nothing to commit


class _Checkout:
    """What ``pool.connection()`` does (a connection out; at the end its transaction committed,
    or rolled back on an error, and the connection back), without its two generator-based
    context managers: about 5 µs of CPU less a call, on the path every ``remember`` takes."""

    __slots__ = ("_conn", "_pool", "_returned")

    def __init__(self, pool: ConnectionPool[Any], returned: WeakKeyDictionary[Any, float]) -> None:
        self._pool = pool
        self._returned = returned

    def __enter__(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] = self._pool.getconn()
        self._conn = conn
        return conn

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        conn = self._conn
        try:
            if kind is not None or conn.pgconn.transaction_status != _IDLE:
                conn.__exit__(kind, None, None)  # commit, or roll back (a pool's stays open)
        finally:
            self._returned[conn] = time.monotonic()
            self._pool.putconn(conn)


class PostgresDatabase:
    """A connection pool on one PostgreSQL database, migrated on open. Thread-safe."""

    COMPONENT = ""  # the migration sequence (``memory``, ``knowledge``)
    MIGRATIONS = ""  # the package holding its numbered *.sql steps
    PREPARED: tuple[PreparedCall, ...] = ()  # prepared on each connection, after migrating

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = POOL_TIMEOUT,
        application_name: str = "oh",
        full_compaction: bool = True,
        compaction_wait: float = COMPACTION_WAIT,
    ) -> None:
        self.full_compaction = full_compaction
        self.compaction_wait = compaction_wait
        _, psycopg_pool = _psycopg()
        self._check = check = _CheckWhenIdle(psycopg_pool.ConnectionPool.check_connection)
        self._pool: ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            open=False,
            kwargs={"autocommit": False, "application_name": application_name},
            check=check,
            configure=self._prepare if self.PREPARED else None,
            name=f"oh-{self.COMPONENT or 'db'}",
        )
        with translated():
            self._pool.open(wait=True, timeout=timeout)
            try:
                if self.MIGRATIONS:
                    with self._pool.connection() as conn:
                        migrate(conn, self.COMPONENT, self.MIGRATIONS)
                        self._prepare(conn)
            except BaseException:
                self._pool.close()
                raise

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        for call in self.PREPARED:
            call.prepare(conn)

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection of the pool, for one transaction (checked first only if it sat idle)."""
        return self._check.connection(self._pool)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """One READ COMMITTED transaction, committed at the end, rolled back on any error.

        Statements go out in psycopg's pipeline mode: each is sent without waiting for the one
        before it, a fetch waits for what it needs, the commit for the rest. So ``BEGIN``,
        a write's statements and ``COMMIT`` cost round trips only where a result is needed.
        """
        with translated(), self._connection() as conn, conn.pipeline(), conn.transaction():
            yield conn

    @contextmanager
    def _snapshot(self) -> Iterator[psycopg.Connection[Any]]:
        """One read-only transaction that sees one snapshot across several statements."""
        with translated(), self._connection() as conn, conn.pipeline(), conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield conn

    FOR_UPDATE = " FOR UPDATE"

    @contextmanager
    def _write(self) -> Iterator[QmarkConnection]:
        """``_transaction`` for the shared statements (``oh.storage.sql``)."""
        with self._transaction() as conn:
            yield QmarkConnection(conn)

    _statement = _write  # one statement is one transaction: the pool hands out no autocommit

    @contextmanager
    def _read(self) -> Iterator[QmarkConnection]:
        """``_snapshot`` for the shared statements (``oh.storage.sql``)."""
        with self._snapshot() as conn:
            yield QmarkConnection(conn)

    def _where(self) -> str:
        """The database as a person names it (no credential): server, database, schema."""
        with self._read() as conn:
            row = conn.execute(
                "SELECT coalesce(host(inet_server_addr()), 'local'), inet_server_port(),"
                " current_database(), current_schema()"
            ).fetchone()
        host, port, database, schema = row
        return f"postgresql://{host}:{port}/{database} (schema {schema})"

    def _vacuum(self, tables: Sequence[str], *, full: bool, wait: float | None = None) -> bool:
        """``VACUUM`` (or ``VACUUM FULL``) the tables; with ``full``, also switch to a new WAL
        segment and checkpoint so the segments that logged deleted rows are released.

        A transaction whose snapshot is older than a forget may still see the forgotten rows,
        so ``VACUUM FULL`` copies them into the new files ("recently dead") for as long as it
        lives: a full compaction first waits, up to ``compaction_wait`` seconds (or ``wait``),
        for every transaction open in this database when it began to end (as ``CREATE INDEX
        CONCURRENTLY`` waits for older snapshots). Returns False if one outlived the wait (the
        next compaction finishes the job) or if this role may not do the WAL step (the server's
        next checkpoint will)."""
        psycopg, _ = _psycopg()
        sql = psycopg.sql
        statement = sql.SQL("VACUUM {}{}").format(
            sql.SQL("FULL ") if full else sql.SQL(""),
            sql.SQL(", ").join(sql.Identifier(t) for t in tables),
        )
        with translated(), self._pool.connection() as conn:
            conn.autocommit = True  # VACUUM cannot run inside a transaction
            try:
                settled = self._older_transactions_ended(conn, wait) if full else True
                conn.execute(statement)
                if not full:
                    return True
                try:
                    conn.execute("SELECT pg_switch_wal()")
                    conn.execute("CHECKPOINT")
                except psycopg.errors.InsufficientPrivilege:
                    return False
                return settled
            finally:
                conn.autocommit = False

    def _older_transactions_ended(
        self, conn: psycopg.Connection[Any], wait: float | None = None
    ) -> bool:
        """Wait until every transaction open in this database now has ended, or ``wait`` (by
        default ``compaction_wait``) seconds have passed (False, with a warning naming the
        processes).

        Each transaction holds a lock on its own virtual transaction id, which ``pg_locks``
        shows to every role; a new transaction gets a new id, so an id gone is a transaction
        ended. (A standby's queries reported through ``hot_standby_feedback`` and replication
        slots hold rows back too, and show no such lock: docs/postgres.md.)"""
        older = set(conn.execute(_OPEN_TRANSACTIONS).fetchall())
        deadline = time.monotonic() + (self.compaction_wait if wait is None else wait)
        while older:
            if time.monotonic() >= deadline:
                pids = sorted({pid for pid, _ in older})
                logger.warning(
                    "compaction: transactions older than it are still open (server processes"
                    " %s); what they can see stays in the files until the next compaction",
                    ", ".join(map(str, pids)),
                )
                return False
            time.sleep(COMPACTION_POLL)
            older &= set(conn.execute(_OPEN_TRANSACTIONS).fetchall())
        return True

    def close(self) -> None:
        with translated():
            self._pool.close()


# The transactions open in this database but for this one: (process id, virtual transaction id).
_OPEN_TRANSACTIONS = (
    "SELECT l.pid, l.virtualxid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'virtualxid' AND l.granted AND l.pid <> pg_backend_pid()"
    " AND a.datname = current_database()"
)
COMPACTION_POLL = 0.05  # seconds between two looks at the open transactions


# verify's view of the current records (``MemoryStore.record_checks``): stamps, no content.
# The log row of a record's version must hold a change that wrote this very text under this
# name (``oh_log_values``, migration 0010: the values of a column, in order).
_RECORD_CHECKS = (
    "SELECT r.name, r.kind, r.digest, r.author, r.written_at, r.version, EXISTS ("
    " SELECT 1 FROM log AS l"
    " CROSS JOIN LATERAL oh_log_values(l.changes, l.name) AS n"
    " JOIN LATERAL oh_log_values(l.changes, l.op) AS o ON o.i = n.i"
    " JOIN LATERAL oh_log_values(l.changes, l.content) AS c ON c.i = n.i"
    " WHERE l.notebook_id = r.notebook_id AND l.version = r.version"
    " AND n.v = r.name AND o.v IN ('add', 'replace') AND c.v = r.content)"
    " FROM records AS r WHERE r.notebook_id = ? {after} ORDER BY r.name LIMIT ?"
)


# A remember call in one statement (migration 0006), psycopg placeholders: the five arrays
# of changes go in binary (``%b``), which psycopg adapts in about half the time of text.
_REMEMBER = (
    "SELECT status, version, head_hash, names, digests FROM"
    " oh_remember(%s, %s, %s, %s, %s, %s, %s, %s, %b, %b, %b, %b, %b)"
)
# A single-change call, its change as five plain values (migration 0010): no array to adapt.
_REMEMBER_ONE = (
    "SELECT status, version, head_hash, names, digests FROM"
    " oh_remember_one(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# The same single-change call sent through libpq (``PreparedCall``), its answer as text.
_REMEMBER_ONE_PREPARED = PreparedCall(
    "oh_remember_one",
    "SELECT status, version, head_hash, array_to_json(names)::TEXT,"
    " array_to_json(digests)::TEXT FROM oh_remember_one("
    + ", ".join(f"${n}" for n in range(1, 14))
    + ")",
)
HEADS_KEPT = 1024  # notebooks whose head a store remembers (a guess each; see ``_remember``)


def _remember_head(
    heads: dict[str, tuple[int, str]], notebook_id: str, version: int, head_hash: str
) -> None:
    if len(heads) >= HEADS_KEPT and notebook_id not in heads:
        heads.clear()
    heads[notebook_id] = (version, head_hash)


def _answer(values: list[bytes | None]) -> tuple[Any, ...]:
    """A row of ``_REMEMBER_ONE_PREPARED`` as the ordinary statement answers it."""
    status, version, head_hash, names, digests = values
    return (
        None if status is None else status.decode(),
        None if version is None else int(version),
        None if head_hash is None else head_hash.decode(),
        None if names is None else json.loads(names),
        None if digests is None else json.loads(digests),
    )


def _counts(value: Any) -> dict[str, int]:
    if isinstance(value, str):
        value = json.loads(value)
    return {str(table): int(count) for table, count in (value or {}).items()}


class PostgresMemoryStore(PostgresDatabase, SqlMemoryStore):
    """``MemoryStore`` on PostgreSQL: the shared statements (``oh.storage.sql.notebooks``) and the
    log in this backend's layout (an entry row and a row per change)."""

    COMPONENT = "memory"
    MIGRATIONS = MEMORY_MIGRATIONS
    PREPARED = (_REMEMBER_ONE_PREPARED,)

    def __init__(self, url: str, *, keyring: Keyring | None = None, **options: Any) -> None:
        """``options`` as for ``PostgresDatabase``.

        With ``keyring`` the notebooks' content is sealed (docs/keys.md); the first time a
        database is opened with one, every notebook written before is sealed (``_seal_notebooks``).
        A database whose content is sealed is refused without one (``storage_unavailable``)."""
        # The (version, head hash) of each notebook as this store last wrote or was told it:
        # only a guess to build the next entry on, which ``oh_remember`` checks under the lock.
        self._known_heads: dict[str, tuple[int, str]] = {}
        super().__init__(url, **options)
        self._keyring = keyring
        try:
            self._check_sealing()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the pool, then the keyring it was given (its key store with it)."""
        try:
            super().close()
        finally:
            if self._keyring is not None:
                self._keyring.close()

    def _sealing_recorded(self) -> bool:
        with self._read() as conn:
            # A schema migrated by an older release (or not by this store) has no table yet:
            # nothing in it was sealed.
            table = conn.execute("SELECT to_regclass('sealing')").fetchone()
            return (
                table is not None
                and table[0] is not None
                and conn.execute("SELECT since FROM sealing").fetchone() is not None
            )

    def _compact_sealed(self) -> None:
        # The full rewrite whatever ``full_compaction`` says, since a plain VACUUM would leave
        # the plain text in the pages' free space. (Base backups and archived WAL from before
        # keep it: docs/keys.md.)
        self._compact(full=True)

    @contextmanager
    def _ephemeral(self) -> Iterator[QmarkConnection]:
        """A transaction whose commit does not wait for the WAL flush."""
        with self._write() as conn:
            conn.execute("SET LOCAL synchronous_commit = off")
            yield conn

    # -- notebooks ------------------------------------------------------------------------

    # -- writes ---------------------------------------------------------------------------

    def _remember(self, call: Call) -> RememberResult:
        """One statement, one round trip, in the common case: the entry is built on the head
        this store last saw (the genesis head for a first write) and ``oh_remember`` (migration
        0006) writes it under the notebook's row lock only if ``decide`` would have written
        that very entry; an identical retry and a stale call are answered by it too. Whatever
        it does not settle (an error to raise, a head it did not know) writes nothing and goes
        the full path, ``_decide_and_write``."""
        notebook_id, based_on = call.notebook_id, call.based_on
        names = call.names
        if len(set(names)) != len(names):
            return self._decide_and_write(call)  # one upsert per name: the full path's form
        prepared = self._contents(call)
        if prepared is None:
            return self._decide_and_write(call)
        contents, cipher = prepared
        heads = self._known_heads
        known = heads.get(notebook_id)
        if known is not None and known[0] == based_on:
            head: str | None = known[1]
        else:
            head = genesis_hash(notebook_id) if based_on == 0 else None
        for _ in range(2):  # a second time only after 'head' told us the head to build on
            entry = None if head is None else call.entry(based_on + 1, head)
            try:
                status, version, head_hash, written, digests = self._one_round_trip(
                    call, entry, contents, cipher
                )
                if cipher is not None:
                    if head_hash is not None:
                        head_hash = cipher.untoken(head_hash, "hash")
                    if written is not None:
                        written = opened_values(cipher, written, "name")
                        digests = opened_values(cipher, digests, "digest")
            except BaseException:
                heads.pop(notebook_id, None)
                raise
            if status == "applied":
                _remember_head(heads, notebook_id, version, head_hash)
                return call.applied(version)
            if status == "reused":
                return Applied(version, tuple(zip(written, digests, strict=True)))
            if status == "stale":
                _remember_head(heads, notebook_id, version, head_hash)
                return Refused(current_version=version)
            if status != "head":
                break
            _remember_head(heads, notebook_id, version, head_hash)
            head = head_hash
        heads.pop(notebook_id, None)
        return self._decide_and_write(call)

    def _contents(self, call: Call) -> tuple[list[str | None], NotebookCipher | None] | None:
        """The call's contents as ``oh_remember`` writes them: sealed, when this store seals,
        for the version they are written at (it writes only on ``based_on``), with the cipher
        that keeps its other values as tokens. None when the notebook has no data key (no such
        notebook, a forgotten one): the full path tells."""
        logged = call.logged
        keyring = self._keyring
        if keyring is None:
            return [c.content for c in logged], None
        try:
            cipher = keyring.cipher(call.notebook_id)
        except Purged:
            return None
        version = call.based_on + 1
        return [
            None if c.content is None else cipher.seal(c.content, c.name, version, c.digest or "")
            for c in logged
        ], cipher

    def _one_round_trip(
        self,
        call: Call,
        entry: LogEntry | None,
        contents: list[str | None],
        cipher: NotebookCipher | None,
    ) -> Any:
        """``oh_remember`` alone in its transaction: on an autocommit connection one statement
        is one transaction, sent with its commit in one round trip. Its values are kept as
        tokens when this store seals (``cipher``); what it answers is as kept."""
        logged = call.logged
        request_id, fingerprint = call.request_id, call.fingerprint
        prev_hash = None if entry is None else entry.prev_hash
        hash_ = None if entry is None else entry.hash
        digests = [c.digest for c in logged]
        if cipher is not None:
            token = cipher.token
            request_id = token(request_id, "request", keep=False)
            fingerprint = token(fingerprint, "fingerprint", keep=False)
            prev_hash = None if prev_hash is None else token(prev_hash, "hash")
            hash_ = None if hash_ is None else token(hash_, "hash")
            digests = [None if d is None else token(d, "digest") for d in digests]
        changes = (
            [c.op for c in logged],
            tokens(cipher, call.names, "name"),
            tokens(cipher, [kind_of(c.name) for c in logged], "kind"),
            contents,
            digests,
        )
        single = len(logged) == 1
        statement = _REMEMBER_ONE if single else _REMEMBER
        params = (
            call.notebook_id,
            call.based_on,
            request_id,
            fingerprint,
            call.author,
            call.written_at,
            prev_hash,
            hash_,
            *([values[0] for values in changes] if single else changes),
        )
        for attempt in (1, 2):
            try:
                with translated(), self._connection() as conn:
                    if single and (answer := _REMEMBER_ONE_PREPARED(conn, params)) is not None:
                        return _answer(answer)
                    conn.autocommit = True
                    try:
                        row = conn.execute(statement, params).fetchone()
                    finally:
                        with suppress(Exception):  # a broken connection: the pool discards it
                            conn.autocommit = False
                break
            except StorageUnavailable as exc:
                # A connection the pool handed out unchecked (``_CheckWhenIdle``) that a server
                # restart cut: sent once more on a new one. Safe whatever the first reached:
                # the call is idempotent by its request id, so a first that committed is
                # answered as the original by the second.
                if attempt == 2 or not isinstance(exc.__cause__, _psycopg()[0].OperationalError):
                    raise
        if row is None:
            raise StorageUnavailable("storage error: oh_remember answered nothing")
        return row

    def _decide_and_write(self, call: Call) -> RememberResult:
        """The full path: read what ``decide`` needs under the row lock, decide, write."""
        notebook_id, request_id = call.notebook_id, call.request_id
        names = call.names
        cipher = None
        if self._keyring is not None:
            try:
                cipher = self._keyring.cipher(notebook_id)
            except Purged:
                cipher = None  # no such notebook, or a closed one: ``decide`` says which
            else:
                request_id = cipher.token(request_id, "request", keep=False)
                names = tokens(cipher, names, "name")
        with self._write() as conn:
            # The row lock is its own statement, first: in READ COMMITTED each later statement
            # takes a fresh snapshot, so the two reads after it see everything the previous
            # holder of the lock wrote. The three are sent together (one round trip), and so
            # are the writes and the commit.
            locked = conn.execute(
                "SELECT state, forgets_at, version, head_hash FROM notebooks"
                " WHERE id = ? FOR UPDATE",
                (notebook_id,),
            )
            used = conn.execute(
                "SELECT version, fingerprint FROM log WHERE notebook_id = ? AND request_id = ?",
                (notebook_id, request_id),
            )
            present = conn.execute(
                "SELECT name FROM records WHERE notebook_id = ? AND name = ANY(?)",
                (notebook_id, names),
            )
            row = locked.fetchone()
            if row is None:
                raise NotFound(f"no notebook {notebook_id}")
            state, forgets_at, version, head_hash = row
            prior_version, prior_fingerprint = used.fetchone() or (None, None)
            existing = [r[0] for r in present.fetchall()]
            if cipher is not None:
                head_hash = cipher.untoken(head_hash, "hash")
                if prior_fingerprint is not None:
                    prior_fingerprint = cipher.untoken(prior_fingerprint, "fingerprint")
                existing = opened_values(cipher, existing, "name")
            seen = Seen(
                state, forgets_at, version, head_hash, prior_version, prior_fingerprint, existing
            )
            written: LogEntry | None = None
            result: RememberResult
            match decide(call, seen):
                case Write(entry, applied):
                    stored = self._sealed(entry)
                    self._log_entry(conn, notebook_id, stored)
                    self._apply_current(conn, notebook_id, stored, self._kinds(entry))
                    conn.execute(
                        "UPDATE notebooks SET version = ?, head_hash = ? WHERE id = ?",
                        (stored.version, stored.hash, notebook_id),
                    )
                    written, result = entry, applied
                case Reuse(prior):
                    result = self._entry(conn, notebook_id, prior).result()
                case Refused() as refused:
                    result = refused
        if written is not None:  # committed
            _remember_head(self._known_heads, notebook_id, written.version, written.hash)
        return result

    @staticmethod
    def _apply_current(
        conn: Connection, notebook_id: str, entry: LogEntry, kinds: Sequence[str]
    ) -> None:
        """Apply ``entry``'s changes to the current records (removes, then upserts); ``entry``
        and ``kinds`` as kept at rest."""
        removals = [c.name for c in entry.changes if c.op == "remove"]
        upserts = [
            (
                notebook_id,
                c.name,
                kind,
                c.content,
                c.digest,
                entry.author,
                entry.written_at,
                entry.version,
            )
            for c, kind in zip(entry.changes, kinds, strict=True)
            if c.op != "remove"
        ]
        if removals:
            conn.execute(
                "DELETE FROM records WHERE notebook_id = ? AND name = ANY(?)",
                (notebook_id, removals),
            )
        if upserts:
            conn.executemany(
                "INSERT INTO records (notebook_id, name, kind, content, digest, author,"
                " written_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (notebook_id, name) DO UPDATE SET kind = EXCLUDED.kind,"
                " content = EXCLUDED.content, digest = EXCLUDED.digest,"
                " author = EXCLUDED.author, written_at = EXCLUDED.written_at,"
                " version = EXCLUDED.version",
                upserts,
            )

    def forget(self, notebook_id: str, now: datetime) -> dict[str, int]:
        """Delete a notebook's content at once, leave its tombstone; return what was removed.

        The rows are gone at commit for every reader; their space is reclaimed by (auto)vacuum
        (``compact``), which a forget does not wait for.
        """
        stamp = utc_text(now)
        if self._keyring is not None:
            # Crypto-shredding: the key goes first, durably, in its own step; from then on no
            # copy of this notebook's content anywhere (a base backup, the WAL archive) can be
            # opened. The rows follow. No transaction of this store is open meanwhile: the key
            # store's compaction waits for every older transaction of its database to end. A
            # notebook that is missing or already closed has no key left to destroy; the
            # transaction below answers it.
            self._keyring.destroy([notebook_id])
        with self._write() as conn:
            notebook = self._notebook(conn, notebook_id, lock=True)
            if notebook.state in ("purged", "empty"):
                check_not_closed(notebook_id, notebook.state)
            # The tombstone's seal is chained in SQL, exactly as the purge functions chain it.
            conn.execute(
                "UPDATE notebooks SET state = 'purged', purged_at = ?,"
                " seal = oh_closed_seal(seal, 'purged', ?) WHERE id = ?",
                (stamp, stamp, notebook_id),
            )
            row = conn.execute("SELECT oh_delete_content(?)", (notebook_id,)).fetchone()
        assert row is not None
        return _counts(row[0])

    def compact(self) -> bool:
        """Make forgotten content leave the database's files (docs/design.md).

        ``VACUUM FULL`` rewrites the content tables (the old files are truncated at once; a
        plain ``VACUUM`` would leave deleted bytes in the free space of pages), then a WAL
        switch and a checkpoint release the segments that logged the deleted rows (removed at
        once when the server runs with ``wal_recycle=off``). The rewrite locks the content
        tables while it runs: schedule it (``full_compaction=False`` makes it a plain
        ``VACUUM``). False if the role may not do the WAL step (``pg_checkpoint``).
        """
        return self._compact(full=self.full_compaction)

    def _compact(self, *, full: bool) -> bool:
        with self._write() as conn:
            tables = [r[0] for r in conn.execute("SELECT name FROM content_tables ORDER BY 1")]
        return self._vacuum(tables, full=full)

    # -- reads ----------------------------------------------------------------------------

    def record_checks(self, notebook_id: str, *, page: int = 2000) -> Iterator[RecordCheck]:
        # Keyset pages by name, each one transaction; the database compares each record's text
        # with the change its entry logged for that name.
        last: str | None = None
        while True:
            with self._write() as conn:
                rows = conn.execute(
                    _RECORD_CHECKS.format(after="" if last is None else "AND r.name > ?"),
                    (notebook_id, page) if last is None else (notebook_id, last, page),
                ).fetchall()
            for row in self._check_values(notebook_id, rows):
                yield RecordCheck(*row)
            if len(rows) < page:
                return
            last = rows[-1][0]

    def note_vector_rows(self, notebook_id: str, *, page: int = 500) -> Iterator[VectorRow]:
        rows = self._vector_rows(
            "SELECT notebook_id, model_id, digest, vector, seal FROM note_vectors"
            " WHERE notebook_id = ? AND (model_id, digest) > (?, ?)"
            " ORDER BY model_id, digest LIMIT ?",
            (notebook_id,),
            page,
        )
        return self._opened_vector_rows(notebook_id, rows)

    def reviewed_vector_rows(self, *, page: int = 500) -> Iterator[VectorRow]:
        rows = self._vector_rows(
            "SELECT owner, model_id, digest, vector, seal FROM reviewed_vectors"
            " WHERE (owner, model_id, digest) > (?, ?, ?)"
            " ORDER BY owner, model_id, digest LIMIT ?",
            (),
            page,
        )
        yield from rows

    def _vector_rows(self, sql: str, params: tuple[Any, ...], page: int) -> Iterator[VectorRow]:
        """Pages by primary key, each one read (a page of vectors is ~0.8 MB at 384
        dimensions). The key is the row's first three columns less those ``params`` fix (the
        notebook of note vectors); ``sql`` takes ``params``, the last key, then the page size."""
        fixed = len(params)
        last: tuple[Any, ...] = ("",) * (3 - fixed)
        while True:
            with self._read() as conn:
                rows = conn.execute(sql, (*params, *last, page)).fetchall()
            for row in rows:
                yield VectorRow(row[0], row[1], row[2], bytes(row[3]), row[4])
            if len(rows) < page:
                return
            last = tuple(rows[-1][fixed:3])

    @staticmethod
    def _insert_records(
        conn: Connection, notebook_id: str, records: Sequence[StoredRecord]
    ) -> None:
        conn.executemany(
            "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
            " version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    notebook_id,
                    r.name,
                    r.kind,
                    r.content,
                    r.digest,
                    r.author,
                    r.written_at,
                    r.version,
                )
                for r in records
            ],
        )


# -- the purge credential ----------------------------------------------------------------------


def credential_pool(
    url: str, name: str, *, max_size: int, timeout: float = POOL_TIMEOUT
) -> ConnectionPool[Any]:
    """A small pool for a narrow credential (a purge role), open and checked: every
    connection is checked at checkout (its calls are few and far between)."""
    _, psycopg_pool = _psycopg()
    pool: ConnectionPool[Any] = psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        timeout=timeout,
        open=False,
        kwargs={"autocommit": False, "application_name": name},
        check=psycopg_pool.ConnectionPool.check_connection,
        name=name,
    )
    with translated():
        pool.open(wait=True, timeout=timeout)
    return pool


class PostgresPurgeAccess:
    """The purge worker's credential on PostgreSQL, and nothing more.

    It connects as the purge role, which holds no privilege on any table: it cannot insert,
    update, delete or even read a row itself. Its whole power is four SECURITY DEFINER
    functions: list expired notebooks, purge one that is (re-checked atomically) still expired
    leaving the tombstone, list notebooks stuck ``opening``, and mark one of them ``empty``.

    With a key shredder (a sealed database, docs/keys.md) it also destroys the data keys of the
    notebooks it purges, first, and of those it marks empty, after.
    """

    def __init__(
        self,
        url: str,
        *,
        shredder: KeyShredding | None = None,
        timeout: float = POOL_TIMEOUT,
    ) -> None:
        """``shredder``: the purge credential on the key store of a sealed database (the
        embedded key store file, or a key database of its own, never this cluster's memory
        database); with it, the keys of the notebooks purged are destroyed before their rows."""
        self._shredder = shredder
        self._pool = credential_pool(url, "oh-purge", max_size=2, timeout=timeout)

    @contextmanager
    def _session(self) -> Iterator[psycopg.Connection[Any]]:
        with translated(), self._pool.connection() as conn, conn.transaction():
            yield conn

    def expired(self, now: datetime, limit: int = 1000) -> list[str]:
        """Ids of open notebooks whose forget time has passed."""
        with self._session() as conn:
            rows = conn.execute(
                "SELECT oh_expired_notebooks(%s, %s)", (utc_text(now), limit)
            ).fetchall()
        return [row[0] for row in rows]

    def stale_openings(self, cutoff: datetime, limit: int = 1000) -> list[str]:
        """Ids of notebooks still ``opening`` that started before ``cutoff``."""
        with self._session() as conn:
            rows = conn.execute(
                "SELECT oh_stale_openings(%s, %s)", (utc_text(cutoff), limit)
            ).fetchall()
        return [row[0] for row in rows]

    def purge(self, notebook_ids: Iterable[str], now: datetime) -> dict[str, dict[str, int]]:
        """Delete each notebook that is still past its forget time; return counts per notebook."""
        purged: dict[str, dict[str, int]] = {}
        stamp = utc_text(now)
        notebook_ids = list(notebook_ids)
        if self._shredder is not None and notebook_ids:
            # Crypto-shredding first, durably, for the notebooks that are due (a forget time
            # never moves, so one due now is due in the transaction below too). Only those are
            # purged: the database's clock bound may move on meanwhile, and a notebook purged
            # without its key destroyed first would break the order forgetting promises.
            with self._session() as conn:
                rows = conn.execute(
                    "SELECT id FROM oh_expired_notebooks(%s, %s) AS id WHERE id = ANY(%s)",
                    (stamp, _ALL, notebook_ids),
                ).fetchall()
            due = {row[0] for row in rows}
            notebook_ids = [notebook_id for notebook_id in notebook_ids if notebook_id in due]
            self._shredder.destroy(notebook_ids)
        with self._session() as conn:
            for notebook_id in notebook_ids:
                row = conn.execute(
                    "SELECT oh_purge_notebook(%s, %s)", (notebook_id, stamp)
                ).fetchone()
                if row is not None and row[0] is not None:
                    purged[notebook_id] = _counts(row[0])
        return purged

    def mark_empty(self, notebook_ids: Iterable[str], cutoff: datetime, now: datetime) -> list[str]:
        """Mark ``empty`` each notebook still ``opening`` since before ``cutoff``."""
        marked = []
        with self._session() as conn:
            for notebook_id in notebook_ids:
                row = conn.execute(
                    "SELECT oh_mark_empty(%s, %s, %s)",
                    (notebook_id, utc_text(cutoff), utc_text(now)),
                ).fetchone()
                if row is not None and row[0]:
                    marked.append(notebook_id)
        if self._shredder is not None:
            self._shredder.destroy(marked)  # an opening notebook has its key, never any content
        return marked

    def compact(self) -> bool:
        """False: on PostgreSQL (before 17) only a table's owner may ``VACUUM`` it, and this
        role owns nothing. Purged rows are invisible at commit; autovacuum (or the store's
        ``compact``) reclaims their space."""
        return False

    def close(self) -> None:
        try:
            with translated():
                self._pool.close()
        finally:
            if self._shredder is not None:
                self._shredder.close()


# -- opening by URL ----------------------------------------------------------------------------


def open_postgres_memory(url: str, **options: Any) -> PostgresMemoryStore:
    """The memory store at a ``postgresql://`` URL (migrated on open)."""
    return PostgresMemoryStore(url, **options)


def open_postgres_purge(url: str, **options: Any) -> PostgresPurgeAccess:
    """The purge credential at a ``postgresql://`` URL naming the purge role."""
    return PostgresPurgeAccess(url, **options)


def sealing_recorded(url: str) -> bool:
    """Whether the memory schema at ``url`` records that its notebooks are sealed, read in one
    read-only transaction (nothing is migrated or written): what a command that would create a
    master key asks first, since Oh never makes one over sealed data."""
    psycopg, _ = _psycopg()
    with translated(), psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        table = conn.execute("SELECT to_regclass('sealing')").fetchone()
        if table is None or table[0] is None:
            return False
        return conn.execute("SELECT 1 FROM sealing").fetchone() is not None
