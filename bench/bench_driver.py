"""The embedded driver, decided by measurement (issue 19): Oh's embedded backend on the standard
library's ``sqlite3`` and on the ``libsql`` package, same schema, same kind of files, same run.

    python bench/bench_driver.py            # about a minute
    python bench/bench_driver.py --quick    # a few seconds
    python bench/bench_driver.py --json

For each driver, in a fresh directory on the same disk:
- ``read``: p50/p95 of the agent's ``read`` tool (``Tools.call``) on random names of a notebook
  of ``--notes`` notes, against a raw point read of the same row through the same driver
  (``SELECT content FROM records WHERE notebook_id = ? AND name = ?``, its own connection);
- ``remember``: durable (``synchronous=FULL``) single-change ``remember`` tool calls per second,
  and the store's own ``remember`` (no tool layer), against raw single-row ``BEGIN IMMEDIATE;
  INSERT; COMMIT`` transactions on a plain table through the same driver with the same settings.
Ratios are Oh ÷ raw within one driver; the last table compares the drivers with each other.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oh.core.changes import parse_changes
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import DRIVERS, Driver, SqliteMemoryStore, connect
from oh.tools import Caller, Tools

TEXT = "Survey of reef recovery after bleaching; methods section missing, check figure 3. " * 2


def timed(fn: Callable[[int], Any], runs: int) -> tuple[float, float]:
    """p50 and p95 in µs of ``fn(i)`` over ``runs`` calls, after a short warm-up."""
    for i in range(min(100, runs)):
        fn(i)
    samples = []
    for i in range(runs):
        start = time.perf_counter_ns()
        fn(i)
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.95)] / 1000


def rate(fn: Callable[[int], Any], calls: int) -> float:
    """Calls per second of ``fn(i)`` over ``calls`` calls."""
    start = time.perf_counter()
    for i in range(calls):
        fn(i)
    return calls / (time.perf_counter() - start)


def measure(directory: Path, driver: Driver, notes: int, runs: int, writes: int) -> dict[str, Any]:
    memory = SqliteMemoryStore(directory / "memory.db", driver=driver)  # synchronous=FULL
    knowledge = SqliteKnowledgeStore(directory / "knowledge.db", driver=driver)
    notebook = Notebooks(memory, knowledge=knowledge).open("owner", "doc", f"run-{driver}")
    tools = Tools(memory, knowledge, b"x" * 32)
    caller = Caller(notebook.id, "agent:bench", f"agent:run-{driver}")
    for start in range(0, notes, 64):
        changes = [
            {"op": "add", "record": {"name": f"note:n{i:06d}", "text": TEXT}}
            for i in range(start, min(notes, start + 64))
        ]
        version = memory.notebook(notebook.id).version
        answer = tools.call(
            caller, "remember", {"based_on": version, "request_id": f"b{start}", "changes": changes}
        )
        assert answer.get("status") == "applied", answer

    names = [f"note:n{i:06d}" for i in random.Random(7).choices(range(notes), k=runs + 100)]
    raw_reader = connect(directory / "memory.db", driver=driver)
    point = "SELECT content FROM records WHERE notebook_id = ? AND name = ?"
    oh_read = timed(lambda i: tools.call(caller, "read", {"name": names[i]}), runs)
    raw_read = timed(lambda i: raw_reader.execute(point, (notebook.id, names[i])).fetchone(), runs)
    raw_reader.close()

    version = memory.notebook(notebook.id).version

    def tool_remember(i: int) -> None:
        arguments = {
            "based_on": version + i,
            "request_id": f"t{i}",
            "changes": [{"op": "add", "record": {"name": f"note:t{i:06d}", "text": TEXT}}],
        }
        answer = tools.call(caller, "remember", arguments)
        assert answer.get("status") == "applied", answer

    oh_tool = rate(tool_remember, writes)
    version = memory.notebook(notebook.id).version
    stamp = datetime.now(UTC)  # the notebook was opened just now, on the system clock

    def store_remember(i: int) -> None:
        changes = parse_changes([{"op": "add", "record": {"name": f"note:s{i:06d}", "text": TEXT}}])
        memory.remember(
            notebook.id,
            based_on=version + i,
            request_id=f"s{i}",
            changes=changes,
            author="agent:bench",
            now=stamp,
        )

    oh_store = rate(store_remember, writes)
    memory.close()
    knowledge.close()

    raw = connect(directory / "raw.db", "FULL", driver)
    raw.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, content TEXT)")

    def raw_commit(i: int) -> None:
        raw.execute("BEGIN IMMEDIATE")
        raw.execute("INSERT INTO t (name, content) VALUES (?, ?)", (f"note:r{i:06d}", TEXT))
        raw.execute("COMMIT")

    raw_rate = rate(raw_commit, writes)
    raw.close()
    return {
        "driver": driver,
        "read_p50_us": oh_read[0],
        "read_p95_us": oh_read[1],
        "raw_read_p50_us": raw_read[0],
        "read_ratio": oh_read[0] / raw_read[0],
        "remember_tool_per_s": oh_tool,
        "remember_store_per_s": oh_store,
        "raw_commit_per_s": raw_rate,
        "remember_tool_ratio": oh_tool / raw_rate,
        "remember_store_ratio": oh_store / raw_rate,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dir", default=".", help="where the temporary files go (.)")
    parser.add_argument("--notes", type=int)
    args = parser.parse_args()
    notes, runs, writes = (1000, 2000, 300) if args.quick else (10_000, 20_000, 2000)
    notes = args.notes or notes
    results = []
    for driver in DRIVERS:
        with tempfile.TemporaryDirectory(prefix=f"oh-bench-{driver}-", dir=args.dir) as tmp:
            print(f"measuring {driver} ...", file=sys.stderr)
            results.append(measure(Path(tmp), driver, notes, runs, writes))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{notes} notes, {runs} reads, {writes} durable writes per figure")
    print(
        "| driver | read p50 | read p95 | raw read p50 | ratio | remember tool/s |"
        " store/s | raw commit/s | tool ratio | store ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['driver']} | {r['read_p50_us']:.1f} µs | {r['read_p95_us']:.1f} µs"
            f" | {r['raw_read_p50_us']:.1f} µs | {r['read_ratio']:.2f}×"
            f" | {r['remember_tool_per_s']:,.0f} | {r['remember_store_per_s']:,.0f}"
            f" | {r['raw_commit_per_s']:,.0f} | {r['remember_tool_ratio']:.2f}×"
            f" | {r['remember_store_ratio']:.2f}× |"
        )
    fast, slow = results
    print(
        f"sqlite3 over libsql: read p50 {slow['read_p50_us'] / fast['read_p50_us']:.2f}× faster,"
        f" remember tool {fast['remember_tool_per_s'] / slow['remember_tool_per_s']:.2f}×,"
        f" store {fast['remember_store_per_s'] / slow['remember_store_per_s']:.2f}×"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
