"""Concurrent durable writers on the embedded backend (issue 19: group commit), against raw
single-row commits measured in the same run on the same disk.

    python bench/bench_writers.py            # about half a minute
    python bench/bench_writers.py --quick    # a few seconds
    python bench/bench_writers.py --json

For each driver (the standard library's ``sqlite3``, the default, and ``libsql``):
- **raw**: one thread, single-row ``BEGIN IMMEDIATE; INSERT; COMMIT`` transactions on a plain
  table, ``journal_mode=WAL``, ``synchronous=FULL``: the disk's durable commit rate;
- **Oh, 1 writer**: single-change ``remember`` calls of one thread on one notebook (the
  per-call figure, target ≥ 0.55× raw);
- **Oh, N writers**: N threads, each on its own notebook, through one store, all durable
  (``synchronous=FULL``): calls that arrive while a flush runs share the next one (target at 8
  writers ≥ 2.0× raw).
Every call's answer is checked (applied, at the expected version). Both sides first run 1,000
untimed commits (or calls): the rate of the first commits to a new file, whose WAL still grows,
is not the disk's steady rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from oh.core.changes import Applied, parse_changes
from oh.storage.sqlite.notebooks import DRIVERS, Driver, SqliteMemoryStore, connect
from oh.testing.memory_store import T0, open_notebook

WARM_UP = 1000  # commits (or calls, shared by the writers) before the clock starts
TEXT = "Survey of reef recovery after bleaching; methods section missing, check figure 3. " * 2


def raw_rate(path: Path, driver: Driver, calls: int) -> float:
    conn = connect(path, "FULL", driver)
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, content TEXT)")

    def commit(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (name, content) VALUES (?, ?)", (f"note:r{i:06d}", TEXT))
        conn.execute("COMMIT")

    for i in range(WARM_UP):
        commit(-i)
    start = time.perf_counter()
    for i in range(calls):
        commit(i)
    elapsed = time.perf_counter() - start
    conn.close()
    return calls / elapsed


def oh_rate(path: Path, driver: Driver, writers: int, calls: int) -> float:
    """Calls per second of ``writers`` threads writing ``calls`` single-change calls each."""
    store = SqliteMemoryStore(path, driver=driver)
    notebooks = [open_notebook(store, run=f"run-{i}") for i in range(writers)]
    warm_up = WARM_UP // writers
    changes = [
        [
            parse_changes([{"op": "add", "record": {"name": f"note:n{i:06d}", "text": TEXT}}])
            for i in range(calls + warm_up)
        ]
        for _ in range(writers)
    ]
    failures: list[str] = []
    go = threading.Barrier(writers + 1)

    def write(index: int) -> None:
        notebook_id, mine = notebooks[index], changes[index]
        try:
            go.wait()
        except threading.BrokenBarrierError:
            return
        for version in range(calls + warm_up):
            if version == warm_up:
                try:
                    go.wait()
                except threading.BrokenBarrierError:
                    return
            result = store.remember(
                notebook_id,
                based_on=version,
                request_id=f"r{version}",
                changes=mine[version],
                author="agent:bench",
                now=T0,
            )
            if not isinstance(result, Applied) or result.version != version + 1:
                failures.append(repr(result))
                go.abort()  # the others stop at their next wait
                return

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    try:
        go.wait()
        go.wait()  # every writer is through its warm-up
    except threading.BrokenBarrierError:
        pass  # a write failed: reported below
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    store.close()
    if failures:
        raise SystemExit(f"a write failed: {failures[0]}")
    return writers * calls / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", default=".", help="where the temporary files go (.)")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--reps", type=int, default=3, help="repetitions; the median is kept")
    args = parser.parse_args()
    calls = 400 if args.quick else 8000  # calls per figure, shared by its writers
    reps = 1 if args.quick else args.reps
    results: list[dict[str, Any]] = []
    for driver in DRIVERS:
        print(f"measuring {driver} ...", file=sys.stderr)
        for writers in args.writers:
            # The baseline is measured right before each figure, in the same directory, so a
            # disk whose speed drifts during the run moves both.
            raws: list[float] = []
            ohs: list[float] = []
            for _ in range(reps):
                with tempfile.TemporaryDirectory(prefix="oh-bench-writers-", dir=args.dir) as tmp:
                    raws.append(raw_rate(Path(tmp) / "raw.db", driver, calls))
                    ohs.append(oh_rate(Path(tmp) / "oh.db", driver, writers, calls // writers))
            raw, rate = statistics.median(raws), statistics.median(ohs)
            results.append(
                {
                    "driver": driver,
                    "writers": writers,
                    "oh_calls_per_s": rate,
                    "raw_commits_per_s": raw,
                    "ratio": rate / raw,
                    "target": 2.0 if writers == 8 else (0.55 if writers == 1 else None),
                }
            )
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print("| driver | writers | Oh remember/s | raw single-writer commits/s | ratio | target |")
    print("|---|---:|---:|---:|---:|---|")
    for r in results:
        target = "—" if r["target"] is None else f"≥ {r['target']}×"
        print(
            f"| {r['driver']} | {r['writers']} | {r['oh_calls_per_s']:,.0f}"
            f" | {r['raw_commits_per_s']:,.0f} | {r['ratio']:.2f}× | {target} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
