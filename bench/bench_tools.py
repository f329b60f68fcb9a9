"""Tool latencies in process (issue 5), against raw SQLite reads measured in the same run.

    python bench/bench_tools.py            # full sizes (10,000 notes for read, 1,000 for query)
    python bench/bench_tools.py --quick    # a smoke run of a few seconds

Measures p50/p95 of ``read`` (target p50 ≤ 30 µs at 10,000 notes), ``query current_notes``
(target p50 ≤ 2 ms at 1,000 notes), ``explain`` and the bootstrap (target p50 ≤ 1 ms), each
through ``Tools.call`` exactly as a transport calls it. Baselines, through the driver Oh runs on
(``OH_EMBEDDED_DRIVER``, ``sqlite3`` by default): a raw
``SELECT content FROM t WHERE name = ?`` for read, and a raw ``SELECT name, digest`` of all rows
for the listing questions, on an equally sized table in the same directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oh.config import embedded_driver
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore, open_driver
from oh.tools import Caller, Tools

TEXT = "Survey of reef recovery after bleaching; methods section missing, check figure 3. " * 2

# The embedded driver Oh and the raw baseline both use (OH_EMBEDDED_DRIVER, as for oh itself).
DRIVER = embedded_driver(os.environ)


def timed(fn: Callable[[], Any], runs: int) -> tuple[float, float]:
    for _ in range(min(50, runs)):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.95)] / 1000


def build(
    directory: Path, notes: int, run: str, *, sealed: bool = False, synchronous: str = "NORMAL"
) -> tuple[Tools, Caller, SqliteMemoryStore]:
    """A notebook of ``notes`` notes; ``sealed``: its content sealed with a data key of its own
    (docs/keys.md), the key store beside it."""
    keyring = None
    if sealed:
        keys = SqliteKeyStore(directory / "keys" / "keys.db")
        keyring = Keyring(MasterKeys(MasterKey.generate()), keys)
    memory = SqliteMemoryStore(
        directory / "memory.db",
        synchronous=synchronous,  # type: ignore[arg-type]
        driver=DRIVER,
        keyring=keyring,
    )
    knowledge = SqliteKnowledgeStore(directory / "knowledge.db", driver=DRIVER)
    notebook = Notebooks(memory, knowledge=knowledge).open("owner", "doc", run)
    tools = Tools(memory, knowledge, b"x" * 32)
    caller = Caller(notebook.id, "agent:bench", f"agent:{run}")
    for start in range(0, notes, 64):
        changes = [
            {
                "op": "add",
                "record": {
                    "name": f"note:n{i:06d}",
                    "text": TEXT,
                    "depends_on": [f"note:n{i - 1:06d}"] if i else [],
                },
            }
            for i in range(start, min(notes, start + 64))
        ]
        version = memory.notebook(notebook.id).version
        result = tools.call(
            caller, "remember", {"based_on": version, "request_id": f"r{start}", "changes": changes}
        )
        assert result.get("status") == "applied", result
    return tools, caller, memory


def raw_table(path: Path, rows: int) -> Any:
    conn = open_driver(path, DRIVER)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (name TEXT PRIMARY KEY, digest TEXT, content TEXT) WITHOUT ROWID")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?)", [(f"note:n{i:06d}", "d" * 64, TEXT) for i in range(rows)]
    )
    conn.execute("COMMIT")
    return conn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    read_notes, query_notes, runs = (1000, 200, 300) if args.quick else (10_000, 1000, 3000)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="oh-bench-tools-") as tmp:
        big, small = Path(tmp) / "big", Path(tmp) / "small"
        big.mkdir()
        small.mkdir()
        tools, caller, memory = build(big, read_notes, "read-run")
        raw = raw_table(Path(tmp) / "raw.db", read_notes)
        name = f"note:n{read_notes // 2:06d}"
        oh_read = timed(lambda: tools.call(caller, "read", {"name": name}), runs)
        raw_read = timed(
            lambda: raw.execute("SELECT content FROM t WHERE name = ?", (name,)).fetchone(), runs
        )
        results.append(
            {
                "metric": f"read p50 at {read_notes} notes",
                "oh_us": oh_read[0],
                "oh_p95_us": oh_read[1],
                "baseline_us": raw_read[0],
                "target_us": 30,
            }
        )
        memory.close()

        # Sealed notebooks (docs/keys.md): the same read and a durable one-change remember,
        # sealed and not, in this run; the unsealed figure is the baseline.
        sealed_dir, plain_dir = Path(tmp) / "sealed", Path(tmp) / "plain"
        sealed_dir.mkdir()
        plain_dir.mkdir()
        figures = {}
        for label, directory in (("plain", plain_dir), ("sealed", sealed_dir)):
            tools_s, caller_s, memory_s = build(
                directory, read_notes, f"{label}-run", sealed=label == "sealed", synchronous="FULL"
            )
            read = timed(lambda t=tools_s, c=caller_s: t.call(c, "read", {"name": name}), runs)
            counter = iter(range(10**9))

            def one_remember(
                t: Tools = tools_s,
                c: Caller = caller_s,
                counter: Any = counter,
                memory_s: SqliteMemoryStore = memory_s,
            ) -> None:
                i = next(counter)
                change = {"op": "replace", "record": {"name": "note:n000003", "text": f"{TEXT}{i}"}}
                version = memory_s.notebook(c.notebook_id).version
                t.call(
                    c, "remember", {"based_on": version, "request_id": f"w{i}", "changes": [change]}
                )

            boot = timed(lambda t=tools_s, c=caller_s: t.call(c, "bootstrap", None), runs // 10)
            figures[label] = (read, timed(one_remember, max(100, runs // 10)), boot)
            memory_s.close()
        (plain_read, plain_write, plain_boot) = figures["plain"]
        (sealed_read, sealed_write, sealed_boot) = figures["sealed"]
        results += [
            {
                "metric": f"read p50 at {read_notes} notes, sealed (vs unsealed)",
                "oh_us": sealed_read[0],
                "oh_p95_us": sealed_read[1],
                "baseline_us": plain_read[0],
                "target_us": round(plain_read[0] + 5, 1),
            },
            {
                "metric": f"bootstrap p50 at {read_notes} notes, sealed (vs unsealed)",
                "oh_us": sealed_boot[0],
                "oh_p95_us": sealed_boot[1],
                "baseline_us": plain_boot[0],
                "target_us": None,
            },
            {
                "metric": "remember p50, 1 change, FULL, sealed (vs unsealed)",
                "oh_us": sealed_write[0],
                "oh_p95_us": sealed_write[1],
                "baseline_us": plain_write[0],
                "target_us": round(plain_write[0] * 1.15, 1),
            },
        ]

        tools, caller, memory = build(small, query_notes, "query-run")
        raw_small = raw_table(Path(tmp) / "raw-small.db", query_notes)
        listing = timed(
            lambda: raw_small.execute("SELECT name, digest FROM t").fetchall(), runs // 3
        )
        question = {"question": "current_notes", "limit": 200}
        oh_query = timed(lambda: tools.call(caller, "query", question), runs // 3)
        answer = tools.call(caller, "query", question)
        oh_explain = timed(
            lambda: tools.call(caller, "explain", {"token": answer["token"], "row": 3}), runs
        )
        oh_boot = timed(lambda: tools.call(caller, "bootstrap", None), runs // 3)
        cold_samples: list[float] = []
        cold_boot: list[float] = []
        for i in range(max(20, runs // 30)):
            version = memory.notebook(caller.notebook_id).version
            tools.call(
                caller,
                "remember",
                {
                    "based_on": version,
                    "request_id": f"cold-{i}",
                    "changes": [
                        {"op": "replace", "record": {"name": "note:n000001", "text": f"{TEXT} {i}"}}
                    ],
                },
            )
            start = time.perf_counter_ns()
            tools.call(caller, "query", question)
            cold_samples.append((time.perf_counter_ns() - start) / 1000)
            version += 1
            tools.call(
                caller,
                "remember",
                {
                    "based_on": version,
                    "request_id": f"cold-b-{i}",
                    "changes": [
                        {"op": "replace", "record": {"name": "note:n000002", "text": f"{TEXT} {i}"}}
                    ],
                },
            )
            start = time.perf_counter_ns()
            tools.call(caller, "bootstrap", None)
            cold_boot.append((time.perf_counter_ns() - start) / 1000)
        cold_samples.sort()
        cold_boot.sort()
        graph = {"question": "depends_on", "name": f"note:n{query_notes - 1:06d}"}
        oh_graph = timed(lambda: tools.call(caller, "query", graph), runs // 10)
        results += [
            {
                "metric": f"query current_notes p50 at {query_notes} notes",
                "oh_us": oh_query[0],
                "oh_p95_us": oh_query[1],
                "baseline_us": listing[0],
                "target_us": 2000,
            },
            {
                "metric": f"query current_notes right after a write, {query_notes} notes",
                "oh_us": statistics.median(cold_samples),
                "oh_p95_us": cold_samples[int(len(cold_samples) * 0.95)],
                "baseline_us": listing[0],
                "target_us": 2000,
            },
            {
                "metric": f"bootstrap right after a write, {query_notes} notes",
                "oh_us": statistics.median(cold_boot),
                "oh_p95_us": cold_boot[int(len(cold_boot) * 0.95)],
                "baseline_us": listing[0],
                "target_us": 1000,
            },
            {
                "metric": "explain p50",
                "oh_us": oh_explain[0],
                "oh_p95_us": oh_explain[1],
                "baseline_us": raw_read[0],
                "target_us": None,
            },
            {
                "metric": f"bootstrap p50 at {query_notes} notes",
                "oh_us": oh_boot[0],
                "oh_p95_us": oh_boot[1],
                "baseline_us": listing[0],
                "target_us": 1000,
            },
            {
                "metric": f"query depends_on (depth 8) p50 at {query_notes} notes",
                "oh_us": oh_graph[0],
                "oh_p95_us": oh_graph[1],
                "baseline_us": listing[0],
                "target_us": None,
            },
        ]
        memory.close()
    for row in results:
        row["ratio"] = round(row["oh_us"] / row["baseline_us"], 2)
        row["met"] = None if row["target_us"] is None else row["oh_us"] <= row["target_us"]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{'metric':54} {'oh p50':>10} {'oh p95':>10} {'raw p50':>10} {'ratio':>7}"
        f" {'target':>9}  met"
    )
    for row in results:
        target = "-" if row["target_us"] is None else f"{row['target_us']} us"
        met = "-" if row["met"] is None else ("yes" if row["met"] else "NO")
        print(
            f"{row['metric']:54} {row['oh_us']:>8.1f}us {row['oh_p95_us']:>8.1f}us"
            f" {row['baseline_us']:>8.1f}us {row['ratio']:>6}x {target:>9}  {met}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
