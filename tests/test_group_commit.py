"""Group commit on the embedded backend: ``remember`` calls that arrive while a flush is in
progress share the next transaction and its one fsync, each in its own savepoint, so a refused
or failing call never touches another, and a call alone runs exactly as before."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oh.core.changes import Applied, RememberResult, parse_changes
from oh.core.decision import Call
from oh.errors import NotFound, OhError, Purged, StorageUnavailable
from oh.storage.group_commit import GROUP_LIMIT
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.memory_store import T0, add, open_notebook, write
from oh.verify import verify_store


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.001)


class Statements:
    """Every statement the store's connection runs (the standard library's trace hook)."""

    def __init__(self, store: SqliteMemoryStore) -> None:
        self.seen: list[str] = []
        store._conn.set_trace_callback(self.seen.append)

    def count(self, statement: str) -> int:
        return sum(1 for seen in self.seen if seen == statement)


Outcome = RememberResult | OhError


def _grouped(store: SqliteMemoryStore, calls: list[Callable[[], RememberResult]]) -> list[Outcome]:
    """Run ``calls[0]`` as the leader of a flush held up until ``calls[1:]`` are all queued,
    so those form exactly one group; return each call's result or error, in order."""
    outcomes: list[Outcome | None] = [None] * len(calls)

    def run(index: int) -> None:
        try:
            outcomes[index] = calls[index]()
        except OhError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    with store._lock:  # the flush "in progress": the leader waits here, the others queue
        threads[0].start()
        _until(lambda: store._group._leading, "the first call leads")
        for thread in threads[1:]:
            thread.start()
        _until(lambda: len(store._group._waiting) == len(calls) - 1, "the other calls are queued")
    for thread in threads:
        thread.join()
    assert all(outcome is not None for outcome in outcomes)
    return [outcome for outcome in outcomes if outcome is not None]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    yield store
    store.close()


def test_a_call_alone_flushes_alone_with_no_savepoint(store: SqliteMemoryStore) -> None:
    notebook_id = open_notebook(store)
    statements = Statements(store)
    for version in range(3):
        assert isinstance(
            write(store, notebook_id, version, f"r{version}", add(f"note:{version}")), Applied
        )
    assert statements.count("COMMIT") == 3
    assert not any("SAVEPOINT" in seen for seen in statements.seen)


def test_calls_that_arrive_during_a_flush_share_the_next_one(store: SqliteMemoryStore) -> None:
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(8)]
    statements = Statements(store)
    calls = [
        (lambda nb=nb: write(store, nb, 0, "r", add("note:a", f"written in {nb}")))
        for nb in notebooks
    ]
    outcomes = _grouped(store, calls)
    assert [type(o) for o in outcomes] == [Applied] * 8
    # The leader's own flush, then one transaction for the seven that queued meanwhile.
    assert statements.count("BEGIN IMMEDIATE") == statements.count("COMMIT") == 2
    assert statements.count("SAVEPOINT oh_call") == statements.count("RELEASE oh_call") == 7
    assert verify_store(store).ok
    for nb in notebooks:
        assert [r.content for r in store.records(nb)] != []


def _mixed_calls(
    target: SqliteMemoryStore, a: str, b: str, c: str, gone: str
) -> list[Callable[[], RememberResult]]:
    return [
        lambda: write(target, a, 0, "lead", add("note:lead")),
        lambda: write(target, a, 1, "a2", add("note:a2")),  # on top of the leader's write
        lambda: write(target, b, 0, "stale", add("note:x")),  # b is at version 1: stale
        lambda: write(target, b, 0, "b1", add("note:b")),  # a retry: the original answer
        lambda: write(target, "nb_missing", 0, "m", add("note:m")),  # not_found
        lambda: write(target, gone, 0, "g", add("note:g")),  # forgotten: purged
        lambda: write(target, c, 0, "c1", add("note:dup"), add("note:dup2")),
        lambda: write(target, c, 0, "c2", add("note:dup")),  # stale after c1 in the same group
    ]


def _starting_state(target: SqliteMemoryStore) -> tuple[str, str, str, str]:
    a, b, c, gone = (open_notebook(target, run=f"run-{i}") for i in range(4))
    assert isinstance(write(target, b, 0, "b1", add("note:b")), Applied)
    target.forget(gone, T0)
    return a, b, c, gone


def _shape(outcome: Outcome) -> Any:
    return outcome.code if isinstance(outcome, OhError) else outcome.to_json()


def test_a_refused_or_failing_call_leaves_the_rest_of_its_group_alone(
    tmp_path: Path, store: SqliteMemoryStore
) -> None:
    grouped = _grouped(store, _mixed_calls(store, *_starting_state(store)))
    kinds = [type(o) for o in grouped]
    assert kinds[:2] == [Applied, Applied]
    assert kinds[4:7] == [NotFound, Purged, Applied]
    assert verify_store(store).ok

    # The same calls one after another, from the same starting state, answer the same.
    alone = SqliteMemoryStore(tmp_path / "serial.db")
    serial: list[Outcome] = []
    for call in _mixed_calls(alone, *_starting_state(alone)):
        try:
            serial.append(call())
        except OhError as exc:
            serial.append(exc)
    alone.close()
    assert [_shape(o) for o in grouped] == [_shape(o) for o in serial]


class FailingCommit:
    """The store's connection, except that its ``fail_at``-th ``COMMIT`` fails as a full disk
    does (and so leaves the transaction open, to be rolled back)."""

    def __init__(self, conn: Any, fail_at: int) -> None:
        self._conn = conn
        self._commits = 0
        self._fail_at = fail_at

    def execute(self, sql: str, *params: Any) -> Any:
        if sql == "COMMIT":
            self._commits += 1
            if self._commits == self._fail_at:
                raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_group_that_cannot_commit_writes_none_of_its_calls(store: SqliteMemoryStore) -> None:
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(5)]
    real = store._conn
    store._conn = FailingCommit(real, fail_at=2)  # the leader's flush commits, the group's not
    try:
        outcomes = _grouped(
            store, [(lambda nb=nb: write(store, nb, 0, "r", add("note:a"))) for nb in notebooks]
        )
    finally:
        store._conn = real
    assert isinstance(outcomes[0], Applied)
    assert [type(o) for o in outcomes[1:]] == [StorageUnavailable] * 4
    assert [store.notebook(nb).version for nb in notebooks] == [1, 0, 0, 0, 0]
    # Nothing of the failed group misleads the next writes: each retry applies at version 1.
    for nb in notebooks[1:]:
        result = write(store, nb, 0, "r", add("note:a"))
        assert isinstance(result, Applied) and result.version == 1
    assert verify_store(store).ok


@pytest.mark.parametrize("driver", ["sqlite3", "libsql"])
def test_eight_writers_on_eight_notebooks_lose_nothing(tmp_path: Path, driver: Any) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db", driver=driver)
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(8)]
    failures: list[BaseException] = []

    def writer(nb: str) -> None:
        try:
            for version in range(40):
                result = write(store, nb, version, f"r{version}", add(f"note:{version}"))
                assert isinstance(result, Applied) and result.version == version + 1, result
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(nb,)) for nb in notebooks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert all(store.notebook(nb).version == 40 for nb in notebooks)
    assert verify_store(store).ok
    store.close()


def test_writers_contending_for_one_notebook_lose_no_update(store: SqliteMemoryStore) -> None:
    notebook_id = open_notebook(store)
    applied: list[int] = []
    lock = threading.Lock()

    def writer(index: int) -> None:
        for attempt in range(20):
            while True:
                version = store.notebook(notebook_id).version
                result = write(
                    store,
                    notebook_id,
                    version,
                    f"w{index}-{attempt}",
                    add(f"note:{index}-{attempt}"),
                )
                if isinstance(result, Applied):
                    with lock:
                        applied.append(result.version)
                    break

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(applied) == list(range(1, 121))
    assert len(store.records(notebook_id)) == 120
    assert verify_store(store).ok


def test_a_read_does_not_wait_for_a_flush_in_progress(store: SqliteMemoryStore) -> None:
    """Reads have a connection of their own: in WAL mode a reader never waits for the writer,
    so a read answers while a flush (its fsync included) holds the writer's connection."""
    notebook_id = open_notebook(store)
    assert isinstance(write(store, notebook_id, 0, "r", add("note:a", "before the flush")), Applied)
    answers: list[Any] = []

    def read() -> None:
        answers.append(store.read_record(notebook_id, "note:a")[1])
        answers.append([r.name for r in store.records(notebook_id)])

    with store._lock:  # as a flush holds it
        reader = threading.Thread(target=read)
        reader.start()
        reader.join(timeout=30)
        assert not reader.is_alive(), "the read waited for the writer"
    assert answers[0] is not None and "before the flush" in answers[0].content
    assert answers[1] == ["note:a"]


def test_a_read_made_inside_a_write_reads_that_write(store: SqliteMemoryStore) -> None:
    notebook_id = open_notebook(store)
    with store._write() as conn:
        conn.execute("UPDATE notebooks SET pinned_revision = 7 WHERE id = ?", (notebook_id,))
        assert store.notebook(notebook_id).pinned_revision == 7  # the writer's own connection
        conn.execute("UPDATE notebooks SET pinned_revision = NULL WHERE id = ?", (notebook_id,))
    assert store.notebook(notebook_id).pinned_revision is None


def test_a_batch_larger_than_a_group_is_written_in_groups_and_answered_in_order(
    store: SqliteMemoryStore,
) -> None:
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(GROUP_LIMIT + 6)]
    statements = Statements(store)
    calls = [
        Call.prepare(
            nb,
            based_on=0,
            request_id="r",
            changes=parse_changes([add("note:a")]),
            author="agent:run-1",
            now=T0,
        )
        for nb in notebooks
    ]
    outcomes = store.remember_all(calls)
    assert [type(o) for o in outcomes] == [Applied] * len(notebooks)
    assert statements.count("COMMIT") == 2  # 64, then the 6 left
    assert verify_store(store).ok


def test_group_commit_is_a_strategy_over_any_two_ways_to_write() -> None:
    """``oh.storage.group_commit`` knows no database: over a write-alone and a write-together
    that only record what they were given, every call is answered with its own result, each is
    written exactly once, no flush holds more than the limit, and the calls that arrive while a
    flush is in progress share the next one."""
    from oh.storage.group_commit import GroupCommit, Waiter

    flushes: list[list[int]] = []
    gate = threading.Event()

    def alone(call: int) -> int:
        if call == 0:
            gate.wait(10)  # the first flush is in progress while the others arrive
        flushes.append([call])
        return call * 10

    def together(group: list[Waiter[int, int]], gather: bool) -> None:
        written = 0
        while written < len(group) or committer.more(group, time.perf_counter()):
            group[written].result = group[written].call * 10
            written += 1
        flushes.append([waiter.call for waiter in group])

    committer: GroupCommit[int, int] = GroupCommit(alone, together, limit=4)
    answers: dict[int, int] = {}

    def call(number: int) -> None:
        answers[number] = committer.one(number)

    first = threading.Thread(target=call, args=(0,))
    first.start()
    _until(lambda: committer._leading, "the first call leads")
    others = [threading.Thread(target=call, args=(n,)) for n in range(1, 10)]
    for thread in others:
        thread.start()
    _until(lambda: len(committer._waiting) == 9, "the other calls are queued")
    gate.set()
    for thread in (first, *others):
        thread.join(10)
    assert answers == {n: n * 10 for n in range(10)}
    assert sorted(n for flush in flushes for n in flush) == list(range(10))
    assert flushes[0] == [0] and all(len(flush) <= 4 for flush in flushes)
    assert len(flushes) == 1 + 3  # nine queued calls in flushes of at most four
    assert committer.all([20, 21]) == [200, 210]


def test_the_store_and_the_http_batches_keep_one_pace(store: SqliteMemoryStore) -> None:
    """After a flush of several, the next may wait for as many, half that flush's time and at
    most 1 ms; after a lone call, never. The store's group commit and the HTTP server's batches
    of remember calls are paced by the same rule (``oh.storage.group_commit.Pace``)."""
    from oh.storage.group_commit import Pace
    from oh.transports.http import _Batches

    pace = Pace()
    assert pace.company() == 0.0 and not pace.worth_waiting(1)
    pace.record(8, 0.0006)
    assert pace.company() == 0.0003
    assert pace.worth_waiting(7) and not pace.worth_waiting(8)
    pace.record(8, 0.5)
    assert pace.company() == 0.001
    assert isinstance(store._group._pace, Pace)
    assert isinstance(_Batches(lambda calls: [])._pace, Pace)
