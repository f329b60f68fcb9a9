"""``oh verify`` across cores: entries/s at ``--jobs 1`` (in process) against ``--jobs 2``.

Builds a libSQL data directory of 64 notebooks (``--quick``: 16) of realistic research notes,
a few thousand log entries each (``--quick``: 600), written through the store API with
``synchronous=NORMAL`` (building is not what is measured). Then, in the same run:

1. entries/s of ``verify_store`` with ``jobs=1`` (today's in-process path, the baseline) and
   with ``jobs=2`` (and with the machine's usable cores, if more), each worker opening its own
   connections the way ``oh verify`` has them open (``oh.cli.verify``). Ratio against jobs=1;
   target at least 1.6x on 2 cores. Each figure is the best of ``--reps`` runs: the machine
   is shared, and the best run is the one least disturbed by other work.
2. a single-notebook data directory verified at jobs=1 and at jobs=auto (which stays in
   process: there is nothing to share), to show no regression; ratio auto / 1.
3. the break-even of starting workers: a 2-notebook directory just below the in-process
   threshold (``oh.verify.pool.SPREAD_FROM_ENTRIES``), verified in process and with the workers
   forced, to show why small directories stay in process.

Every report is checked to be identical to the jobs=1 report. No figure is asserted on.

Run from the repository root::

    python bench/bench_verify.py            # full sizes, about a minute on 2 cores
    python bench/bench_verify.py --quick    # smoke run, a few seconds
    python bench/bench_verify.py --json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import oh.verify.pool
from oh.cli.verify import _reopen, default_jobs
from oh.config import Locations, open_knowledge_store
from oh.core.changes import Applied, parse_changes
from oh.core.notebook import new_notebook_id
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.verify import VerifyReport, verify_store

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # bench data is stamped, not dated today

_SUBJECTS = (
    "Coral cover on the north transect",
    "The 2016 bleaching survey",
    "Parrotfish density at site B",
    "Larval settlement tiles",
    "Water temperature logger 7",
    "The restoration nursery",
)
_CLAIMS = (
    "recovered faster than the model predicted",
    "disagrees with the reef-check figures",
    "depends on the storm season",
    "was measured with a new protocol",
    "supports the herbivory hypothesis",
)
_ACTIONS = (
    "Check the raw counts before citing it.",
    "Ask the field team about the dates.",
    "Compare with the 2022 update when it loads.",
    "Cite the table, not the abstract.",
)


def _text(rng: random.Random, i: int) -> str:
    text = f"{rng.choice(_SUBJECTS)} {rng.choice(_CLAIMS)}. {rng.choice(_ACTIONS)}"
    return f"{text} (page {rng.randint(2, 240)}, item {i})"


def build(data: Path, notebooks: int, entries: int, seed: int = 19) -> int:
    """Write ``notebooks`` notebooks of ``entries`` log entries each: mostly new notes, some
    replacing an earlier note, a few with two changes; return the entries written."""
    data.mkdir(parents=True, exist_ok=True)
    store = SqliteMemoryStore(data / "memory.db", synchronous="NORMAL")
    open_knowledge_store(Locations.resolve(str(data))).close()
    rng = random.Random(seed)
    written = 0
    try:
        for n in range(notebooks):
            notebook_id = new_notebook_id()
            store.create_notebook(
                notebook_id,
                owner="owner:bench",
                document="doc:reef",
                run=f"run-{n}",
                started_at=T0,
                forgets_at=T0 + timedelta(days=3650),
            )
            store.mark_open(notebook_id, None)
            version = 0
            names = 0
            for call in range(entries):
                changes: list[dict[str, Any]] = []
                for _ in range(2 if rng.random() < 0.1 else 1):
                    if names and rng.random() < 0.25:
                        name = f"note:reef-{rng.randrange(names):05d}"
                        changes.append({"op": "replace", "record": {"name": name, "text": ""}})
                    else:
                        name = f"note:reef-{names:05d}"
                        names += 1
                        changes.append({"op": "add", "record": {"name": name, "text": ""}})
                    changes[-1]["record"]["text"] = _text(rng, call)
                if len({c["record"]["name"] for c in changes}) < len(changes):
                    changes = changes[:1]
                result = store.remember(
                    notebook_id,
                    based_on=version,
                    request_id=f"req-{call}",
                    changes=parse_changes(changes),
                    author="agent:bench",
                    now=T0 + timedelta(seconds=call),
                )
                assert isinstance(result, Applied), result
                version = result.version
                written += 1
    finally:
        store.close()
    return written


# This process's CPU seconds in the best run of the last ``timed_verify``: at jobs=2 about half
# of jobs=1's when the work is shared evenly, whatever the other work on the machine.
LAST_CPU: list[float] = [0.0]


def timed_verify(data: Path, jobs: int, reps: int) -> tuple[float, VerifyReport]:
    """Best wall time of ``reps`` verifies of ``data`` at ``jobs``, as ``oh verify`` runs it."""
    locations = Locations.resolve(str(data), create=False)
    best = float("inf")
    report = VerifyReport()
    for _ in range(reps):
        store, knowledge = _reopen(locations)
        try:
            start, cpu = time.perf_counter(), time.process_time()
            report = verify_store(
                store,
                knowledge=knowledge,
                jobs=jobs,
                reopen=functools.partial(_reopen, locations),
            )
            if time.perf_counter() - start < best:
                best = time.perf_counter() - start
                LAST_CPU[0] = time.process_time() - cpu
        finally:
            store.close()
            if knowledge is not None:
                getattr(knowledge, "close", lambda: None)()
    return best, report


def with_threshold(value: int, action: Callable[[], Any]) -> Any:
    saved = oh.verify.pool.SPREAD_FROM_ENTRIES
    oh.verify.pool.SPREAD_FROM_ENTRIES = value
    try:
        return action()
    finally:
        oh.verify.pool.SPREAD_FROM_ENTRIES = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller run, a few seconds")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--reps", type=int, default=3, help="runs per figure, best kept (3)")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the scratch directory")
    args = parser.parse_args()
    notebooks, entries = (16, 600) if args.quick else (64, 3000)
    cores = default_jobs()
    scratch = Path(tempfile.mkdtemp(prefix="oh-bench-verify-", dir=args.dir))
    result: dict[str, Any] = {"cores": cores, "notebooks": notebooks}
    result["load_average_before"] = round(os.getloadavg()[0], 2)
    try:
        start = time.perf_counter()
        total = build(scratch / "many", notebooks, entries)
        result["entries"] = total
        result["build_seconds"] = round(time.perf_counter() - start, 1)

        # 1. many notebooks, jobs=1 against jobs=2 (and every usable core).
        base_s, base = timed_verify(scratch / "many", 1, args.reps)
        assert base.ok and base.entries == total, base.to_json()
        figures: dict[str, float] = {
            "jobs_1": round(total / base_s),
            "cpu_1": round(LAST_CPU[0], 2),
        }
        for jobs in sorted({2, cores}):
            seconds, report = with_threshold(
                0 if args.quick else oh.verify.pool.SPREAD_FROM_ENTRIES,
                functools.partial(timed_verify, scratch / "many", jobs, args.reps),
            )
            assert report.to_json() == base.to_json()
            figures[f"jobs_{jobs}"] = round(total / seconds)
            figures[f"ratio_{jobs}"] = round(base_s / seconds, 2)
            figures[f"cpu_{jobs}"] = round(LAST_CPU[0], 2)
        result["many"] = figures

        # 2. one notebook: jobs=auto stays in process.
        single_entries = 600 if args.quick else 3000
        build(scratch / "one", 1, single_entries)
        one_s, one = timed_verify(scratch / "one", 1, args.reps)
        auto_s, auto = timed_verify(scratch / "one", cores, args.reps)
        assert auto.to_json() == one.to_json()
        result["single"] = {
            "entries": single_entries,
            "jobs_1_ms": round(one_s * 1000, 1),
            "jobs_auto_ms": round(auto_s * 1000, 1),
            "ratio": round(auto_s / one_s, 2),
        }

        # 3. just below the threshold: in process against workers forced.
        below = oh.verify.pool.SPREAD_FROM_ENTRIES // 2 - 1 if not args.quick else 1000
        build(scratch / "small", 2, below)
        small_s, small = timed_verify(scratch / "small", 2, args.reps)
        forced_s, forced = with_threshold(0, lambda: timed_verify(scratch / "small", 2, args.reps))
        assert forced.to_json() == small.to_json()
        result["threshold"] = {
            "spread_from_entries": oh.verify.pool.SPREAD_FROM_ENTRIES,
            "entries": 2 * below,
            "in_process_ms": round(small_s * 1000, 1),
            "workers_forced_ms": round(forced_s * 1000, 1),
            "ratio": round(small_s / forced_s, 2),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["load_average_after"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    many = result["many"]
    print(f"oh verify across cores: {cores} usable cores, {notebooks} notebooks, {total:,} entries")
    print(
        f"  (built in {result['build_seconds']} s, synchronous=NORMAL; load average"
        f" {result['load_average_before']} before, {result['load_average_after']} after)"
    )
    print(
        f"  jobs=1 (in process, baseline): {many['jobs_1']:>9,} entries/s"
        f"  (this process: {many['cpu_1']} CPU s)"
    )
    for jobs in sorted({2, cores}):
        target = "  (target >= 1.6x on 2 cores)" if jobs == 2 else ""
        print(
            f"  jobs={jobs}:{'':21}{many[f'jobs_{jobs}']:>9,} entries/s"
            f"  {many[f'ratio_{jobs}']:.2f}x  (this process: {many[f'cpu_{jobs}']} CPU s){target}"
        )
    single = result["single"]
    print(
        f"one notebook of {single['entries']:,} entries: jobs=1 {single['jobs_1_ms']} ms,"
        f" jobs=auto {single['jobs_auto_ms']} ms ({single['ratio']:.2f}x the time)"
    )
    small = result["threshold"]
    print(
        f"2 notebooks, {small['entries']:,} entries (threshold {small['spread_from_entries']:,}):"
        f" in process {small['in_process_ms']} ms, workers forced {small['workers_forced_ms']}"
        f" ms (speedup {small['ratio']:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
