"""A ``remember`` on PostgreSQL is one round trip in the common case (migration 0006's
``oh_remember``): a new entry on the head the store last saw, a stale call, an identical retry.

Round trips are counted on the wire: the store connects through a TCP relay that counts the
turns of each connection (a burst the client sends after the server last spoke). The pool's
checkout check is itself a round trip; it is sent only for a connection idle
``CHECK_AFTER_IDLE`` or more, which the tests set rather than wait for.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import oh.storage.postgres.notebooks as postgres
from oh.core.changes import Applied, LogEntry, Refused
from oh.errors import (
    AlreadyExists,
    Expired,
    InvalidArgument,
    NotFound,
    Purged,
    RequestIdReused,
    StorageUnavailable,
)
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.storage.memory import InMemoryStore
from oh.storage.postgres.notebooks import MEMORY_MIGRATIONS, PostgresMemoryStore, migrate
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.memory_store import (
    LIFETIME,
    SINGLE_CHANGE_CASES,
    T0,
    add,
    change_of,
    decided_as_reference,
    log_length,
    open_notebook,
    remove,
    replace,
    write,
)
from oh.testing.postgres_cluster import PostgresCluster, Schema, fresh_schema, shared_cluster
from oh.verify import verify_notebook
from test_postgres_store import run_sql, shipped

LATEST = shipped()[-1]  # the last migration this release ships
# A Flush message alone, which psycopg's pipeline sends after its closing Sync: the server
# answers nothing to it, so one arriving after the Sync's answer must not count as the client
# speaking last (the next call's burst then looked like no trip: 1 counted instead of 2).
FLUSH = b"H\x00\x00\x00\x04"
QUIET = 0.05  # seconds without traffic after which the relay counts a call as over


class Relay:
    """A TCP relay to the cluster that counts round trips: each burst a client sends after
    the server last sent it something (or first) is one."""

    def __init__(self, port: int) -> None:
        self._target = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self.round_trips = 0
        self._moved = time.monotonic()  # when the last burst, either way, went through
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._target))
            last = ["server"]
            threading.Thread(
                target=self._pump, args=(client, server, last, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, last, False), daemon=True
            ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, last: list[str], up: bool) -> None:
        try:
            while data := source.recv(65536):
                with self._lock:
                    self._moved = time.monotonic()
                    if up and data == FLUSH * (len(data) // len(FLUSH)):
                        pass  # nothing the server answers: neither a trip nor the last word
                    else:
                        if up and last[0] == "server":
                            self.round_trips += 1
                        last[0] = "client" if up else "server"
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def count(self) -> int:
        with self._lock:
            return self.round_trips

    def settled(self) -> int:
        """The count once nothing has gone through for a moment: a reply of the previous call
        still on its way must not turn the next call's first burst into no trip at all."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self._lock:
                if time.monotonic() - self._moved >= QUIET:
                    return self.round_trips
            time.sleep(QUIET / 5)
        return self.count()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def cluster() -> PostgresCluster:
    return shared_cluster()


@pytest.fixture
def schema(cluster: PostgresCluster) -> Iterator[Schema]:
    with fresh_schema(cluster) as schema:
        yield schema


@pytest.fixture
def relay(cluster: PostgresCluster) -> Iterator[Relay]:
    relay = Relay(cluster.port)
    yield relay
    relay.close()


@pytest.fixture
def never_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection counts as just used: the checkout check is never sent."""
    monkeypatch.setattr(postgres, "CHECK_AFTER_IDLE", 3600.0)


class _AnyWritten(tuple[tuple[str, str | None], ...]):
    """Equal to any ``written`` tuple: for results whose version is what a test checks."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, tuple)

    def __hash__(self) -> int:
        return 0


ANY_WRITTEN: Any = _AnyWritten()


def through(relay: Relay, schema: Schema) -> str:
    return schema.url().replace(f"127.0.0.1:{schema.cluster.port}/", f"127.0.0.1:{relay.port}/")


def round_trips(relay: Relay, action: Any) -> tuple[Any, int]:
    before = relay.settled()
    result = action()
    return result, relay.settled() - before


@pytest.fixture
def store(relay: Relay, schema: Schema, never_idle: None) -> Iterator[PostgresMemoryStore]:
    store = PostgresMemoryStore(through(relay, schema), max_size=1)
    yield store
    store.close()


# -- one round trip ------------------------------------------------------------------------------


def test_a_first_write_is_one_round_trip(store: PostgresMemoryStore, relay: Relay) -> None:
    notebook = open_notebook(store)
    result, trips = round_trips(relay, lambda: write(store, notebook, 0, "r-1", add("note:a")))
    assert isinstance(result, Applied) and result.version == 1
    assert trips == 1


def test_a_write_on_the_head_the_store_wrote_is_one_round_trip(
    store: PostgresMemoryStore, relay: Relay
) -> None:
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("note:a"), add("note:b"))
    for version, changes in enumerate(
        [(replace("note:a", "again"),), (remove("note:b"), add("note:c")), (add("note:d"),)],
        start=1,
    ):
        result, trips = round_trips(
            relay, lambda v=version, c=changes: write(store, notebook, v, f"r-{v + 1}", *c)
        )
        assert result == Applied(version + 1, result.written)
        assert trips == 1
    assert {r.name for r in store.records(notebook)} == {"note:a", "note:c", "note:d"}
    assert verify_notebook(store, notebook).ok


def test_a_stale_call_and_an_identical_retry_are_one_round_trip_each(
    store: PostgresMemoryStore, relay: Relay
) -> None:
    notebook = open_notebook(store)
    first = write(store, notebook, 0, "r-1", add("note:a"))
    write(store, notebook, 1, "r-2", add("note:b"))
    stale, trips = round_trips(relay, lambda: write(store, notebook, 0, "r-3", add("note:c")))
    assert stale == Refused(current_version=2) and trips == 1
    again, trips = round_trips(relay, lambda: write(store, notebook, 0, "r-1", add("note:a")))
    assert again == first and trips == 1
    assert [e.request_id for e in store.log(notebook)] == ["r-1", "r-2"]


def test_a_head_the_store_never_saw_costs_one_more_round_trip_once(
    store: PostgresMemoryStore, relay: Relay, schema: Schema
) -> None:
    notebook = open_notebook(store)
    other = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        write(other, notebook, 0, "r-1", add("note:a"))
    finally:
        other.close()
    result, trips = round_trips(relay, lambda: write(store, notebook, 1, "r-2", add("note:b")))
    assert result == Applied(2, result.written) and trips == 2
    result, trips = round_trips(relay, lambda: write(store, notebook, 2, "r-3", add("note:c")))
    assert result == Applied(3, result.written) and trips == 1
    assert verify_notebook(store, notebook).ok


def test_a_connection_idle_long_enough_is_checked_first(
    relay: Relay, schema: Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "CHECK_AFTER_IDLE", 0.0)
    store = PostgresMemoryStore(through(relay, schema), max_size=1)
    try:
        notebook = open_notebook(store)
        _, trips = round_trips(relay, lambda: write(store, notebook, 0, "r-1", add("note:a")))
        assert trips == 2  # the check, then the call
    finally:
        store.close()


# -- what decide refuses: the full path, the same typed errors, nothing written -------------------


def test_refusals_are_the_same_typed_errors_and_write_nothing(
    store: PostgresMemoryStore, relay: Relay
) -> None:
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("note:a"))
    with pytest.raises(AlreadyExists):
        write(store, notebook, 1, "r-2", add("note:a"))
    with pytest.raises(NotFound):
        write(store, notebook, 1, "r-2", replace("note:zz", "x"))
    with pytest.raises(NotFound):
        write(store, notebook, 1, "r-2", remove("note:zz"))
    with pytest.raises(RequestIdReused):
        write(store, notebook, 1, "r-1", add("note:b"))
    with pytest.raises(Expired):
        write(store, notebook, 1, "r-2", add("note:b"), now=T0 + LIFETIME)
    with pytest.raises(NotFound):
        write(store, "nb_missing", 0, "r-1", add("note:a"))
    assert [e.version for e in store.log(notebook)] == [1]
    assert [r.name for r in store.records(notebook)] == ["note:a"]
    store.forget(notebook, T0)
    with pytest.raises(Purged):
        write(store, notebook, 1, "r-2", add("note:b"))
    # After all of these the store still writes in one round trip.
    fresh = open_notebook(store, run="run-2")
    write(store, fresh, 0, "r-1", add("note:a"))
    result, trips = round_trips(relay, lambda: write(store, fresh, 1, "r-2", add("note:b")))
    assert result == Applied(2, ANY_WRITTEN) and trips == 1


# -- the single-change statement, pinned to decide ------------------------------------------------

SINGLE_CASES = [
    pytest.param(*case, id="-".join(str(part) for part in case)) for case in SINGLE_CHANGE_CASES
]


@pytest.mark.parametrize(("op", "name", "based_on", "request_id", "head"), SINGLE_CASES)
def test_every_single_change_call_answers_as_the_reference_backend(
    schema: Schema, op: str, name: str, based_on: int, request_id: str, head: str
) -> None:
    """``oh_remember_one`` (its statement sent through libpq) answers each combination of what
    ``decide`` looks at as the in-memory reference does, and leaves the same log and records."""
    store = PostgresMemoryStore(schema.url(), max_size=1)
    other = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        call = (based_on, request_id, [change_of(op, name)])
        decided_as_reference(store, other, InMemoryStore(), call, head=head)
    finally:
        store.close()
        other.close()


def _prepared_statements(store: PostgresMemoryStore) -> list[str]:
    with store._pool.connection() as conn:
        return [row[0] for row in conn.execute("SELECT name FROM pg_prepared_statements")]


def test_a_statement_dropped_from_the_connection_is_answered_and_prepared_again(
    store: PostgresMemoryStore, relay: Relay
) -> None:
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("note:a"))
    assert "oh_remember_one" in _prepared_statements(store)
    with store._pool.connection() as conn:
        conn.execute("DEALLOCATE ALL")
    assert write(store, notebook, 1, "r-2", add("note:b")) == Applied(2, ANY_WRITTEN)
    assert "oh_remember_one" not in _prepared_statements(store)
    result, trips = round_trips(relay, lambda: write(store, notebook, 2, "r-3", add("note:c")))
    assert result == Applied(3, ANY_WRITTEN) and trips == 2  # prepared once more, then the call
    assert "oh_remember_one" in _prepared_statements(store)
    result, trips = round_trips(relay, lambda: write(store, notebook, 3, "r-4", add("note:d")))
    assert result == Applied(4, ANY_WRITTEN) and trips == 1
    assert verify_notebook(store, notebook).ok


def test_a_value_postgresql_text_cannot_hold_is_refused_as_before_and_writes_nothing(
    store: PostgresMemoryStore,
) -> None:
    notebook = open_notebook(store)
    with pytest.raises(InvalidArgument):
        write(store, notebook, 0, "r-\x00", add("note:a"))
    with pytest.raises(InvalidArgument):
        write(store, notebook, 0, "r-1", add("note:a"), author="agent:\x00")
    assert log_length(store, notebook) == 0
    assert write(store, notebook, 0, "r-1", add("note:a")) == Applied(1, ANY_WRITTEN)


def test_a_connection_not_talking_utf8_writes_the_ordinary_way(schema: Schema) -> None:
    store = PostgresMemoryStore(schema.url() + "&client_encoding=LATIN1", max_size=1)
    try:
        notebook = open_notebook(store)
        assert write(store, notebook, 0, "r-1", add("note:cafe", "déjà vu")) == Applied(
            1, ANY_WRITTEN
        )
        assert "oh_remember_one" not in _prepared_statements(store)
        assert [r.name for r in store.records(notebook)] == ["note:cafe"]
        assert verify_notebook(store, notebook).ok
    finally:
        store.close()


def test_an_error_on_the_prepared_path_is_the_ordinary_paths_typed_error(
    store: PostgresMemoryStore, schema: Schema
) -> None:
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("note:a"))
    run_sql(
        schema.url(),
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'oh: notebook is not open'; END $$;"
        " CREATE TRIGGER refuse BEFORE INSERT ON log FOR EACH ROW EXECUTE FUNCTION refuse()",
    )
    with pytest.raises(Purged):
        write(store, notebook, 1, "r-2", add("note:b"))
    assert [e.request_id for e in store.log(notebook)] == ["r-1"]
    assert [r.name for r in store.records(notebook)] == ["note:a"]


# -- contested writers ---------------------------------------------------------------------------


def test_two_stores_on_one_notebook_one_applied_one_stale(schema: Schema) -> None:
    one = PostgresMemoryStore(schema.url(), max_size=1)
    two = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook = open_notebook(one)
        applied = write(one, notebook, 0, "one-1", add("note:one"))
        assert isinstance(applied, Applied) and applied.version == 1
        assert write(two, notebook, 0, "two-1", add("note:two")) == Refused(current_version=1)
        # The same call retried through either store answers the original, writes nothing.
        assert write(two, notebook, 0, "one-1", add("note:one")) == applied
        assert write(one, notebook, 0, "one-1", add("note:one")) == applied
        # Each moves on from the head the other wrote.
        assert write(two, notebook, 1, "two-2", add("note:two")) == Applied(2, ANY_WRITTEN)
        assert write(one, notebook, 1, "one-2", add("note:x")) == Refused(current_version=2)
        assert write(one, notebook, 2, "one-3", add("note:x")) == Applied(3, ANY_WRITTEN)
        assert [e.request_id for e in one.log(notebook)] == ["one-1", "two-2", "one-3"]
        assert verify_notebook(one, notebook).ok
    finally:
        one.close()
        two.close()


def test_racing_threads_on_two_stores_never_lose_an_update(schema: Schema) -> None:
    stores = [PostgresMemoryStore(schema.url(), max_size=2) for _ in range(2)]
    notebook = open_notebook(stores[0])
    start = threading.Barrier(4)
    outcomes: list[tuple[str, int, Any]] = []
    errors: list[BaseException] = []

    def writer(index: int) -> None:
        store = stores[index % 2]
        try:
            start.wait()
            for attempt in range(15):
                based_on = store.notebook(notebook).version
                rid = f"w{index}-{attempt}"
                result = write(store, notebook, based_on, rid, add(f"note:w{index}-{attempt}"))
                outcomes.append((rid, based_on, result))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        applied = [(rid, r) for rid, _, r in outcomes if isinstance(r, Applied)]
        assert sorted(r.version for _, r in applied) == list(range(1, len(applied) + 1))
        log = {e.version: e.request_id for e in stores[1].log(notebook)}
        assert log == {r.version: rid for rid, r in applied}
        for _, based_on, result in outcomes:
            if isinstance(result, Refused):
                assert based_on < result.current_version <= len(applied)
        # Every applied call retried through the other store answers its original.
        for rid, result in applied:
            index = int(rid[1 : rid.index("-")])
            again = write(
                stores[(index + 1) % 2],
                notebook,
                result.version - 1,
                rid,
                add(f"note:{rid}"),
            )
            assert again == result
        assert len(list(stores[0].log(notebook))) == len(applied)
        assert verify_notebook(stores[0], notebook).ok
    finally:
        for store in stores:
            store.close()


# -- failures ------------------------------------------------------------------------------------


def _terminate(cluster: PostgresCluster, schema: Schema) -> None:
    """Cut every connection of the application role on this schema, as a restart would."""
    with psycopg.connect(cluster.url(), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE usename = 'oh_app' AND pid <> pg_backend_pid()"
            " AND query NOT LIKE '%%pg_terminate_backend%%'"
        )


def test_a_remember_on_a_cut_connection_just_used_is_sent_again_on_a_new_one(
    cluster: PostgresCluster, schema: Schema, never_idle: None
) -> None:
    store = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r-1", add("note:a"))
        _terminate(cluster, schema)
        # The unchecked connection fails; the call goes again on a new one and is applied once.
        assert write(store, notebook, 1, "r-2", add("note:b")) == Applied(2, ANY_WRITTEN)
        assert write(store, notebook, 1, "r-2", add("note:b")) == Applied(2, ANY_WRITTEN)
        assert [e.version for e in store.log(notebook)] == [1, 2]
        assert verify_notebook(store, notebook).ok
    finally:
        store.close()


def test_another_call_on_a_cut_connection_just_used_fails_once_then_recovers(
    cluster: PostgresCluster, schema: Schema, never_idle: None
) -> None:
    store = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r-1", add("note:a"))
        _terminate(cluster, schema)
        with pytest.raises(StorageUnavailable):
            store.records(notebook)
        assert [r.name for r in store.records(notebook)] == ["note:a"]  # a new connection
    finally:
        store.close()


def test_a_cut_connection_idle_long_enough_is_replaced_at_checkout(
    cluster: PostgresCluster, schema: Schema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres, "CHECK_AFTER_IDLE", 0.0)
    store = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r-1", add("note:a"))
        _terminate(cluster, schema)
        assert write(store, notebook, 1, "r-2", add("note:b")) == Applied(2, ANY_WRITTEN)
    finally:
        store.close()


# -- the migration and the roles -----------------------------------------------------------------


class _PreviousRelease(PostgresMemoryStore):
    """The store as the release before migration 0010 wrote: no migration on open, the full
    path, and each entry a ``log`` row plus a ``log_changes`` row per change."""

    MIGRATIONS = ""
    _remember = PostgresMemoryStore._decide_and_write

    @staticmethod
    def _log_entry(conn: Any, notebook_id: str, entry: LogEntry) -> None:
        conn.execute(
            "INSERT INTO log (notebook_id, version, request_id, fingerprint, author,"
            " written_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (notebook_id, *entry[1:6], entry.prev_hash, entry.hash),
        )
        conn.executemany(
            "INSERT INTO log_changes (notebook_id, version, seq, op, name, content, digest)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (notebook_id, entry.version, seq, c.op, c.name, c.content, c.digest)
                for seq, c in enumerate(entry.changes)
            ],
        )


_StoreAtFive = _PreviousRelease  # before 0006 the store wrote the same way


@pytest.mark.parametrize("sealed", [False, True])
def test_a_cluster_written_by_the_previous_release_migrates_to_one_row_per_entry(
    schema: Schema, tmp_path: Path, sealed: bool
) -> None:
    """Migration 0010 on a cluster the previous release wrote, plain and sealed: every entry
    becomes one row whose chain verify recomputes (so every value, in order, survived), the
    notebook head is unchanged, an identical retry of an old several-change call answers as
    before, and writing goes on."""
    with psycopg.connect(schema.url()) as conn:
        assert migrate(conn, "memory", MEMORY_MIGRATIONS, upto=9) == 9
    keyring = None
    if sealed:
        masters = MasterKeys(MasterKey.generate())
        keyring = Keyring(masters, SqliteKeyStore(tmp_path / "keys.db"))
    tricky = 'quotes " and \\ backslash, é, 🦘, \u202e bidi'
    many = (add("note:a", tricky), add("note:b"), add("note:c", "third"))
    old = _PreviousRelease(schema.url(), max_size=1, keyring=keyring)
    try:
        notebook = open_notebook(old)
        results = [
            write(old, notebook, 0, "r-1", *many),
            write(old, notebook, 1, "r-2", replace("note:a", "again"), remove("note:b")),
            write(old, notebook, 2, "r-3", add("note:d", tricky)),
            write(old, notebook, 3, "r-4", remove("note:c")),
        ]
        head = old.notebook(notebook).head_hash
    finally:
        old.close()  # closes the keyring too
    if sealed:
        keyring = Keyring(masters, SqliteKeyStore(tmp_path / "keys.db"))
    store = PostgresMemoryStore(schema.url(), max_size=1, keyring=keyring)
    try:
        assert run_sql(schema.url(), "SELECT max(version) FROM schema_migrations") == [(LATEST,)]
        assert run_sql(schema.url(), "SELECT to_regclass('log_changes')") == [(None,)]
        assert verify_notebook(store, notebook).ok
        assert store.notebook(notebook).head_hash == head
        entries = list(store.log(notebook))
        assert [len(e.changes) for e in entries] == [3, 2, 1, 1]
        content = entries[0].changes[0].content
        assert content is not None and json.loads(content)["text"] == tricky
        assert [e.result() for e in entries] == results
        # The same several-change call again: answered from the converted row.
        assert write(store, notebook, 0, "r-1", *many) == results[0]
        assert write(store, notebook, 4, "r-5", add("note:e")) == Applied(5, ANY_WRITTEN)
        assert {r.name for r in store.records(notebook)} == {"note:a", "note:d", "note:e"}
        assert verify_notebook(store, notebook).ok
    finally:
        store.close()


def test_a_database_at_the_previous_schema_migrates_and_keeps_its_chain(schema: Schema) -> None:
    with psycopg.connect(schema.url()) as conn:
        assert migrate(conn, "memory", MEMORY_MIGRATIONS, upto=5) == 5
    old = _StoreAtFive(schema.url(), max_size=1)
    try:
        notebook = open_notebook(old)
        first = write(old, notebook, 0, "r-1", add("note:a"), add("note:b"))
        write(old, notebook, 1, "r-2", replace("note:a", "again"), remove("note:b"))
        with old._pool.connection() as conn:
            row = conn.execute("SELECT to_regproc('oh_remember')").fetchone()
        assert row == (None,)
    finally:
        old.close()
    store = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        with store._pool.connection() as conn:
            versions = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        assert versions == (LATEST,)  # every step since
        assert write(store, notebook, 0, "r-1", add("note:a"), add("note:b")) == first
        assert write(store, notebook, 1, "r-3", add("note:c")) == Refused(current_version=2)
        assert write(store, notebook, 2, "r-3", add("note:c")) == Applied(3, ANY_WRITTEN)
        assert [e.version for e in store.log(notebook)] == [1, 2, 3]
        assert {r.name for r in store.records(notebook)} == {"note:a", "note:c"}
        assert verify_notebook(store, notebook).ok
    finally:
        store.close()


def test_the_purge_role_can_do_nothing_through_oh_remember(schema: Schema) -> None:
    store = PostgresMemoryStore(schema.url(), max_size=1)
    try:
        notebook = open_notebook(store)
        write(store, notebook, 0, "r-1", add("note:a"))
        with (
            psycopg.connect(schema.purge_url) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(
                "SELECT * FROM oh_remember(%s, 1, 'p-1', 'f', 'purge', '2000', 'h', 'h2',"
                " '{remove}', '{note:a}', '{note}', '{NULL}', '{NULL}')",
                (notebook,),
            )
        assert [r.name for r in store.records(notebook)] == ["note:a"]
        assert store.notebook(notebook).version == 1
        with store._pool.connection() as conn:
            row = conn.execute(
                "SELECT prosecdef FROM pg_proc WHERE oid = to_regproc('oh_remember')"
            ).fetchone()
        assert row == (False,)  # it runs with its caller's rights
    finally:
        store.close()
