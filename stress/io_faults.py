"""I/O faults (SPEC §5, design: "locked/busy/I/O/full/read-only → storage_unavailable"): a full
disk, a read-only database and a locked database answer ``storage_unavailable``, damage
nothing, and the store works again once the fault clears.

* **Disk full**: the database lives on a small tmpfs (when running as root and ``mount`` works;
  otherwise a child process whose file size limit, ``RLIMIT_FSIZE``, is lowered with SIGXFSZ
  ignored, so writes fail with EFBIG). Each cycle leaves a little room (16 to 256 KiB), writes
  notes of ~3.5 KB until a write fails, tries a forget on the full disk, then gives the room
  back. The failing call must be ``storage_unavailable``, and the same open store must write
  again afterwards.
* **Read-only**: the filesystem is remounted read-only (or, without root, the database's
  connection is put in ``query_only``); opening the store or writing must answer
  ``storage_unavailable``, reads of an open store keep working; then it is made writable
  again.
* **Locked**: another connection, in this process or another one, holds ``BEGIN IMMEDIATE``; a
  store with a short busy wait must answer ``storage_unavailable`` for writes (and a forget)
  while reads go on; when the lock is released, writes work.
* **PostgreSQL** (``--postgres``): the server is stopped under an open store, which must answer
  ``storage_unavailable``, and is started again, after which the same store works.

After every cycle: ``PRAGMA integrity_check`` is ``ok``, ``verify`` finds no problem, and every
acknowledged write is in the log.

    python stress/io_faults.py --cycles 100
    python stress/io_faults.py --cycles 20 --postgres

Prints ``storage_unavailable: N/N`` and exits 1 on any other answer, corruption or lost write.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
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
from oh.errors import OhError
from oh.storage.base import MemoryStore
from oh.testing.memory_store import T0, open_notebook
from oh.verify import verify_store


class Cycle:
    """What one fault did: the answers while it lasted and whether the store came back."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.answers: list[str] = []
        self.recovered = False
        self.sound = False
        self.lost = 0
        self.damage: list[str] = []
        self.misreported_forgets = 0  # forgets applied but answered storage_unavailable

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def _write(store: MemoryStore, notebook_id: str, serial: int, size: int = 3500) -> Any:
    version = store.notebook(notebook_id).version
    text = f"{serial:08d} " + os.urandom(size // 2).hex()[: size - 9]
    return store.remember(
        notebook_id,
        based_on=version,
        request_id=f"io-{serial}",
        changes=parse_changes(
            [{"op": "add", "record": {"name": f"note:io{serial}", "text": text}}]
        ),
        author="agent:io",
        now=T0,
    )


class Ledger:
    """Acknowledged writes, to check none was lost."""

    def __init__(self) -> None:
        self.serial = 0
        self.acked: dict[str, set[str]] = {}

    def write(self, store: MemoryStore, notebook_id: str, size: int = 3500) -> str | None:
        """One write; None if acknowledged, else the error code."""
        self.serial += 1
        try:
            _write(store, notebook_id, self.serial, size)
        except OhError as exc:
            return exc.code
        except Exception as exc:
            return f"crash: {type(exc).__name__}: {exc}"
        self.acked.setdefault(notebook_id, set()).add(f"io-{self.serial}")
        return None

    def check(self, target: Target, cycle: Cycle) -> None:
        """Integrity, verify and every acknowledged write, on a fresh connection."""
        store = target.open()
        try:
            verified = verify_store(store)
            for notebook_id, acked in self.acked.items():
                logged = {entry.request_id for entry in store.log(notebook_id)}
                cycle.lost += len(acked - logged)
        finally:
            store.close()
        integrity = "ok"
        if target.kind == "libsql":
            integrity = str(target.execute("PRAGMA integrity_check")[0][0])
        cycle.sound = verified.ok and integrity == "ok"
        cycle.damage = [f"{p.what}: {p.detail}" for p in verified.problems[:3]]
        if integrity != "ok":
            cycle.damage.append(f"integrity_check: {integrity}")


# -- disk full ------------------------------------------------------------------------------------


def _mount(*args: str) -> bool:
    done = subprocess.run(["mount", *args], capture_output=True, check=False)
    return done.returncode == 0


@contextlib.contextmanager
def small_filesystem(directory: Path) -> Iterator[bool]:
    """A tmpfs at ``directory`` when this process may mount one; yields whether it did."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and _mount("-t", "tmpfs", "-o", "size=64m", "tmpfs", str(directory))
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(directory)], check=False)


def _used(directory: Path) -> int:
    stats = os.statvfs(directory)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def disk_full(directory: Path, cycles: int, seed: int, mode: str) -> list[Cycle]:
    """Fill the disk ``cycles`` times; ``mode`` is ``tmpfs`` (remount with a small size) or
    ``rlimit`` (lower this process's file size limit; run it in a child)."""
    rng = random.Random(seed)
    target = Target.libsql(directory)
    store = target.open()
    ledger = Ledger()
    notebooks = [open_notebook(store, run=f"full-{i}") for i in range(2)]
    for notebook_id in notebooks:
        ledger.write(store, notebook_id)
    if mode == "rlimit":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    done = []
    for number in range(cycles):
        cycle = Cycle("disk full")
        room = rng.randint(16, 256) * 1024
        if mode == "tmpfs":
            size = (_used(directory) + room) // 4096 * 4096 + 4096
            if not _mount("-o", f"remount,size={size}", str(directory)):
                raise RuntimeError("tmpfs remount refused")
        else:
            largest = max(p.stat().st_size for p in directory.glob("memory.db*"))
            resource.setrlimit(resource.RLIMIT_FSIZE, (largest + room, resource.RLIM_INFINITY))
        for _ in range(1000):
            answer = ledger.write(store, rng.choice(notebooks))
            if answer is not None:
                cycle.answers.append(answer)
                break
        if cycle.answers and rng.random() < 0.5:
            # Forgetting needs room too (the WAL); refused now, it must work later.
            doomed = notebooks.pop(0)
            refused = None
            try:
                store.forget(doomed, T0)
            except OhError as exc:
                refused = exc.code
                cycle.answers.append(exc.code)
            if store.notebook(doomed).state == "purged":
                if refused is not None:
                    # Applied, yet answered as a failure: the compaction after the commit
                    # failed on the full disk and its error became the forget's answer.
                    cycle.misreported_forgets += 1
                ledger.acked.pop(doomed, None)  # a new notebook takes its place below
            else:
                notebooks.insert(0, doomed)
        if mode == "tmpfs":
            _mount("-o", "remount,size=64m", str(directory))
        else:
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        while len(notebooks) < 2:
            notebooks.append(open_notebook(store, run=f"after-forget-{number}"))
        cycle.recovered = ledger.write(store, rng.choice(notebooks), size=100) is None
        if mode == "tmpfs" and cycle.recovered:
            # Make room for the next cycle: forget one notebook full of notes.
            doomed = notebooks.pop(0)
            store.forget(doomed, T0)
            ledger.acked.pop(doomed, None)
            notebooks.append(open_notebook(store, run=f"fresh-{number}"))
        ledger.check(target, cycle)
        done.append(cycle)
    store.close()
    return done


# -- read-only ------------------------------------------------------------------------------------


def read_only(directory: Path, cycles: int, seed: int, mounted: bool) -> list[Cycle]:
    rng = random.Random(seed)
    target = Target.libsql(directory)
    ledger = Ledger()
    store = target.open()
    notebook_id = open_notebook(store, run="read-only")
    ledger.write(store, notebook_id)
    done = []
    for _ in range(cycles):
        if mounted and rng.random() < 0.5:
            cycle = Cycle("read-only filesystem")
            store.close()
            if not _mount("-o", "remount,ro", str(directory)):
                raise RuntimeError("remount read-only refused")
            try:
                try:
                    target.open().close()
                    cycle.answers.append("opened")
                except OhError as exc:
                    cycle.answers.append(exc.code)
                except Exception as exc:
                    cycle.answers.append(f"crash: {type(exc).__name__}: {exc}")
            finally:
                _mount("-o", "remount,rw", str(directory))
            store = target.open()
        else:
            cycle = Cycle("read-only connection")
            conn = store._conn  # the fault is injected into the store's own connection
            conn.execute("PRAGMA query_only=ON")
            try:
                cycle.answers.append(ledger.write(store, notebook_id) or "written")
                try:
                    store.forget(open_notebook(store, run=f"ro-{ledger.serial}"), T0)
                    cycle.answers.append("forgot")
                except OhError as exc:
                    cycle.answers.append(exc.code)
                if not store.records(notebook_id):
                    cycle.answers.append("reads failed")
            finally:
                conn.execute("PRAGMA query_only=OFF")
        cycle.recovered = ledger.write(store, notebook_id, size=100) is None
        ledger.check(target, cycle)
        done.append(cycle)
    store.close()
    return done


# -- locked ---------------------------------------------------------------------------------------


def hold_lock(path: str, seconds: float) -> None:
    """A child process: hold the write lock for ``seconds``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(seconds)
    conn.execute("ROLLBACK")
    conn.close()


def locked(directory: Path, cycles: int, seed: int) -> list[Cycle]:
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    target = Target.libsql(directory)
    ledger = Ledger()
    store = target.open(busy_wait=0.2)
    notebook_id = open_notebook(store, run="locked")
    ledger.write(store, notebook_id)
    done = []
    for _ in range(cycles):
        in_process = rng.random() < 0.5
        cycle = Cycle("locked (this process)" if in_process else "locked (another process)")
        holder: Any = None
        child: subprocess.Popen[str] | None = None
        if in_process:
            holder = sqlite3.connect(target.location, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
        else:
            child = subprocess.Popen(
                script_command("io_faults.py", "--hold-lock", target.location, "30"),
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            child.stdout.readline()
        try:
            cycle.answers.append(ledger.write(store, notebook_id) or "written")
            if rng.random() < 0.3:
                try:
                    store.forget(notebook_id, T0)
                    cycle.answers.append("forgot")
                except OhError as exc:
                    cycle.answers.append(exc.code)
            try:
                store.records(notebook_id)
            except OhError as exc:
                cycle.answers.append(f"reads: {exc.code}")
        finally:
            if holder is not None:
                holder.execute("ROLLBACK")
                holder.close()
            if child is not None:
                child.kill()
                child.wait()
        cycle.recovered = ledger.write(store, notebook_id, size=100) is None
        ledger.check(target, cycle)
        done.append(cycle)
    store.close()
    return done


# -- PostgreSQL: the server goes away -------------------------------------------------------------


def server_restarts(target: Target, cluster: Any, cycles: int) -> list[Cycle]:
    ledger = Ledger()
    store = target.open(max_size=2, timeout=3.0)
    notebook_id = open_notebook(store, run="restarts")
    ledger.write(store, notebook_id)
    pg_ctl = str(cluster.bindir / "pg_ctl")
    done = []
    for _ in range(cycles):
        cycle = Cycle("PostgreSQL stopped")
        stop = [pg_ctl, "--pgdata", str(cluster.data), "--mode", "immediate", "stop"]
        subprocess.run(cluster._command(*stop), capture_output=True, check=True)
        try:
            cycle.answers.append(ledger.write(store, notebook_id) or "written")
        finally:
            start = [pg_ctl, "--pgdata", str(cluster.data), "--log"]
            start += [str(cluster.directory / "server.log"), "--wait", "start"]
            subprocess.run(cluster._command(*start), capture_output=True, check=True)
        deadline = time.monotonic() + 30
        cycle.recovered = ledger.write(store, notebook_id, size=100) is None
        while not cycle.recovered and time.monotonic() < deadline:
            time.sleep(0.2)  # the pool notices the dead connections and opens new ones
            cycle.recovered = ledger.write(store, notebook_id, size=100) is None
        ledger.check(target, cycle)
        done.append(cycle)
    store.close()
    return done


# -- all together ---------------------------------------------------------------------------------


def summarize(cycles: list[Cycle], backend: str, extra: dict[str, Any]) -> dict[str, Any]:
    faults = len(cycles)
    unavailable = sum(1 for c in cycles if c.answers and set(c.answers) <= {"storage_unavailable"})
    wrong = [
        c.to_json()
        for c in cycles
        if not c.answers or set(c.answers) - {"storage_unavailable"} or not c.sound
    ]
    corrupt = sum(1 for c in cycles if not c.sound)
    lost = sum(c.lost for c in cycles)
    misreported = sum(c.misreported_forgets for c in cycles)
    recovered = sum(1 for c in cycles if c.recovered)
    by_fault: dict[str, str] = {}
    for name in sorted({c.fault for c in cycles}):
        mine = [c for c in cycles if c.fault == name]
        good = sum(1 for c in mine if set(c.answers) == {"storage_unavailable"})
        by_fault[name] = f"{good}/{len(mine)} storage_unavailable"
    return {
        "suite": "io_faults",
        "backend": backend,
        **extra,
        "faults": faults,
        "answered_storage_unavailable": unavailable,
        "corrupted": corrupt,
        "lost_acknowledged_writes": lost,
        "recovered": recovered,
        "forgets_applied_but_answered_unavailable": misreported,
        "by_fault": by_fault,
        "other_answers": wrong[:5],
        "figure": (
            f"storage_unavailable: {unavailable}/{faults}; corrupted: {corrupt};"
            f" lost writes: {lost}; recovered: {recovered}/{faults};"
            f" forgets applied but answered unavailable: {misreported}"
        ),
        "ok": unavailable == faults
        and corrupt == 0
        and lost == 0
        and recovered == faults
        and misreported == 0,
    }


def run(directory: Path, cycles: int, seed: int) -> dict[str, Any]:
    results: list[Cycle] = []
    full = directory / "full"
    with small_filesystem(full) as mounted:
        if mounted:
            results += disk_full(full, cycles, seed, "tmpfs")
        else:
            child = subprocess.run(
                script_command(
                    "io_faults.py", "--disk-full-rlimit", str(full), str(cycles), str(seed)
                ),
                capture_output=True,
                text=True,
                check=True,
            )
            for value in json.loads(child.stdout):
                cycle = Cycle(value["fault"])
                vars(cycle).update(value)
                results.append(cycle)
    ro = directory / "ro"
    with small_filesystem(ro) as ro_mounted:
        results += read_only(ro, cycles, seed, ro_mounted)
    results += locked(directory / "locked", cycles, seed)
    mode = "tmpfs" if mounted else "RLIMIT_FSIZE"
    return summarize(results, "libsql", {"seed": seed, "disk_full_by": mode})


def run_postgres(cycles: int, seed: int) -> dict[str, Any]:
    from oh.testing.postgres_cluster import PostgresCluster, roles_bootstrap

    # The pool logs every reconnection attempt while the server is down; that is the point.
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)

    cluster = PostgresCluster().start()
    try:
        cluster.execute(roles_bootstrap())
        with postgres_target(cluster) as target:
            results = server_restarts(target, cluster, cycles)
    finally:
        cluster.stop()
    return summarize(results, "postgres", {"seed": seed})


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--hold-lock":
        hold_lock(sys.argv[2], float(sys.argv[3]))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--disk-full-rlimit":
        directory, cycles, seed = Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
        directory.mkdir(parents=True, exist_ok=True)
        print(json.dumps([c.to_json() for c in disk_full(directory, cycles, seed, "rlimit")]))
        return 0
    parser = common_arguments(__doc__)
    parser.add_argument("--cycles", type=int, default=100, help="faults of each kind")
    parser.add_argument("--postgres", action="store_true", help="stop and start a PostgreSQL")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.postgres:
        summary = run_postgres(args.cycles, seed)
    else:
        with scratch("oh-io-", args.keep) as tmp:
            summary = run(tmp, args.cycles, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
