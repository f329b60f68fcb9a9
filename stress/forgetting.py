"""Forgetting is real (SPEC §3): after forget now and after the purge, the deleted text is not
in the raw database files: not in the database file, not in its WAL, not in shared memory (on
PostgreSQL: not in any file of the database, its catalogs, or the WAL).

Notebooks are filled with distinctive markers (``zfgt`` + 10 hex digits) everywhere a notebook
keeps something: note text (short, and long enough for overflow pages), ``fields``, record
names, link names, request ids, replaced and removed versions, and kept query answers. Other
notebooks, which are never forgotten, keep writing their own markers (``zkep…``) in between,
so freed pages get reused. Each doomed notebook is forgotten (``forget``, which compacts) or
expires and is purged by the purge worker's credential (``purge_expired``, which compacts; in
its own process on the embedded backend, as ``oh purge`` runs), and every file is scanned for
every marker ever forgotten. (On PostgreSQL the store's ``compact`` runs after each, as an
operator schedules it: forget there leaves the space to vacuum.) Before each forget the scan
must find the notebook's marker (the scan can see), and at the end every kept marker must still
be found.

On PostgreSQL the tables are also ANALYZEd before each forget (unless ``--no-analyze``), as
autovacuum would, so values sampled into the planner's statistics are scanned too.

The files are scanned by another process: reading a database file in the process that has it
open would drop SQLite's POSIX locks (see ``scan``). Markers sit in random hex, which
PostgreSQL's compression cannot shrink, so a byte scan sees every stored copy.

    python stress/forgetting.py --notebooks 200
    python stress/forgetting.py --notebooks 40 --postgres

Prints ``bytes found: 0`` and exits 1 if any forgotten marker is found.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from harness import (
    Target,
    common_arguments,
    postgres_target,
    report,
    scratch,
    script_command,
    seed_of,
)
from oh.core.changes import parse_changes
from oh.core.notebook import new_notebook_id
from oh.services.notebooks import purge_expired
from oh.storage.base import MemoryStore
from oh.testing.memory_store import T0
from oh.testing.tools import SECRET
from oh.tools import Caller, Tools

FORGOTTEN = re.compile(rb"zfgt[0-9a-f]{10}")
KEPT = re.compile(rb"zkep[0-9a-f]{10}")
PURGE_AT = T0 + timedelta(hours=2)


def _create(store: MemoryStore, run: str, forgets_at: datetime) -> str:
    notebook_id = new_notebook_id()
    store.create_notebook(
        notebook_id, owner="ann", document="doc", run=run, started_at=T0, forgets_at=forgets_at
    )
    store.mark_open(notebook_id, None)
    return notebook_id


def _write(store: MemoryStore, notebook_id: str, version: int, rid: str, changes: Any) -> None:
    store.remember(
        notebook_id,
        based_on=version,
        request_id=rid,
        changes=parse_changes(changes),
        author="agent:forget",
        now=T0,
    )


def fill(rng: random.Random, store: MemoryStore, notebook_id: str, marker: str) -> int:
    """Write ``marker`` into every place a notebook keeps something; return the version."""
    version = 0
    names: list[str] = []
    for entry in range(rng.randint(4, 12)):
        changes: list[dict[str, Any]] = []
        for index in range(rng.randint(1, 8)):
            name = f"note:{marker}-{entry}-{index}"
            record: dict[str, Any] = {"name": name, "text": _text(rng, marker)}
            if rng.random() < 0.5:
                record["fields"] = {"where": marker, "list": [marker, {"deep": marker}]}
            if names and rng.random() < 0.5:
                record["depends_on"] = [rng.choice(names)]
            record["supports"] = [f"lead:{marker}-link"]
            changes.append({"op": "add", "record": record})
            names.append(name)
        if entry and rng.random() < 0.5:
            changes.append({"op": "replace", "record": {"name": names[0], "text": f"{marker} v2"}})
        if entry > 1 and rng.random() < 0.3:
            changes.append({"op": "remove", "name": names.pop(1)})
        _write(store, notebook_id, version, f"{marker}-rid-{entry}", changes)
        version += 1
    return version


def purge_here(target: Target) -> None:
    access = target.purge_access()
    try:
        purge_expired(access, PURGE_AT)
    finally:
        access.close()


def purge_in_own_process(target: Target) -> None:
    """The embedded backend's purge credential must run in its own process (two SQLite
    libraries in one process do not share POSIX lock bookkeeping)."""
    if target.kind == "postgres":
        purge_here(target)
        return
    subprocess.run(
        script_command("forgetting.py", "--purge", target.location), check=True, timeout=120
    )


def scan(target: Target) -> tuple[set[bytes], set[bytes], int]:
    """Forgotten markers found, kept markers found, and bytes scanned.

    The files are read by another process (``grep``): opening and closing a database file in
    the process that has it open would drop SQLite's POSIX locks on it (closing any descriptor
    of a file releases all of the process's locks on that file) and let another process
    corrupt it.

    A running PostgreSQL server removes files of its own at any moment (``pg_internal.init``, a
    recycled WAL segment): one that vanishes between the listing and the reading took its bytes
    with it, so it is left out rather than counted as an error.
    """
    paths = [str(path) for path in target.files() if path.exists()]
    if not paths:
        return set(), set(), 0
    done = subprocess.run(
        ["grep", "-ohaE", "z(fgt|kep)[0-9a-f]{10}", *paths],
        capture_output=True,
        check=False,
    )
    if done.returncode > 1 and all(Path(path).exists() for path in paths):
        raise RuntimeError(done.stderr.decode(errors="replace"))
    words = set(done.stdout.split())
    forgotten = {w for w in words if FORGOTTEN.fullmatch(w)}
    kept = {w for w in words if KEPT.fullmatch(w)}
    return forgotten, kept, sum(_size(path) for path in paths)


def _size(path: str) -> int:
    try:
        return Path(path).stat().st_size
    except FileNotFoundError:
        return 0  # removed by the server since it was listed


def run(target: Target, notebooks: int, seed: int, *, analyze: bool = True) -> dict[str, Any]:
    """``analyze``: on PostgreSQL, ANALYZE before each forget, as autovacuum would."""
    rng = random.Random(seed)
    store = target.open()
    tools = Tools(store, None, SECRET, clock=lambda: T0)
    far = T0 + timedelta(days=365)
    keepers = [_create(store, f"keep-{seed}-{i}", far) for i in range(3)]
    kept_versions = dict.fromkeys(keepers, 0)
    kept_markers: set[bytes] = set()
    doomed: set[bytes] = set()
    counts = {"forgotten": 0, "purged": 0, "marker_writes": 0, "unseen_before": 0}
    found_after: dict[str, int] = {}
    largest = 0
    try:
        for number in range(notebooks):
            marker = f"zfgt{rng.getrandbits(40):010x}"
            how = "forget" if number % 2 == 0 else "purge"
            forgets_at = T0 + timedelta(hours=1) if how == "purge" else far
            notebook_id = _create(store, f"doomed-{seed}-{number}", forgets_at)
            counts["marker_writes"] += fill(rng, store, notebook_id, marker)
            caller = Caller(notebook_id, f"agent:{notebook_id}", "agent:forget")
            for question in ({"question": "current_notes"}, {"question": "conflicts"}):
                tools.call(caller, "query", question)  # kept answers hold names
            for keeper in rng.sample(keepers, 2):
                keep = f"zkep{rng.getrandbits(40):010x}"
                text = _text(rng, keep)
                rid = f"k-{number}-{keeper[-6:]}"
                name = f"note:k{number}"
                _write(store, keeper, kept_versions[keeper], rid, [_add(name, text)])
                kept_versions[keeper] += 1
                kept_markers.add(keep.encode())
            if target.kind == "postgres" and analyze:
                target.execute("ANALYZE")  # as autovacuum would: samples into pg_statistic
            seen, _, _ = scan(target)
            if marker.encode() not in seen:
                counts["unseen_before"] += 1
            doomed.add(marker.encode())
            if how == "forget":
                store.forget(notebook_id, T0)
                counts["forgotten"] += 1
            else:
                purge_in_own_process(target)
                counts["purged"] += 1
            if target.kind == "postgres":
                store.compact()  # forget there leaves the space to (auto)vacuum; see compact()
            found, _, scanned = scan(target)
            largest = max(largest, scanned)
            for leftover in found & doomed:
                key = leftover.decode()
                found_after[key] = found_after.get(key, 0) + 1
        found, kept_found, _ = scan(target)
    finally:
        store.close()
    leftovers = found & doomed
    bytes_found = sum(len(m) for m in leftovers)
    missing_kept = len(kept_markers - kept_found)
    return {
        "suite": "forgetting",
        "backend": target.kind,
        "seed": seed,
        "analyzed": analyze and target.kind == "postgres",
        "notebooks_forgotten": counts["forgotten"],
        "notebooks_purged": counts["purged"],
        "log_entries_written_with_markers": counts["marker_writes"],
        "markers_not_seen_before_forgetting": counts["unseen_before"],
        "largest_scan_bytes": largest,
        "forgotten_markers_found_at_end": len(leftovers),
        "times_a_forgotten_marker_was_found_after_compaction": sum(found_after.values()),
        "kept_markers_missing": missing_kept,
        "examples": sorted(found_after)[:5],
        "figure": f"bytes found: {bytes_found}",
        "ok": not leftovers
        and not found_after
        and missing_kept == 0
        and counts["unseen_before"] == 0,
    }


def _text(rng: random.Random, marker: str) -> str:
    """30 to 4,000 characters of random hex with the marker at the start, the middle and the end:
    incompressible, so that compression (PostgreSQL's TOAST) cannot hide the copies from a byte
    scan, and with copies on several pages of a long text."""
    size = rng.choice([30, 300, 1500, 4000])
    noise = f"{rng.getrandbits(4 * size):0{size}x}"
    if size < 100:
        return (marker + " " + noise)[:size]
    cut = size // 2
    return (marker + noise[:cut] + " " + marker + noise[cut:])[: size - 15] + " " + marker


def _add(name: str, text: str) -> dict[str, Any]:
    return {"op": "add", "record": {"name": name, "text": text}}


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--purge":
        purge_here(Target("libsql", sys.argv[2]))
        return 0
    parser = common_arguments(__doc__)
    parser.add_argument("--notebooks", type=int, default=200)
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL")
    parser.add_argument(
        "--no-analyze", action="store_true", help="PostgreSQL: no ANALYZE before each forget"
    )
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.notebooks, seed, analyze=not args.no_analyze)
    else:
        with scratch("oh-forget-", args.keep) as tmp:
            summary = run(Target.libsql(tmp), args.notebooks, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
