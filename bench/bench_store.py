"""Storage benchmark: Oh's libSQL memory store against raw SQLite, measured in the same run.

Everything runs on one disk (a fresh temporary directory, by default under the current
directory; ``--dir`` picks another parent) so that Oh and the baseline see the same fsync cost.
The baseline is the driver Oh runs on (``OH_EMBEDDED_DRIVER``: the standard library's ``sqlite3``
by default, or ``libsql``) on a plain table
``(id INTEGER PRIMARY KEY, name TEXT, content TEXT)`` with ``journal_mode=WAL``, the same
``synchronous`` level as Oh, and one ``BEGIN IMMEDIATE ... COMMIT`` per write.

Figures (each a median of several repetitions after a warm-up, unless noted):

1. durable single-change ``remember`` calls/s (``synchronous=FULL``, one fsync per call)
   vs. raw single-row transactions/s. Target: at least 0.8x.
2. 64-change ``remember`` notes/s vs. raw 64-row transactions, rows/s. Target: at least 0.5x.
3. entries/s of ``oh.verify.verify_notebook`` and of ``oh.verify.replay(store.log(...))`` over a
   notebook of single-change entries (plus reading the log alone, for context), vs. a raw scan
   of as many rows. Target: at least 200,000 entries/s.
4. peak RSS (MiB) of a fresh subprocess that builds a 100,000-record notebook with 64-change
   ``remember`` calls, and of one that opens it and verifies it, vs. subprocesses doing the
   raw equivalent. No target; the bare interpreter's RSS is printed for reference. (Peak RSS
   is ``VmHWM`` on Linux: there ``ru_maxrss`` inherits the parent's peak across ``execve``.)

It also prints the disk's fsync floor and Oh's extra microseconds per call over raw, which
say how the write ratios would move on a disk with slower (or faster) fsync, and the floor of
figures 1 and 2 for Oh's schema: the exact statements ``remember`` ran (recorded once), replayed
on a fresh database with none of Oh's Python, timed like the other two. A second floor replays
them without the statements on the current-record table (the log, its keys and the notebook's
head only): how much of each write the derived table is, and the most a write could approach
if that table were brought up to date outside the acknowledged transaction (which is not free:
bench/README.md, "What remains").

The ``remember`` figures include ``parse_changes`` (a real call validates its payload). No
figure is asserted on; this is a measurement, not a test.

Run from the repository root::

    python bench/bench_store.py            # full sizes, about 30 s on 2 cores
    python bench/bench_store.py --quick    # smoke run, a few seconds
    python bench/bench_store.py --json     # machine-readable output
    python bench/bench_store.py --dir /mnt/ssd --reps 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oh.config import embedded_driver
from oh.core.changes import Applied, parse_changes
from oh.core.notebook import new_notebook_id
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore, Synchronous, open_driver
from oh.verify import replay, verify_notebook

# -- sizes ----------------------------------------------------------------------------------

# The embedded driver Oh and the raw baseline both use (OH_EMBEDDED_DRIVER, as for oh itself).
DRIVER = embedded_driver(os.environ)


@dataclass(frozen=True, slots=True)
class Sizes:
    reps: int  # timed repetitions per figure (the median is reported)
    warmup: int  # untimed write calls before each timed repetition
    single_calls: int  # single-change remember calls per repetition
    batch_calls: int  # 64-change remember calls per repetition
    log_entries: int  # single-change entries in the notebook that is verified/replayed
    rss_records: int  # records in the notebook built for the RSS figures


FULL = Sizes(
    reps=5, warmup=50, single_calls=2000, batch_calls=150, log_entries=50_000, rss_records=100_000
)
QUICK = Sizes(
    reps=3, warmup=10, single_calls=200, batch_calls=15, log_entries=2000, rss_records=5000
)

BATCH = 64  # changes per call in figure 2 and in the RSS build (SPEC §2 maximum)
SCAN_BATCH = 5000  # rows per page in the raw scan, as store.log pages its reads
VERIFY_TARGET = 200_000.0

# -- realistic note texts -------------------------------------------------------------------

_SUBJECTS = (
    "The 2016 reef survey by Hughes et al.",
    "The AIMS long-term monitoring dataset",
    "Table 3 of the Great Barrier Reef outlook report",
    "The bleaching-threshold figure in the NOAA Coral Reef Watch summary",
    "The Scripps recovery-rate preprint",
    "The Lizard Island transect data",
    "Appendix B of the 2019 recovery meta-analysis",
    "The interview notes from the field station",
)
_CLAIMS = (
    "stops in 2014, so it cannot speak to the 2016-2017 bleaching events",
    "reports a 1.2 degree heating-week threshold, not the 4 DHW used elsewhere",
    "has no methods section; sampling depth and transect length are unknown",
    "gives recovery times of 10-15 years for branching Acropora on mid-shelf reefs",
    "uses a different coral-cover definition (live hard coral only)",
    "cites a second paper for the same figure but the numbers disagree by 8 points",
    "covers only inshore reefs north of Cairns",
    "was retracted in part; the corrected table changes the recovery estimate",
)
_ACTIONS = (
    "Ruled out for the trend analysis.",
    "Check against the original paper before citing.",
    "Ask the user whether inshore-only data is acceptable.",
    "Keep as a lead; needs a second source.",
    "Use only with an explicit caveat in the summary.",
    "Compare with the 2022 update when it loads.",
)


def note_texts(count: int, seed: int = 2016) -> list[str]:
    """``count`` research-note texts of roughly 100-200 characters, deterministic."""
    rng = random.Random(seed)
    texts = []
    for i in range(count):
        text = f"{rng.choice(_SUBJECTS)} {rng.choice(_CLAIMS)}. {rng.choice(_ACTIONS)}"
        if len(text) < 120:
            text += f" (seen on page {rng.randint(2, 240)}, item {i})"
        texts.append(text[:200])
    return texts


def note_name(i: int) -> str:
    return f"note:reef-{i:07d}"


def add_payload(first: int, texts: list[str]) -> list[dict[str, Any]]:
    """The ``changes`` argument of one remember call, as a client would send it."""
    return [
        {"op": "add", "record": {"name": note_name(first + j), "text": text}}
        for j, text in enumerate(texts)
    ]


# -- Oh and raw stores ------------------------------------------------------------------------

AUTHOR = "agent:bench"


class OhNotebook:
    """One open notebook in a ``SqliteMemoryStore``, tracking its version like an agent does."""

    def __init__(
        self, path: Path, synchronous: Synchronous, notebook_id: str = "", *, sealed: bool = False
    ) -> None:
        keyring = None
        if sealed:  # its content sealed (docs/keys.md), the key store in a directory beside it
            keys = SqliteKeyStore(path.parent / "keys" / "keys.db")
            keyring = Keyring(MasterKeys(MasterKey.generate()), keys)
        self.store = SqliteMemoryStore(
            path, synchronous=synchronous, driver=DRIVER, keyring=keyring
        )
        self.id = notebook_id or new_notebook_id()
        now = datetime.now(UTC)
        self.store.create_notebook(
            self.id,
            owner="owner:bench",
            document="doc:bench",
            run=f"run:{self.id}",
            started_at=now,
            forgets_at=now + timedelta(days=3650),
        )
        self.store.mark_open(self.id, None)
        self.version = 0
        self.calls = 0

    def remember(self, payload: list[dict[str, Any]]) -> None:
        """One full remember call: validate the payload, then the durable write."""
        self.calls += 1
        result = self.store.remember(
            self.id,
            based_on=self.version,
            request_id=f"req-{self.calls}",
            changes=parse_changes(payload),
            author=AUTHOR,
            now=datetime.now(UTC),
        )
        if not isinstance(result, Applied):
            raise RuntimeError(f"remember was refused: {result.to_json()}")
        self.version = result.version

    def close(self) -> None:
        self.store.close()


class RawTable:
    """The baseline: Oh's driver on a plain table, one transaction per write."""

    def __init__(self, path: Path, synchronous: Synchronous) -> None:
        self.conn = open_driver(path, DRIVER)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, name TEXT, content TEXT)"
        )

    def insert(self, rows: list[tuple[str, str]]) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        if len(rows) == 1:
            conn.execute("INSERT INTO notes (name, content) VALUES (?, ?)", rows[0])
        else:
            conn.executemany("INSERT INTO notes (name, content) VALUES (?, ?)", rows)
        conn.execute("COMMIT")

    def scan(self) -> int:
        """Read every row back in pages of ``SCAN_BATCH``, as ``store.log`` pages the log."""
        conn = self.conn
        seen = 0
        first = 1
        while True:
            rows = conn.execute(
                "SELECT id, name, content FROM notes WHERE id BETWEEN ? AND ? ORDER BY id",
                (first, first + SCAN_BATCH - 1),
            ).fetchall()
            if not rows:
                return seen
            seen += len(rows)
            first += SCAN_BATCH

    def close(self) -> None:
        self.conn.close()


class StatementLog:
    """Wraps a store's connection and keeps every statement it runs, with its parameters.

    Replaying what ``remember`` sent, on a fresh database with the same schema, costs what the
    schema, the driver and the disk cost with none of Oh's Python: the floor of figures 1 and 2
    for this schema on this machine.
    """

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements.append((sql, params))
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> Any:
        rows = list(rows)
        self.statements.extend((sql, row) for row in rows)
        return self.conn.executemany(sql, rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def record_statements(
    parent: Path, payloads: list[list[dict[str, Any]]]
) -> tuple[str, list[list[tuple[str, Any]]]]:
    """The notebook id and, per remember call, the statements it ran (on a scratch file)."""
    with scratch(parent, "record") as where:
        notebook = OhNotebook(where / "oh.db", "NORMAL")
        log = StatementLog(notebook.store._conn)
        notebook.store._conn = log
        calls = []
        for payload in payloads:
            log.statements = []
            notebook.remember(payload)
            calls.append(log.statements)
        notebook.close()
    return notebook.id, calls


def without_current_records(calls: list[list[tuple[str, Any]]]) -> list[list[tuple[str, Any]]]:
    """The recorded calls without their statements on the derived current-record table."""
    derived = ("INSERT INTO records", "UPDATE records", "DELETE FROM records")
    return [[(sql, p) for sql, p in call if not sql.startswith(derived)] for call in calls]


def replay_statements(conn: Any, calls: list[list[tuple[str, Any]]]) -> None:
    for statements in calls:
        for sql, params in statements:
            cursor = conn.execute(sql, params)
            if sql.startswith("SELECT"):
                cursor.fetchall()


# -- timing helpers --------------------------------------------------------------------------


@contextmanager
def scratch(parent: Path, name: str) -> Iterator[Path]:
    """A fresh sub-directory that is removed afterwards (database, WAL and SHM files)."""
    path = parent / name
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def fsync_micros(parent: Path, count: int) -> float:
    """Median microseconds of a 4 KiB append plus ``fdatasync``: the disk's durable-commit floor.

    A WAL commit at ``synchronous=FULL`` costs about this much on top of its CPU work, so it
    says how much of each write figure is the disk and how much is code.
    """
    sync = getattr(os, "fdatasync", os.fsync)
    page = b"\0" * 4096
    samples = []
    with scratch(parent, "fsync") as where:
        fd = os.open(where / "probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for _ in range(count + 10):
                start = time.perf_counter()
                os.write(fd, page)
                sync(fd)
                samples.append(time.perf_counter() - start)
        finally:
            os.close(fd)
    return statistics.median(samples[10:]) * 1e6


def write_rates(
    parent: Path, sizes: Sizes, per_call: int, calls: int, synchronous: Synchronous
) -> tuple[float, float, float, float]:
    """Median rows/s of Oh, raw, Oh's own statements replayed without Oh's Python (the
    floor), and those statements without the ones on the current-record table (the log floor),
    for ``calls`` writes of ``per_call`` rows each.

    Repetitions alternate raw, Oh and the two replays, each on a fresh file after
    ``sizes.warmup`` untimed calls, so drift in the disk or the machine affects all alike.
    """
    warm_calls = sizes.warmup
    texts = note_texts((warm_calls + calls) * per_call)
    payloads = [
        add_payload(i * per_call, texts[i * per_call : (i + 1) * per_call])
        for i in range(warm_calls + calls)
    ]
    raw_rows = [
        [(change["record"]["name"], change["record"]["text"]) for change in payload]
        for payload in payloads
    ]
    notebook_id, statements = record_statements(parent, payloads)
    replays = {"floor": statements, "log": without_current_records(statements)}
    oh_rates, raw_rates = [], []
    floor_rates: dict[str, list[float]] = {kind: [] for kind in replays}
    for rep in range(sizes.reps):
        with scratch(parent, f"raw-{per_call}-{rep}") as where:
            raw = RawTable(where / "raw.db", synchronous)
            for rows in raw_rows[:warm_calls]:
                raw.insert(rows)

            def run_raw(raw: RawTable = raw) -> None:
                for rows in raw_rows[warm_calls:]:
                    raw.insert(rows)

            raw_rates.append(calls * per_call / timed(run_raw))
            raw.close()
        with scratch(parent, f"oh-{per_call}-{rep}") as where:
            notebook = OhNotebook(where / "oh.db", synchronous)
            for payload in payloads[:warm_calls]:
                notebook.remember(payload)

            def run_oh(notebook: OhNotebook = notebook) -> None:
                for payload in payloads[warm_calls:]:
                    notebook.remember(payload)

            oh_rates.append(calls * per_call / timed(run_oh))
            notebook.close()
        for kind, replayed in replays.items():
            with scratch(parent, f"{kind}-{per_call}-{rep}") as where:
                notebook = OhNotebook(where / "oh.db", synchronous, notebook_id)
                conn = notebook.store._conn
                replay_statements(conn, replayed[:warm_calls])

                def run_floor(conn: Any = conn, replayed: Any = replayed) -> None:
                    replay_statements(conn, replayed[warm_calls:])

                floor_rates[kind].append(calls * per_call / timed(run_floor))
                notebook.close()
    return (
        statistics.median(oh_rates),
        statistics.median(raw_rates),
        statistics.median(floor_rates["floor"]),
        statistics.median(floor_rates["log"]),
    )


def sealed_rates(parent: Path, sizes: Sizes, calls: int) -> tuple[float, float]:
    """Median calls/s of single-change durable remember on a sealed notebook and on an unsealed
    one, repetitions alternating, each on a fresh file after the warm-up."""
    warm_calls = sizes.warmup
    texts = note_texts(warm_calls + calls)
    payloads = [add_payload(i, texts[i : i + 1]) for i in range(warm_calls + calls)]
    rates: dict[bool, list[float]] = {True: [], False: []}
    for rep in range(sizes.reps):
        for sealed in (False, True):
            with scratch(parent, f"sealed-{sealed}-{rep}") as where:
                notebook = OhNotebook(where / "oh.db", "FULL", sealed=sealed)
                for payload in payloads[:warm_calls]:
                    notebook.remember(payload)

                def run(notebook: OhNotebook = notebook) -> None:
                    for payload in payloads[warm_calls:]:
                        notebook.remember(payload)

                rates[sealed].append(calls / timed(run))
                notebook.close()
    return statistics.median(rates[True]), statistics.median(rates[False])


def build_oh(path: Path, records: int, per_call: int, synchronous: Synchronous) -> OhNotebook:
    notebook = OhNotebook(path, synchronous)
    texts = note_texts(records)
    for first in range(0, records, per_call):
        notebook.remember(add_payload(first, texts[first : first + per_call]))
    return notebook


def build_raw(path: Path, records: int, per_call: int, synchronous: Synchronous) -> RawTable:
    raw = RawTable(path, synchronous)
    texts = note_texts(records)
    for first in range(0, records, per_call):
        raw.insert(
            [(note_name(first + j), t) for j, t in enumerate(texts[first : first + per_call])]
        )
    return raw


def read_rates(parent: Path, sizes: Sizes) -> dict[str, float]:
    """Entries/s of verify, replay and a bare log read over single-change entries; raw scan."""
    entries = sizes.log_entries
    with scratch(parent, "read") as where:
        # Building the notebook is not measured: NORMAL skips the per-commit fsync.
        notebook = build_oh(where / "oh.db", entries, 1, "NORMAL")
        raw = build_raw(where / "raw.db", entries, SCAN_BATCH, "NORMAL")
        store, nid = notebook.store, notebook.id

        def run_verify() -> None:
            report = verify_notebook(store, nid)
            if not report.ok or report.entries != entries:
                raise RuntimeError(f"verify failed: {report.to_json()}")

        def run_replay() -> None:
            if len(replay(store.log(nid))) != entries:
                raise RuntimeError("replay lost records")

        def run_log() -> None:
            if sum(1 for _ in store.log(nid)) != entries:
                raise RuntimeError("log lost entries")

        def run_scan() -> None:
            if raw.scan() != entries:
                raise RuntimeError("raw scan lost rows")

        actions = {"verify": run_verify, "replay": run_replay, "log": run_log, "scan": run_scan}
        samples: dict[str, list[float]] = {key: [] for key in actions}
        for action in actions.values():  # warm-up: page cache and code paths
            action()
        for _ in range(sizes.reps):
            for key, action in actions.items():
                samples[key].append(entries / timed(action))
        notebook.close()
        raw.close()
    return {key: statistics.median(values) for key, values in samples.items()}


# -- peak RSS in fresh subprocesses ----------------------------------------------------------


def peak_rss_mib() -> float:
    """This process's peak resident set size in MiB.

    On Linux ``ru_maxrss`` is not usable here: ``execve`` carries the parent's high-water mark
    into the child, so every child would report at least the parent's peak. ``VmHWM`` in
    ``/proc/self/status`` belongs to the current address space only. Elsewhere fall back to
    ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def child(task: str, path: Path, records: int) -> dict[str, Any]:
    """Run ``task`` in this (fresh) process and return its figures; see ``run_child``."""
    start = time.perf_counter()
    if task == "oh-build":
        build_oh(path, records, BATCH, "NORMAL").close()
    elif task == "raw-build":
        build_raw(path, records, BATCH, "NORMAL").close()
    elif task == "oh-verify":
        store = SqliteMemoryStore(path, synchronous="NORMAL", driver=DRIVER)
        (nid,) = store.notebook_ids()
        report = verify_notebook(store, nid)
        if not report.ok or report.records != records:
            raise RuntimeError(f"verify failed: {report.to_json()}")
        store.close()
    elif task == "raw-scan":
        raw = RawTable(path, "NORMAL")
        rows = raw.conn.execute("SELECT id, name, content FROM notes ORDER BY id").fetchall()
        if len(rows) != records:
            raise RuntimeError("raw scan lost rows")
        raw.close()
    elif task != "idle":
        raise ValueError(f"unknown child task {task!r}")
    return {"seconds": time.perf_counter() - start, "rss_mib": peak_rss_mib()}


def run_child(task: str, path: Path, records: int) -> dict[str, Any]:
    """Run one task in a fresh interpreter (this script with ``--child``) and parse its figures."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", task, str(path), str(records)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def rss_figures(parent: Path, sizes: Sizes) -> dict[str, dict[str, Any]]:
    records = sizes.rss_records
    with scratch(parent, "rss") as where:
        oh_path, raw_path = where / "oh.db", where / "raw.db"
        return {
            "idle": run_child("idle", where / "none", 0),
            "oh-build": run_child("oh-build", oh_path, records),
            "raw-build": run_child("raw-build", raw_path, records),
            "oh-verify": run_child("oh-verify", oh_path, records),
            "raw-scan": run_child("raw-scan", raw_path, records),
        }


# -- report ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    metric: str
    unit: str
    oh: float
    baseline: float
    baseline_is: str
    target: str  # human-readable target, "" when there is none
    met: bool | None  # None when there is no target

    @property
    def ratio(self) -> float:
        return self.oh / self.baseline if self.baseline else float("nan")


@dataclass(slots=True)
class Results:
    rows: list[Row]
    context: dict[str, float]  # figures that explain the rows: fsync floor, per-call overheads


def row(
    metric: str,
    unit: str,
    oh: float,
    baseline: float,
    baseline_is: str,
    *,
    min_ratio: float | None = None,
    min_value: float | None = None,
) -> Row:
    """A table row; the target is a minimum ratio to the baseline, a minimum value, or none."""
    if min_ratio is not None:
        return Row(
            metric,
            unit,
            oh,
            baseline,
            baseline_is,
            f">= {min_ratio:.2f}x",
            oh >= min_ratio * baseline,
        )
    if min_value is not None:
        return Row(
            metric, unit, oh, baseline, baseline_is, f">= {min_value:,.0f}/s", oh >= min_value
        )
    return Row(metric, unit, oh, baseline, baseline_is, "", None)


def measure(sizes: Sizes, parent: Path, progress: Callable[[str], None]) -> Results:
    rows: list[Row] = []
    context: dict[str, float] = {}

    progress("0/4 fsync floor of this disk")
    context["fsync_us"] = fsync_micros(parent, max(50, sizes.single_calls // 10))

    progress(f"1/4 single-change remember, {sizes.reps} x {sizes.single_calls} calls")
    oh, raw, floor, log_floor = write_rates(parent, sizes, 1, sizes.single_calls, "FULL")
    rows.append(
        row("remember, 1 change, sync=FULL", "calls/s", oh, raw, "raw 1-row txn/s", min_ratio=0.8)
    )
    context["single_oh_us_per_call"] = 1e6 / oh
    context["single_raw_us_per_call"] = 1e6 / raw
    context["single_floor_us_per_call"] = 1e6 / floor
    context["single_log_floor_us_per_call"] = 1e6 / log_floor

    progress(f"1b/4 single-change remember, sealed and not, {sizes.reps} x {sizes.single_calls}")
    sealed, unsealed = sealed_rates(parent, sizes, sizes.single_calls)
    rows.append(
        row(
            "remember, 1 change, FULL, sealed",
            "calls/s",
            sealed,
            unsealed,
            "unsealed calls/s",
            min_ratio=round(1 / 1.15, 2),
        )
    )

    progress(f"2/4 {BATCH}-change remember, {sizes.reps} x {sizes.batch_calls} calls")
    oh, raw, floor, log_floor = write_rates(parent, sizes, BATCH, sizes.batch_calls, "FULL")
    rows.append(
        row(
            f"remember, {BATCH} changes, sync=FULL",
            "notes/s",
            oh,
            raw,
            f"raw {BATCH}-row txn rows/s",
            min_ratio=0.5,
        )
    )
    context["batch_oh_us_per_call"] = 1e6 * BATCH / oh
    context["batch_raw_us_per_call"] = 1e6 * BATCH / raw
    context["batch_floor_us_per_call"] = 1e6 * BATCH / floor
    context["batch_log_floor_us_per_call"] = 1e6 * BATCH / log_floor

    progress(f"3/4 verify and replay over {sizes.log_entries:,} single-change entries")
    reads = read_rates(parent, sizes)
    scan = reads["scan"]
    rows += [
        row(
            "verify_notebook",
            "entries/s",
            reads["verify"],
            scan,
            "raw scan rows/s",
            min_value=VERIFY_TARGET,
        ),
        row(
            "replay(store.log)",
            "entries/s",
            reads["replay"],
            scan,
            "raw scan rows/s",
            min_value=VERIFY_TARGET,
        ),
        row("store.log read only (context)", "entries/s", reads["log"], scan, "raw scan rows/s"),
    ]

    progress(f"4/4 peak RSS in fresh subprocesses, {sizes.rss_records:,} records")
    rss = rss_figures(parent, sizes)
    n = sizes.rss_records
    rows += [
        row(
            f"peak RSS, build {n:,} records",
            "MiB",
            rss["oh-build"]["rss_mib"],
            rss["raw-build"]["rss_mib"],
            "raw build MiB",
        ),
        row(
            f"peak RSS, open + verify {n:,}",
            "MiB",
            rss["oh-verify"]["rss_mib"],
            rss["raw-scan"]["rss_mib"],
            "raw full scan MiB",
        ),
        row(
            "peak RSS, interpreter + imports only",
            "MiB",
            rss["idle"]["rss_mib"],
            rss["idle"]["rss_mib"],
            "same process",
        ),
        row(
            f"verify {n:,} records ({BATCH}/entry)",
            "records/s",
            n / rss["oh-verify"]["seconds"],
            n / rss["raw-scan"]["seconds"],
            "raw scan rows/s",
        ),
    ]
    return Results(rows, context)


def format_number(value: float, unit: str) -> str:
    return f"{value:,.1f}" if unit == "MiB" else f"{value:,.0f}"


def table(rows: list[Row]) -> str:
    header = ("metric", "unit", "oh", "baseline", "ratio", "target", "met")
    body = [
        (
            row.metric,
            row.unit,
            format_number(row.oh, row.unit),
            format_number(row.baseline, row.unit),
            f"{row.ratio:.2f}x",
            row.target or "-",
            "-" if row.met is None else ("yes" if row.met else "NO"),
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    right = {2, 3, 4}

    def fmt(line: tuple[str, ...]) -> str:
        cells = (
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(line)
        )
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(header), rule, *(fmt(line) for line in body)])


def notes(context: dict[str, float]) -> str:
    """What the write ratios are made of: the disk floor and Oh's extra time per call."""
    single = context["single_oh_us_per_call"] - context["single_raw_us_per_call"]
    batch = context["batch_oh_us_per_call"] - context["batch_raw_us_per_call"]
    single_best = context["single_raw_us_per_call"] / context["single_floor_us_per_call"]
    batch_best = context["batch_raw_us_per_call"] / context["batch_floor_us_per_call"]
    single_log = context["single_raw_us_per_call"] / context["single_log_floor_us_per_call"]
    batch_log = context["batch_raw_us_per_call"] / context["batch_log_floor_us_per_call"]
    return "\n".join(
        [
            f"fsync floor (4 KiB append + fdatasync, median): {context['fsync_us']:,.0f} us",
            f"per call, 1 change:  oh {context['single_oh_us_per_call']:,.0f} us,"
            f" raw {context['single_raw_us_per_call']:,.0f} us, oh extra {single:,.0f} us",
            f"per call, {BATCH} changes: oh {context['batch_oh_us_per_call']:,.0f} us,"
            f" raw {context['batch_raw_us_per_call']:,.0f} us, oh extra {batch:,.0f} us",
            "floor (oh's own statements replayed without its Python):"
            f" 1 change {context['single_floor_us_per_call']:,.0f} us"
            f" (best ratio {single_best:.2f}x), {BATCH} changes"
            f" {context['batch_floor_us_per_call']:,.0f} us (best ratio {batch_best:.2f}x)",
            "log floor (the same without the current-record table):"
            f" 1 change {context['single_log_floor_us_per_call']:,.0f} us"
            f" (best ratio {single_log:.2f}x), {BATCH} changes"
            f" {context['batch_log_floor_us_per_call']:,.0f} us (best ratio {batch_log:.2f}x)",
        ]
    )


def machine() -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--dir", type=Path, default=Path.cwd(), help="parent of the temporary directory (the disk)"
    )
    parser.add_argument("--reps", type=int, help="timed repetitions per figure")
    parser.add_argument("--single-calls", type=int, help="single-change calls per repetition")
    parser.add_argument("--batch-calls", type=int, help=f"{BATCH}-change calls per repetition")
    parser.add_argument("--log-entries", type=int, help="entries in the verified notebook")
    parser.add_argument("--rss-records", type=int, help="records in the RSS notebook")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        task, path, records = argv[1:4]
        print(json.dumps(child(task, Path(path), int(records))))
        return 0
    args = parse_args(argv)
    overrides = {
        key: getattr(args, key)
        for key in ("reps", "single_calls", "batch_calls", "log_entries", "rss_records")
        if getattr(args, key) is not None
    }
    sizes = replace(QUICK if args.quick else FULL, **overrides)

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    about = {**machine(), "dir": str(args.dir.resolve()), "sizes": asdict(sizes)}
    args.dir.mkdir(parents=True, exist_ok=True)
    parent = Path(tempfile.mkdtemp(prefix="oh-bench-", dir=args.dir))
    started = time.perf_counter()
    try:
        results = measure(sizes, parent, progress)
    finally:
        if args.keep:
            progress(f"kept {parent}")
        else:
            shutil.rmtree(parent, ignore_errors=True)
    about["seconds"] = round(time.perf_counter() - started, 1)
    if args.json:
        rows = [{**asdict(row), "ratio": row.ratio} for row in results.rows]
        print(json.dumps({"machine": about, "results": rows, "context": results.context}, indent=2))
    else:
        print(
            f"{about['date']}  python {about['python']}  {about['cpus']} cpus"
            f"  dir {about['dir']}  ({about['seconds']} s)"
        )
        print(table(results.rows))
        print(notes(results.context))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
