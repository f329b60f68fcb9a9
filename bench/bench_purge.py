"""Purge throughput (issue 3): expired notebooks of 100 notes each, purged per second by
``purge_expired`` through the purge credential, against raw SQLite deleting the same number of
rows in the same batches, measured in the same run on the same disk.

    python bench/bench_purge.py            # 2,000 notebooks (~1 minute to build)
    python bench/bench_purge.py --quick    # 200 notebooks

Target: ≥ 1,000 notebooks/s on the embedded default. The figure includes everything a pass
does: finding expired notebooks, re-checking each atomically, deleting every content table's
rows with secure_delete (zeroing the bytes), and the WAL checkpoint that makes forgetting real.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oh.config import embedded_driver
from oh.core.changes import parse_changes
from oh.core.notebook import new_notebook_id
from oh.services.notebooks import purge_expired
from oh.storage.sqlite.notebooks import SqliteMemoryStore, SqlitePurgeAccess, open_driver

NOTES = 100
TEXT = "Reef survey note: methods section missing, check figure 3 against the second paper. "

# The embedded driver Oh and the raw baseline both use (OH_EMBEDDED_DRIVER, as for oh itself).
DRIVER = embedded_driver(os.environ)


def build(path: Path, notebooks: int) -> None:
    store = SqliteMemoryStore(path, synchronous="NORMAL", driver=DRIVER)
    started = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(notebooks):
        notebook_id = new_notebook_id()
        store.create_notebook(
            notebook_id,
            owner="o",
            document="d",
            run=f"r{n}",
            started_at=started,
            forgets_at=started + timedelta(hours=24),
        )
        store.mark_open(notebook_id, None)
        for batch in range(0, NOTES, 50):
            changes = parse_changes(
                [
                    {"op": "add", "record": {"name": f"note:n{i}", "text": TEXT}}
                    for i in range(batch, batch + 50)
                ]
            )
            store.remember(
                notebook_id,
                based_on=batch // 50,
                request_id=f"r{batch}",
                changes=changes,
                author="agent:r",
                now=started,
            )
    store.close()


def raw_baseline(path: Path, notebooks: int, batch: int) -> float:
    conn = open_driver(path, DRIVER)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA secure_delete=ON")
    conn.execute("CREATE TABLE notes (notebook INTEGER, name TEXT, content TEXT)")
    conn.execute("CREATE INDEX notes_by_notebook ON notes (notebook)")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO notes VALUES (?, ?, ?)",
        [(n, f"note:n{i}", TEXT * 3) for n in range(notebooks) for i in range(NOTES)],
    )
    conn.execute("COMMIT")
    start = time.perf_counter()
    for first in range(0, notebooks, batch):
        conn.execute("BEGIN IMMEDIATE")
        for n in range(first, min(notebooks, first + batch)):
            conn.execute("DELETE FROM notes WHERE notebook = ?", (n,))
        conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    elapsed = time.perf_counter() - start
    conn.close()
    return notebooks / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    notebooks = 200 if args.quick else 2000
    batch = 200  # purge_expired's default batch
    with tempfile.TemporaryDirectory(prefix="oh-bench-purge-", dir=".") as tmp:
        path = Path(tmp) / "memory.db"
        build(path, notebooks)
        access = SqlitePurgeAccess(path)
        start = time.perf_counter()
        report = purge_expired(access, datetime(2026, 1, 3, tzinfo=UTC), batch=batch)
        elapsed = time.perf_counter() - start
        access.close()
        assert len(report.purged) == notebooks, report.to_json()
        oh_rate = notebooks / elapsed
        raw_rate = raw_baseline(Path(tmp) / "raw.db", notebooks, batch)
    result: dict[str, Any] = {
        "metric": f"purge, {NOTES} notes per notebook",
        "notebooks": notebooks,
        "oh_per_s": round(oh_rate),
        "raw_per_s": round(raw_rate),
        "ratio": round(oh_rate / raw_rate, 2),
        "target_per_s": 1000,
        "met": oh_rate >= 1000,
        "compacted": report.compacted,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['metric']}: oh {result['oh_per_s']:,} notebooks/s, raw SQLite delete"
            f" {result['raw_per_s']:,}/s, ratio {result['ratio']}x; target >= 1,000/s:"
            f" {'met' if result['met'] else 'NOT met'} (checkpointed: {report.compacted})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
