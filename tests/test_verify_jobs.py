"""``oh verify --jobs N``: the notebooks shared among worker processes give the same report as
one process, byte for byte, with or without problems, on libSQL files and on PostgreSQL; a
worker that dies or raises ends the verify with a typed error, never a hang; bad ``--jobs``
values are refused before anything is opened.

The workers are real ``spawn`` processes opening their own connections. Whether a small data
directory is shared at all depends on the threshold (``SPREAD_FROM_ENTRIES``) and on how fast
the workers start, so most tests lower the threshold and have the workers verify every
notebook (``_SHARE_WITH_PARENT`` off); the ``oh verify`` test uses a directory above it.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import oh.verify.pool
from oh.cli import main
from oh.cli.verify import MAX_JOBS, _reopen, parse_jobs
from oh.config import Locations, open_knowledge_store
from oh.core.changes import Applied
from oh.errors import InvalidArgument, NotFound, OhError, StorageUnavailable
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.memory_store import T0, add, keep_answers, open_notebook, replace, write
from oh.testing.postgres_cluster import fresh_schema, shared_cluster
from oh.verify import SPREAD_FROM_ENTRIES, VerifyReport, verify_store


def _raw(db: Path, sql: str) -> None:
    conn = sqlite3.connect(str(db), isolation_level=None)
    try:
        conn.execute(sql)
    finally:
        conn.close()


def _fill(store: MemoryStore, notebooks: int, entries: int) -> list[str]:
    """``notebooks`` notebooks of ``entries`` log entries: notes added, some replaced."""
    ids = []
    for n in range(notebooks):
        notebook_id = open_notebook(store, run=f"run-{n}")
        version = 0
        for i in range(entries):
            change = (
                replace(f"note:n{i - 3}", f"finding {i} replaces {i - 3}")
                if i % 4 == 3
                else add(f"note:n{i}", f"finding {i} of run {n}")
            )
            applied = write(
                store, notebook_id, version, f"r{i}", change, now=T0 + timedelta(seconds=i)
            )
            assert isinstance(applied, Applied)
            version = applied.version
        ids.append(notebook_id)
    keep_answers(store, ids[0])
    return ids


def _tamper(db: Path) -> None:
    """A record's content edited, a log row's content edited, a notebook's metadata moved."""
    _raw(db, "UPDATE records SET content = replace(content, 'finding 1 ', 'finding X ')")
    _raw(
        db,
        "UPDATE log SET content = replace(content, 'finding 2 ', 'finding Y ')"
        " WHERE rowid IN (SELECT rowid FROM log ORDER BY rowid DESC LIMIT 3)",
    )
    _raw(db, "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z' WHERE run = 'run-2'")


@pytest.fixture
def workers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Share any directory, and leave every notebook to the workers."""
    monkeypatch.setattr(oh.verify.pool, "SPREAD_FROM_ENTRIES", 0)
    monkeypatch.setattr(oh.verify.pool, "_SHARE_WITH_PARENT", False)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    store = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    try:
        _fill(store, 5, 12)
    finally:
        store.close()
    open_knowledge_store(Locations.resolve(str(tmp_path))).close()
    return tmp_path


def _verify(locations: Locations, jobs: int, reopen: Any = None) -> VerifyReport:
    store, knowledge = _reopen(locations)
    try:
        return verify_store(
            store,
            knowledge=knowledge,
            jobs=jobs,
            reopen=reopen or functools.partial(_reopen, locations),
        )
    finally:
        store.close()
        if knowledge is not None:
            getattr(knowledge, "close", lambda: None)()


def _at(data: Path) -> Locations:
    return Locations.resolve(str(data), create=False)


# -- the same report -------------------------------------------------------------------------


@pytest.mark.usefixtures("workers_only")
def test_jobs_share_the_notebooks_and_report_exactly_what_one_process_reports(data: Path) -> None:
    one = _verify(_at(data), 1)
    assert one.ok and one.notebooks == 5 and one.entries >= 60
    for jobs in (2, 3):
        assert _verify(_at(data), jobs).to_json() == one.to_json()


@pytest.mark.usefixtures("workers_only")
def test_jobs_report_every_problem_in_the_order_one_process_reports_them(data: Path) -> None:
    _tamper(data / "memory.db")
    one = _verify(_at(data), 1)
    assert {p.what for p in one.problems} >= {"digest", "drift", "seal"}
    assert len({p.notebook_id for p in one.problems}) == 5
    assert _verify(_at(data), 2).to_json() == one.to_json()


def test_this_process_and_its_workers_together_report_what_one_process_reports(
    data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tamper(data / "memory.db")
    monkeypatch.setattr(oh.verify.pool, "SPREAD_FROM_ENTRIES", 0)
    assert _verify(_at(data), 2).to_json() == _verify(_at(data), 1).to_json()


def test_one_notebook_or_jobs_1_is_verified_in_process(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    try:
        _fill(store, 1, 3)
        before = set(multiprocessing.active_children())

        def no_workers(*_: Any) -> Any:
            raise AssertionError("a worker was started")

        assert verify_store(store, jobs=8, reopen=no_workers).ok
        assert set(multiprocessing.active_children()) == before
    finally:
        store.close()


def test_a_directory_below_the_threshold_stays_in_process(data: Path) -> None:
    assert SPREAD_FROM_ENTRIES > 5 * 12
    store = SqliteMemoryStore(data / "memory.db")
    try:
        assert verify_store(store, jobs=4, reopen=_never_opened).ok
    finally:
        store.close()


def _never_opened() -> tuple[MemoryStore, KnowledgeSource | None]:
    raise AssertionError("a worker was started")


@pytest.mark.usefixtures("workers_only")
def test_postgres_jobs_report_exactly_what_one_process_reports() -> None:
    with fresh_schema(shared_cluster(), prefix="jobs") as schema:
        store = PostgresMemoryStore(schema.url())
        try:
            _fill(store, 4, 6)
        finally:
            store.close()
        locations = Locations.resolve(None, schema.url(), schema.url(), create=False)
        one = _verify(locations, 1)
        assert one.ok and one.notebooks == 4
        assert _verify(locations, 2).to_json() == one.to_json()


# -- oh verify ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory above the threshold, so that ``oh verify`` shares it by itself."""
    where = tmp_path_factory.mktemp("large")
    store = SqliteMemoryStore(where / "memory.db", synchronous="NORMAL")
    try:
        _fill(store, 4, SPREAD_FROM_ENTRIES // 4 + 1)
    finally:
        store.close()
    open_knowledge_store(Locations.resolve(str(where))).close()
    return where


def _oh_verify(data: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "oh.cli", "verify", "--data", str(data), *flags]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_oh_verify_prints_the_same_report_whatever_the_jobs(large: Path) -> None:
    for flags in ((), ("--json",)):
        one = _oh_verify(large, "--jobs", "1", *flags)
        assert one.returncode == 0, one.stderr
        assert _oh_verify(large, "--jobs", "2", *flags).stdout == one.stdout
        assert _oh_verify(large, *flags).stdout == one.stdout  # the default: every core
    _tamper(large / "memory.db")
    for flags in ((), ("--json",)):
        one = _oh_verify(large, "--jobs", "1", *flags)
        assert one.returncode == 1, one.stderr
        two = _oh_verify(large, "--jobs", "2", *flags)
        assert (two.returncode, two.stdout, two.stderr) == (1, one.stdout, "")


@pytest.mark.parametrize(
    "value", ["0", "-1", "x", "1.5", "", " 2", "²", str(MAX_JOBS + 1), "9" * 40]
)
def test_a_bad_jobs_value_is_refused_before_anything_is_opened(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InvalidArgument):
        parse_jobs(value)
    missing = tmp_path / "not-there"
    assert main(["verify", "--data", str(missing), "--jobs", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("oh verify: invalid_argument: --jobs must be"), err
    assert not missing.exists()


def test_jobs_default_to_the_cores_this_process_may_use() -> None:
    assert parse_jobs(None) == len(os.sched_getaffinity(0))
    assert parse_jobs("1") == 1 and parse_jobs(str(MAX_JOBS)) == MAX_JOBS


# -- workers that fail -------------------------------------------------------------------------


class _Failing:
    """A worker's store that fails the way ``how`` says when a notebook is read."""

    def __init__(self, store: MemoryStore, how: str) -> None:
        self._store, self._how = store, how

    def notebook(self, notebook_id: str) -> Any:
        if self._how == "dies":
            os._exit(9)
        if self._how == "raises":
            raise RuntimeError("the driver fell over")
        raise NotFound(f"notebook {notebook_id} vanished")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _failing(locations: Locations, how: str) -> tuple[Any, KnowledgeSource | None]:
    store, knowledge = _reopen(locations)
    return _Failing(store, how), knowledge


def _dies_opening() -> tuple[MemoryStore, KnowledgeSource | None]:
    os._exit(3)


@pytest.mark.usefixtures("workers_only")
def test_a_worker_that_dies_is_a_typed_error_not_a_hang(data: Path) -> None:
    for reopen in (functools.partial(_failing, _at(data), "dies"), _dies_opening):
        with pytest.raises(StorageUnavailable, match="ended before it finished"):
            _verify(_at(data), 2, reopen)
        # Every worker was ended: on a busy machine the last may take a moment to be reaped.
        deadline = time.monotonic() + 10
        while multiprocessing.active_children() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("workers_only")
def test_a_worker_that_raises_is_a_typed_error(data: Path) -> None:
    with pytest.raises(StorageUnavailable, match="RuntimeError: the driver fell over"):
        _verify(_at(data), 2, functools.partial(_failing, _at(data), "raises"))
    with pytest.raises(NotFound, match="vanished") as raised:
        _verify(_at(data), 2, functools.partial(_failing, _at(data), "not_found"))
    assert isinstance(raised.value, OhError) and raised.value.code == "not_found"
    assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("workers_only")
def test_ctrl_c_ends_the_pool(data: Path) -> None:
    store, knowledge = _reopen(_at(data))

    def interrupted(done: int, total: int) -> None:
        raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            verify_store(
                store,
                interrupted,
                knowledge=knowledge,
                jobs=2,
                reopen=functools.partial(_reopen, _at(data)),
            )
    finally:
        store.close()
    assert multiprocessing.active_children() == []
