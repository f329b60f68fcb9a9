"""Oh beside raw SQLite and other agent-memory stores, measured in one run (issue 34).

    python bench/bench_peers.py                   # 1,000, 10,000 and 100,000 notes
    python bench/bench_peers.py --sizes 1000      # one size
    python bench/bench_peers.py --quick           # a smoke run of a few seconds
    python bench/bench_peers.py --json

Every store runs on SQLite in WAL mode with ``synchronous=FULL`` (an acknowledged write survives
power loss), in a fresh directory on the same disk, and holds the same notes: a name and about
170 characters of text. Oh is the default store as ``oh serve`` opens it, sealed, called through
its tools in process (``Tools.call``, as every transport calls them). For each size:

- ``writes/s``: single notes written one durable transaction each (Oh: a ``remember`` of one
  change; raw: ``BEGIN IMMEDIATE; INSERT; COMMIT``);
- ``get p50``: each of 2,000 notes read once, from a store reopened after it was filled, so no
  cache of the store's own holds them (Oh: the ``read`` tool; raw: a point read of the row);
- ``batch/s``: notes per second written 64 to a call in one transaction;
- ``bytes/write``: what a single write hands to ``write()`` (``wchar`` of ``/proc/self/io``),
  the WAL frames included.

Each figure is the median of ``--reps`` runs (3), each in a fresh directory. Oh is measured twice:
sealed (the default) and without keys, which shows what sealing costs in the same run.

The peers are measured where their packages are installed (they are not Oh's dependencies):
``pip install langgraph-checkpoint-sqlite eventsourcing`` into the venv that runs this script.
LangGraph's ``SqliteStore`` is given a connection with the settings above; the ``eventsourcing``
library's SQLite recorder sets WAL itself and keeps SQLite's default ``synchronous=FULL``. Mem0 is
not measured here: it needs an embedding model or service even with inference off, and nothing
in this project's runs may download one.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TEXT = "Survey of reef recovery after bleaching; methods section missing, check figure 3. " * 2
BATCH = 64


def name_of(i: int) -> str:
    return f"note:n{i:07d}"


def written_bytes() -> int:
    """Bytes this process has handed to ``write()`` so far (``wchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar in /proc/self/io")  # pragma: no cover


class Store:
    """One store under test: filled in batches, then written and read one note at a time."""

    label = ""

    def open(self, directory: Path) -> None: ...
    def reopen(self) -> None: ...
    def write_one(self, i: int) -> None: ...
    def write_batch(self, first: int) -> None: ...
    def get(self, i: int) -> None: ...
    def close(self) -> None: ...


class RawSqlite(Store):
    """The baseline: one table, one statement a write, through the standard library's driver."""

    label = "raw SQLite"

    def open(self, directory: Path) -> None:
        self.path = directory / "raw.db"
        self.conn = self.connect()
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("CREATE TABLE notes (name TEXT PRIMARY KEY, content TEXT NOT NULL)")

    def connect(self) -> Any:
        import sqlite3

        return sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)

    def reopen(self) -> None:
        self.conn.close()
        self.conn = self.connect()
        self.conn.execute("PRAGMA synchronous=FULL")

    def _content(self, i: int) -> tuple[str, str]:
        return name_of(i), json.dumps({"name": name_of(i), "text": TEXT})

    def write_one(self, i: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO notes VALUES (?, ?)", self._content(i))
        self.conn.execute("COMMIT")

    def write_batch(self, first: int) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            "INSERT INTO notes VALUES (?, ?)", [self._content(i) for i in range(first, first + 64)]
        )
        self.conn.execute("COMMIT")

    def get(self, i: int) -> None:
        row = self.conn.execute("SELECT content FROM notes WHERE name = ?", (name_of(i),))
        assert row.fetchone() is not None

    def close(self) -> None:
        self.conn.close()


class Oh(Store):
    """Oh's default embedded store, sealed, through its tools."""

    label = "Oh"
    sealed = True

    def open(self, directory: Path) -> None:
        self.directory = directory
        self._build()
        notebook = self.notebooks.open("owner", "doc", "peers")
        from oh.tools import Caller

        self.caller = Caller(notebook.id, "agent:bench", "agent:peers")
        self.version = notebook.version

    def _build(self) -> None:
        from oh.keys import Keyring, MasterKeys
        from oh.services.notebooks import Notebooks
        from oh.storage.sqlite.keys import SqliteKeyStore
        from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
        from oh.storage.sqlite.notebooks import SqliteMemoryStore
        from oh.tools import Tools

        keyring = None
        if self.sealed:
            if not hasattr(self, "master"):
                from oh.keys import MasterKey

                self.master = MasterKey.generate()
            keyring = Keyring(MasterKeys(self.master), SqliteKeyStore(self.directory / "keys.db"))
        self.memory = SqliteMemoryStore(self.directory / "memory.db", keyring=keyring)
        self.knowledge = SqliteKnowledgeStore(self.directory / "knowledge.db")
        self.notebooks = Notebooks(self.memory, knowledge=self.knowledge)
        self.tools = Tools(self.memory, self.knowledge, b"x" * 32)

    def reopen(self) -> None:
        from oh.core import records

        self.close()
        records._VERIFIED.clear()  # what this process verified before: a new process has none
        self._build()

    def _remember(self, first: int, count: int) -> None:
        changes = [
            {"op": "add", "record": {"name": name_of(i), "text": TEXT}}
            for i in range(first, first + count)
        ]
        answer = self.tools.call(
            self.caller,
            "remember",
            {"based_on": self.version, "request_id": f"r{first}", "changes": changes},
        )
        assert answer.get("status") == "applied", answer
        self.version = answer["version"]

    def write_one(self, i: int) -> None:
        self._remember(i, 1)

    def write_batch(self, first: int) -> None:
        self._remember(first, BATCH)

    def get(self, i: int) -> None:
        answer = self.tools.call(self.caller, "read", {"name": name_of(i)})
        assert "digest" in answer, answer

    def close(self) -> None:
        self.memory.close()
        self.knowledge.close()


class OhUnsealed(Oh):
    """The same store without keys (``OH_SEAL=off``): what sealing costs, in this run."""

    label = "Oh, unsealed"
    sealed = False


class LangGraph(Store):
    """LangGraph's ``SqliteStore`` (``langgraph-checkpoint-sqlite``)."""

    label = "LangGraph SqliteStore"

    def open(self, directory: Path) -> None:
        self.path = directory / "langgraph.db"
        self._connect()

    def _connect(self) -> None:
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.store = SqliteStore(self.conn)
        self.store.setup()  # its migrations: the tables once, then nothing

    def reopen(self) -> None:
        self.conn.close()
        self._connect()

    def write_one(self, i: int) -> None:
        self.store.put(("notes",), name_of(i), {"text": TEXT})

    def write_batch(self, first: int) -> None:
        from langgraph.store.base import PutOp

        self.store.batch(
            [PutOp(("notes",), name_of(i), {"text": TEXT}) for i in range(first, first + BATCH)]
        )

    def get(self, i: int) -> None:
        assert self.store.get(("notes",), name_of(i)) is not None

    def close(self) -> None:
        self.conn.close()


class EventSourcing(Store):
    """The ``eventsourcing`` library: one aggregate a note, one event each, on its SQLite
    recorder."""

    label = "eventsourcing"

    note: Any = None  # the aggregate class, made once: the library registers it by its name

    def open(self, directory: Path) -> None:
        from eventsourcing.application import Application
        from eventsourcing.domain import Aggregate

        if EventSourcing.note is None:

            class Note(Aggregate):
                def __init__(self, name: str, text: str) -> None:
                    self.name = name
                    self.text = text

            EventSourcing.note = Note
        self.env = {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": str(directory / "events.db"),
        }
        self.application = Application
        self.app = Application(env=self.env)
        self.ids: dict[int, Any] = {}

    def reopen(self) -> None:
        self.app.close()
        self.app = self.application(env=self.env)

    def _note(self, i: int) -> Any:
        note = self.note(name_of(i), TEXT)
        self.ids[i] = note.id
        return note

    def write_one(self, i: int) -> None:
        self.app.save(self._note(i))

    def write_batch(self, first: int) -> None:
        self.app.save(*[self._note(i) for i in range(first, first + BATCH)])

    def get(self, i: int) -> None:
        assert self.app.repository.get(self.ids[i]).name == name_of(i)

    def close(self) -> None:
        self.app.close()


def installed(store: type[Store]) -> bool:
    modules = {LangGraph: "langgraph.store.sqlite", EventSourcing: "eventsourcing.sqlite"}
    module = modules.get(store)
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def measure(
    kind: type[Store], base: Path | None, size: int, counts: tuple[int, int, int], reps: int
) -> dict[str, Any]:
    """Each figure of ``kind`` at ``size`` notes: the median of ``reps`` runs, each in a fresh
    directory (a shared machine's noise moves single runs by a third)."""
    runs = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory(prefix="oh-bench-peers-", dir=base) as tmp:
            runs.append(measure_once(kind(), Path(tmp), size, *counts))
    return {
        key: statistics.median(run[key] for run in runs) if key not in ("store", "notes") else value
        for key, value in runs[0].items()
    }


def measure_once(
    store: Store, directory: Path, size: int, writes: int, reads: int, batches: int
) -> dict[str, Any]:
    store.open(directory)
    for first in range(0, size, BATCH):
        if first + BATCH <= size:
            store.write_batch(first)
        else:
            for i in range(first, size):
                store.write_one(i)
    next_i = size

    before, start = written_bytes(), time.perf_counter()
    for i in range(next_i, next_i + writes):
        store.write_one(i)
    elapsed = time.perf_counter() - start
    bytes_per_write = (written_bytes() - before) / writes
    next_i += writes

    start = time.perf_counter()
    for _ in range(batches):
        store.write_batch(next_i)
        next_i += BATCH
    batch_rate = batches * BATCH / (time.perf_counter() - start)

    store.reopen()
    samples = []
    for i in random.Random(size).sample(range(size), min(reads, size)):
        began = time.perf_counter_ns()
        store.get(i)
        samples.append(time.perf_counter_ns() - began)
    store.close()
    return {
        "store": store.label,
        "notes": size,
        "writes_per_s": writes / elapsed,
        "get_p50_us": statistics.median(samples) / 1000,
        "batch_notes_per_s": batch_rate,
        "bytes_per_write": bytes_per_write,
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = []
    for size in sorted({r["notes"] for r in results}):
        rows = [r for r in results if r["notes"] == size]
        raw = next(r for r in rows if r["store"] == RawSqlite.label)
        lines.append(f"\nat {size:,} notes")
        lines.append("| | " + " | ".join(r["store"] for r in rows) + " |")
        lines.append("|---|" + "--:|" * len(rows))
        for key, what, form in (
            ("writes_per_s", "durable single writes/s", "{:,.0f}"),
            ("get_p50_us", "get p50 µs (each note read once)", "{:.1f}"),
            ("batch_notes_per_s", f"batch of {BATCH}, notes/s", "{:,.0f}"),
            ("bytes_per_write", "bytes written per single write", "{:,.0f}"),
        ):
            cells = [form.format(r[key]) for r in rows]
            lines.append(f"| {what} | " + " | ".join(cells) + " |")
        oh = next((r for r in rows if r["store"] == Oh.label), None)
        if oh is not None:
            ratios = (
                oh["writes_per_s"] / raw["writes_per_s"],
                oh["get_p50_us"] / raw["get_p50_us"],
                oh["batch_notes_per_s"] / raw["batch_notes_per_s"],
                oh["bytes_per_write"] / raw["bytes_per_write"],
            )
            lines.append(
                f"\nOh against raw SQLite at {size:,}: writes {ratios[0]:.2f}× (target ≥ 0.6×),"
                f" get {ratios[1]:.1f}× the time (target ≤ 4×), batch {ratios[2]:.2f}×"
                f" (target ≥ 0.4×), bytes {ratios[3]:.1f}× (target ≤ 2×)"
            )
            langgraph = next((r for r in rows if r["store"] == LangGraph.label), None)
            if langgraph is not None:
                lines.append(
                    f"Oh against LangGraph: get p50 {oh['get_p50_us']:.1f} vs"
                    f" {langgraph['get_p50_us']:.1f} µs, batch {oh['batch_notes_per_s']:,.0f} vs"
                    f" {langgraph['batch_notes_per_s']:,.0f} notes/s"
                )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1,000 notes, few calls")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--sizes", type=int, nargs="+", help="notes per store")
    parser.add_argument("--dir", default=None, help="where the stores are made (a temp dir)")
    parser.add_argument("--reps", type=int, default=3, help="runs per figure; the median is kept")
    args = parser.parse_args(argv)
    sizes = args.sizes or ([1000] if args.quick else [1000, 10_000, 100_000])
    writes, reads, batches = (100, 300, 5) if args.quick else (1000, 2000, 30)
    stores: list[type[Store]] = [RawSqlite, Oh, OhUnsealed, LangGraph, EventSourcing]
    missing = [s.label for s in stores if not installed(s)]
    results = []
    for size in sizes:
        for kind in stores:
            if kind.label in missing:
                continue
            print(f"measuring {kind.label} at {size:,} notes ...", file=sys.stderr)
            base = None if args.dir is None else Path(args.dir)
            reps = 1 if args.quick else args.reps
            results.append(measure(kind, base, size, (writes, reads, batches), reps))
    if args.json:
        print(json.dumps({"results": results, "not_installed": missing}, indent=2))
        return 0
    print(table(results))
    if missing:
        print(f"\nnot installed, not measured: {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
