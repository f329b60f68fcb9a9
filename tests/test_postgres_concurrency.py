"""Version checks and idempotency hold across processes because PostgreSQL enforces them
(SPEC §2, §10): eight processes, each with its own connection pool, write to the same
notebooks at once.

* No lost update: applied versions are exactly 1..N per notebook, each applied write is the
  log entry at its version and its note is current.
* Every refusal carries the version the notebook had moved on to.
* An identical retry sent through a *different* process returns the original result, even
  while other processes keep writing, and writes nothing.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest

from oh.core.changes import parse_changes
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.testing.memory_store import T0, open_notebook
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.verify import verify_notebook

PROCESSES = 8
ATTEMPTS = 12  # per process and notebook
RETRIES = 8  # per process, of writes other processes made

_start: Any = None


def _init(barrier: Any) -> None:
    global _start
    _start = barrier


def _changes(name: str) -> list[dict[str, Any]]:
    return [{"op": "add", "record": {"name": name, "text": f"written by {name}"}}]


def _remember(store: PostgresMemoryStore, notebook: str, based_on: int, rid: str, name: str) -> Any:
    return store.remember(
        notebook,
        based_on=based_on,
        request_id=rid,
        changes=parse_changes(_changes(name)),
        author="agent:race",
        now=T0,
    ).to_json()


def write_race(url: str, worker: int, notebooks: list[str]) -> list[dict[str, Any]]:
    """Read the version, write on it; record what came back."""
    store = PostgresMemoryStore(url, max_size=1)
    outcomes = []
    try:
        _start.wait()
        for attempt in range(ATTEMPTS):
            for index, notebook in enumerate(notebooks):
                based_on = store.notebook(notebook).version
                rid = f"w{worker}-n{index}-{attempt}"
                name = f"note:w{worker}-n{index}-{attempt}"
                result = _remember(store, notebook, based_on, rid, name)
                outcomes.append(
                    {
                        "worker": worker,
                        "pid": os.getpid(),
                        "notebook": notebook,
                        "request_id": rid,
                        "name": name,
                        "based_on": based_on,
                        "result": result,
                    }
                )
    finally:
        store.close()
    return outcomes


def retry_race(
    url: str, worker: int, notebooks: list[str], applied: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], Any, int]]:
    """Retry writes that *other* processes made, interleaved with fresh writes that move
    memory on."""
    store = PostgresMemoryStore(url, max_size=1)
    seen = []
    pool = [o for o in applied if o["pid"] != os.getpid()]
    others = [pool[(worker * RETRIES + i) % len(pool)] for i in range(RETRIES)]
    try:
        _start.wait()
        for step, original in enumerate(others):
            again = _remember(
                store,
                original["notebook"],
                original["based_on"],
                original["request_id"],
                original["name"],
            )
            seen.append((original, again, os.getpid()))
            notebook = notebooks[step % len(notebooks)]
            based_on = store.notebook(notebook).version
            _remember(
                store, notebook, based_on, f"late-w{worker}-{step}", f"note:late{worker}-{step}"
            )
    finally:
        store.close()
    return seen


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


def check_no_lost_update(
    store: PostgresMemoryStore, notebook: str, outcomes: list[dict[str, Any]]
) -> None:
    mine = [o for o in outcomes if o["notebook"] == notebook]
    applied = [o for o in mine if o["result"]["status"] == "applied"]
    assert sorted(o["result"]["version"] for o in applied) == list(range(1, len(applied) + 1))
    log = {entry.version: entry for entry in store.log(notebook)}
    assert len(log) == len(applied)
    for outcome in applied:
        assert log[outcome["result"]["version"]].request_id == outcome["request_id"]
        assert store.record(notebook, outcome["name"]) is not None
    assert store.notebook(notebook).version == len(applied)
    for outcome in mine:
        result = outcome["result"]
        if result["status"] == "refused":
            # The version the notebook really had moved on to when the write was refused.
            assert result["reason"] == "stale"
            assert outcome["based_on"] < result["current_version"] <= len(applied)


def test_writers_in_many_processes_never_lose_an_update(schema: Schema) -> None:
    store = PostgresMemoryStore(schema.url())
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(2)]
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(PROCESSES)
    try:
        with context.Pool(PROCESSES, initializer=_init, initargs=(barrier,)) as pool:
            per_worker = pool.starmap(
                write_race, [(schema.url(), w, notebooks) for w in range(PROCESSES)]
            )
            outcomes = [o for worker in per_worker for o in worker]
            assert len(outcomes) == PROCESSES * ATTEMPTS * len(notebooks)
            for notebook in notebooks:
                check_no_lost_update(store, notebook, outcomes)
            assert any(o["result"]["status"] == "refused" for o in outcomes)  # it was a race

            applied = [o for o in outcomes if o["result"]["status"] == "applied"]
            before = {n: store.notebook(n).version for n in notebooks}
            assert len({o["pid"] for o in outcomes}) == PROCESSES
            retried = pool.starmap(
                retry_race, [(schema.url(), w, notebooks, applied) for w in range(PROCESSES)]
            )
        retries = [retry for worker in retried for retry in worker]
        assert len(retries) == PROCESSES * RETRIES
        for original, again, pid in retries:
            assert pid != original["pid"]
            assert again == original["result"]
        for notebook in notebooks:
            entries = list(store.log(notebook))
            late = [e for e in entries if e.request_id.startswith("late-")]
            assert len(entries) == before[notebook] + len(late)  # the retries wrote nothing
            assert [e.version for e in entries] == list(range(1, len(entries) + 1))
            assert verify_notebook(store, notebook).ok
    finally:
        store.close()
