"""PostgreSQL benchmark: Oh's ``remember`` on PostgreSQL against raw single-row INSERTs on the
same cluster, measured in the same run, with 1, 4 and 8 concurrent clients.

It starts its own throwaway cluster (``oh.testing.postgres_cluster``) with PostgreSQL's
durable defaults (``fsync=on``, ``synchronous_commit=on``): every acknowledged write, Oh's and
the baseline's, has been flushed to the WAL on disk. Each client is its own process (so
Python's GIL does not serialize the clients) with its own connection, writing to its own
notebook, as separate agents would.

* Oh: one single-change ``remember`` call per operation (validated payload, fingerprint, row
  lock, request-id and name checks, log entry + current record, hash chain): one statement
  (``oh_remember_one``, migrations 0006 and 0011, prepared on the connection and sent through
  libpq) in one round trip.
* Full path: the same calls the way the store made them before 0006 (read under the lock,
  decide in Python, write; the pool's check on every checkout), for the speed-up.
* Baseline: ``INSERT INTO raw (notebook_id, name, content) VALUES (...)`` of the same
  canonical content, one autocommit transaction per row.

Targets: at least 1,000 remember calls/s at 8 clients; Oh at least 0.5x the raw INSERTs
(the ratio) at 1, 4 and 8 clients. No figure is asserted on; this is a measurement, not a
test. Run from the repository root::

    python bench/bench_postgres.py              # about 60 s
    python bench/bench_postgres.py --quick      # a few seconds
    python bench/bench_postgres.py --json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import oh.storage.postgres.notebooks as postgres
from oh.core.changes import parse_changes
from oh.core.notebook import new_notebook_id
from oh.core.records import Record
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.testing.postgres_cluster import PostgresCluster, fresh_schema

CLIENTS = (1, 4, 8)
TEXT = "dataset ends 2014: ruled out for the recovery question " * 2

_start: Any = None


def _init(barrier: Any) -> None:
    global _start
    _start = barrier


def _full_path_client(url: str, seconds: float, worker: int) -> tuple[int, list[float]]:
    postgres.CHECK_AFTER_IDLE = 0.0  # this process only: check every checkout, as before
    return _oh_client(url, seconds, worker, full_path=True)


def _oh_client(
    url: str, seconds: float, worker: int, *, full_path: bool = False
) -> tuple[int, list[float]]:
    store = PostgresMemoryStore(url, max_size=1, full_compaction=False)
    if full_path:
        store._remember = store._decide_and_write  # type: ignore[method-assign]
    now = datetime.now(UTC)
    notebook = new_notebook_id()
    store.create_notebook(
        notebook,
        owner="bench",
        document="doc",
        run=f"run-{notebook}",
        started_at=now,
        forgets_at=now + timedelta(days=1),
    )
    store.mark_open(notebook, None)
    version, latencies = 0, []
    _start.wait()
    deadline = time.perf_counter() + seconds
    while (begun := time.perf_counter()) < deadline:
        changes = parse_changes(
            [{"op": "add", "record": {"name": f"note:w{worker}-{version}", "text": TEXT}}]
        )
        store.remember(
            notebook,
            based_on=version,
            request_id=f"r-{version}",
            changes=changes,
            author="agent:bench",
            now=now,
        )
        latencies.append(time.perf_counter() - begun)
        version += 1
    store.close()
    return version, latencies


def _raw_client(url: str, seconds: float, worker: int) -> tuple[int, list[float]]:
    content = Record.parse({"name": "note:raw", "text": TEXT}).canonical()
    count, latencies = 0, []
    with psycopg.connect(url, autocommit=True) as conn:
        _start.wait()
        deadline = time.perf_counter() + seconds
        while (begun := time.perf_counter()) < deadline:
            conn.execute(
                "INSERT INTO raw (notebook_id, name, content) VALUES (%s, %s, %s)",
                (f"nb_{worker}", f"note:w{worker}-{count}", content),
            )
            latencies.append(time.perf_counter() - begun)
            count += 1
    return count, latencies


@dataclass(frozen=True, slots=True)
class Figure:
    clients: int
    oh_per_s: float
    full_path_per_s: float
    raw_per_s: float
    ratio: float
    speedup: float
    oh_p50_ms: float
    raw_p50_ms: float


def _measure(target: Any, url: str, clients: int, seconds: float) -> tuple[float, float]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients)
    with context.Pool(clients, initializer=_init, initargs=(barrier,)) as pool:
        results = pool.starmap(target, [(url, seconds, w) for w in range(clients)])
    operations = sum(count for count, _ in results)
    latencies = [value for _, values in results for value in values]
    return operations / seconds, statistics.median(latencies) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 s per figure")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per figure")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    seconds = 1.0 if args.quick else args.seconds

    cluster = PostgresCluster(durable=True).start()
    try:
        with fresh_schema(cluster, prefix="bench") as schema:
            url = schema.url()
            PostgresMemoryStore(url).close()  # migrate
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(
                    "CREATE TABLE raw (id BIGSERIAL PRIMARY KEY, notebook_id TEXT NOT NULL,"
                    " name TEXT NOT NULL, content TEXT NOT NULL)"
                )
                server = conn.execute("SHOW server_version").fetchone()
                settings: dict[str, str] = dict(
                    conn.execute(
                        "SELECT name, setting FROM pg_settings WHERE name IN"
                        " ('fsync', 'synchronous_commit', 'wal_sync_method', 'full_page_writes')"
                    ).fetchall()
                )
            figures = []
            for clients in CLIENTS:
                raw, raw_p50 = _measure(_raw_client, url, clients, seconds)
                oh, oh_p50 = _measure(_oh_client, url, clients, seconds)
                full, _ = _measure(_full_path_client, url, clients, seconds)
                figures.append(Figure(clients, oh, full, raw, oh / raw, oh / full, oh_p50, raw_p50))
    finally:
        cluster.stop()

    about = {
        "postgres": server[0] if server else "?",
        "settings": settings,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "seconds_per_figure": seconds,
    }
    if args.json:
        print(json.dumps({"about": about, "figures": [asdict(f) for f in figures]}, indent=2))
        return 0
    print(f"PostgreSQL {about['postgres']}, {about['cpus']} CPUs, settings {settings}")
    print(
        f"{'clients':>7}  {'Oh remember/s':>13}  {'full path/s':>11}  {'raw INSERT/s':>12}  "
        f"{'ratio':>5}  {'speed-up':>8}  {'Oh p50 ms':>9}  {'raw p50 ms':>10}"
    )
    for f in figures:
        print(
            f"{f.clients:>7}  {f.oh_per_s:>13,.0f}  {f.full_path_per_s:>11,.0f}"
            f"  {f.raw_per_s:>12,.0f}  {f.ratio:>5.2f}  {f.speedup:>7.2f}x"
            f"  {f.oh_p50_ms:>9.2f}  {f.raw_p50_ms:>10.2f}"
        )
    eight = next(f for f in figures if f.clients == 8)
    verdict = "meets" if eight.oh_per_s >= 1000 else "misses"
    print(f"8 clients: {eight.oh_per_s:,.0f} remember/s {verdict} the 1,000/s target")
    half = [f.clients for f in figures if f.ratio < 0.5]
    print(
        "ratio >= 0.5 at every client count"
        if not half
        else f"ratio below the 0.5 target at {', '.join(map(str, half))} client(s)"
    )
    print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
