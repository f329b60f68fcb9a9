"""Purge races (SPEC §3): late writers hammer notebooks while the purge worker deletes them.

Notebooks expire one after another over a few seconds. Writer processes keep writing to them
with a clock that still believes it is early (a slow agent step), and retry earlier requests
identically; a purge process runs passes with its own purge credential on a clock that runs
from the moment every process is ready. Time is injected throughout: the schedule starts at a
fixed date, the purger's clock is that date plus the real seconds elapsed since the start, so
neither the wall clock's date nor how long the processes took to start can change the race.
Afterwards every notebook must be a tombstone with no content, and one more late write and one
more identical retry on each must be refused ``purged``. Any notebook that fails is a
resurrection.

    python stress/purge_race.py --races 10000        # the full run
    python stress/purge_race.py --races 200          # what CI runs (tests/test_stress_smoke.py)

Prints ``resurrections: N`` and exits 1 when N > 0.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from oh.core.changes import parse_changes
from oh.core.notebook import new_notebook_id
from oh.errors import Purged
from oh.services.notebooks import purge_expired
from oh.storage.sqlite.notebooks import SqliteMemoryStore, SqlitePurgeAccess
from oh.testing.memory_store import T0

START = T0  # the moment every process is ready, on the race's own timeline
EARLY = START  # what the late writers' clock says: the moment their notebooks opened
HEAD_START = 1.0  # seconds between the start and the first expiry: the writers get going


def _change(name: str, text: str) -> Any:
    return parse_changes([{"op": "add", "record": {"name": name, "text": text}}])


def writer(path: str, ids: list[str], seed: int, deadline: float, ready: Any, out: Any) -> None:
    rng = random.Random(seed)
    store = SqliteMemoryStore(path, synchronous="NORMAL")
    ready.wait(timeout=120)  # a process that died before the start fails the run, not hangs
    alive = list(ids)
    applied = refused_purged = retries = 0
    earlier: dict[str, tuple[int, str, str]] = {}
    counter = 0
    while alive and time.monotonic() < deadline:
        notebook_id = rng.choice(alive)
        try:
            if notebook_id in earlier and rng.random() < 0.3:
                based_on, request_id, name = earlier[notebook_id]
                store.remember(
                    notebook_id,
                    based_on=based_on,
                    request_id=request_id,
                    changes=_change(name, "late note"),
                    author="agent:late",
                    now=EARLY,
                )
                retries += 1
                continue
            version = store.notebook(notebook_id).version
            counter += 1
            name, request_id = f"note:w{seed}-{counter}", f"w{seed}-{counter}"
            result = store.remember(
                notebook_id,
                based_on=version,
                request_id=request_id,
                changes=_change(name, "late note"),
                author="agent:late",
                now=EARLY,
            )
            if result.to_json()["status"] == "applied":
                applied += 1
                earlier[notebook_id] = (version, request_id, name)
        except Purged:
            refused_purged += 1
            alive.remove(notebook_id)
    store.close()
    out.put({"applied": applied, "refused_purged": refused_purged, "retries": retries})


def purger(path: str, total: int, deadline: float, ready: Any, out: Any) -> None:
    access = SqlitePurgeAccess(path)
    ready.wait(timeout=120)  # a process that died before the start fails the run, not hangs
    began = time.monotonic()

    def clock() -> datetime:
        return START + timedelta(seconds=time.monotonic() - began)

    purged = passes = 0
    while purged < total and time.monotonic() < deadline:
        report = purge_expired(access, clock(), batch=25)
        purged += len(report.purged)
        passes += 1
        time.sleep(0.001)
    access.close()
    out.put({"purged": purged, "passes": passes})


def run(races: int, writers: int, spread: float, workdir: Path) -> dict[str, Any]:
    path = str(workdir / "memory.db")
    store = SqliteMemoryStore(path, synchronous="NORMAL")
    ids = []
    for i in range(races):
        notebook_id = new_notebook_id()
        # Expiries spread over the run, starting a moment after every process is ready.
        forgets = START + timedelta(seconds=HEAD_START + spread * i / races)
        store.create_notebook(
            notebook_id,
            owner="owner",
            document="doc",
            run=f"run-{i}",
            started_at=EARLY,
            forgets_at=forgets,
        )
        store.mark_open(notebook_id, None)
        ids.append(notebook_id)
    store.close()

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    ready = context.Barrier(writers + 1)  # the purger and the writers start together
    deadline = time.monotonic() + spread + 120
    procs = [context.Process(target=purger, args=(path, races, deadline, ready, queue))]
    procs += [
        context.Process(target=writer, args=(path, ids, seed, deadline, ready, queue))
        for seed in range(writers)
    ]
    for proc in procs:
        proc.start()
    reports = [queue.get() for _ in procs]
    for proc in procs:
        proc.join()

    store = SqliteMemoryStore(path)
    resurrected = []
    for notebook_id in ids:
        notebook = store.notebook(notebook_id)
        bad = notebook.state != "purged" or store.records(notebook_id) != []
        bad = bad or any(True for _ in store.log(notebook_id))
        for request_id in ("late-final", "w0-1"):
            try:
                store.remember(
                    notebook_id,
                    based_on=notebook.version,
                    request_id=request_id,
                    changes=_change("note:w0-1", "late note"),
                    author="agent:late",
                    now=EARLY,
                )
                bad = True
            except Purged:
                pass
        if bad:
            resurrected.append(notebook_id)
    store.close()
    totals: dict[str, int] = {}
    for report in reports:
        for key, value in report.items():
            totals[key] = totals.get(key, 0) + value
    return {"races": races, "writers": writers, **totals, "resurrections": len(resurrected)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--races", type=int, default=10_000)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument(
        "--spread",
        type=float,
        default=None,
        help="seconds over which the notebooks expire (default: races/400)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    spread = args.spread if args.spread is not None else max(1.0, args.races / 400)
    with tempfile.TemporaryDirectory(prefix="oh-purge-race-") as tmp:
        summary = run(args.races, args.writers, spread, Path(tmp))
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key}: {value}")
    return 1 if summary["resurrections"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
