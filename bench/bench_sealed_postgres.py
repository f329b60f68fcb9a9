"""Sealed notebooks on PostgreSQL (docs/keys.md): ``remember`` and reads with a keyring against
the same calls without one, measured in the same run on one throwaway durable cluster
(``fsync=on``, ``synchronous_commit=on``), one client.

* remember: one single-change call per operation (the one-round-trip path, ``oh_remember``);
  sealed, the content is sealed with the notebook's data key (AES-256-GCM-SIV) first.
* read: ``read_record`` of one record (what the ``read`` tool asks the store), and
  ``records`` of a notebook of 200 records (what a query reads); sealed, each content is opened.
* seal, open: one record's content sealed and opened in memory, the CPU cost alone (a figure a
  busy machine moves far less than the round trips above).

Sealed and plain alternate call by call (each call timed on its own), so drift on the machine
and the disk's fsync touch both alike; the figure is calls over the summed time of each kind's
calls, the median over the rounds. ``--no-fsync`` measures on a cluster without fsync, which
leaves the cost the seal adds to the CPU. No figure is asserted on. Run from the repository
root::

    python bench/bench_sealed_postgres.py            # about 40 s
    python bench/bench_sealed_postgres.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oh.core.changes import parse_changes
from oh.core.notebook import new_notebook_id
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.postgres_cluster import PostgresCluster, fresh_schema

TEXT = "dataset ends 2014: ruled out for the recovery question " * 2
RECORDS = 200


def _notebook(store: PostgresMemoryStore, now: datetime) -> str:
    notebook = new_notebook_id()
    store.create_notebook(
        notebook,
        owner="bench",
        document="doc",
        run=f"run-{notebook}",
        started_at=now,
        forgets_at=now + timedelta(days=1),
    )
    store.mark_open(notebook, None)
    return notebook


class Subject:
    """One store (sealed or plain) on its own schema, with a notebook to write to and one of
    ``RECORDS`` records to read."""

    def __init__(self, url: str, keyring: Keyring | None, now: datetime) -> None:
        self.store = PostgresMemoryStore(url, keyring=keyring, max_size=1, full_compaction=False)
        self.now = now
        self.writing, self.version = _notebook(self.store, now), 0
        self.reading = _notebook(self.store, now)
        for i in range(RECORDS):
            self._remember(self.reading, i, f"note:r{i}")

    def _remember(self, notebook: str, version: int, name: str) -> None:
        self.store.remember(
            notebook,
            based_on=version,
            request_id=f"r-{version}",
            changes=parse_changes([{"op": "add", "record": {"name": name, "text": TEXT}}]),
            author="agent:bench",
            now=self.now,
        )

    def remember(self) -> None:
        self._remember(self.writing, self.version, f"note:w{self.version}")
        self.version += 1

    def read_one(self) -> None:
        self.store.read_record(self.reading, "note:r100")

    def read_all(self) -> None:
        self.store.records(self.reading)


def _rates(
    plain: Callable[[], None], sealed: Callable[[], None], seconds: float
) -> tuple[float, float]:
    """Calls per second of each, alternating call by call for about ``seconds`` in all."""
    spent = [0.0, 0.0]
    count, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        order = ((0, plain), (1, sealed)) if count % 2 == 0 else ((1, sealed), (0, plain))
        for i, operation in order:
            begun = time.perf_counter()
            operation()
            spent[i] += time.perf_counter() - begun
        count += 1
    return count / spent[0], count / spent[1]


def _cipher_costs(keyring: Keyring, subject: Subject, count: int = 20000) -> dict[str, float]:
    record = subject.store.record(subject.reading, "note:r100")
    assert record is not None
    cipher = keyring.cipher(subject.reading)
    begun = time.perf_counter()
    for _ in range(count):
        sealed = cipher.seal(record.content, record.name, record.version, record.digest)
    seal = (time.perf_counter() - begun) / count * 1e6
    begun = time.perf_counter()
    for _ in range(count):
        cipher.open(sealed, record.name, record.version, record.digest)
    return {"seal": seal, "open": (time.perf_counter() - begun) / count * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="0.5 s a round, 3 rounds")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-fsync", action="store_true", help="a cluster without fsync")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args()
    seconds, rounds = (0.5, 3) if args.quick else (args.seconds, args.rounds)
    now = datetime.now(UTC)  # a benchmark's own notebooks, on the real clock
    cluster = PostgresCluster(durable=not args.no_fsync).start()
    rates: dict[str, dict[str, list[float]]] = {"plain": {}, "sealed": {}}
    try:
        with (
            tempfile.TemporaryDirectory(prefix="oh-bench-keys-") as keys,
            fresh_schema(cluster, prefix="plain") as plain_schema,
            fresh_schema(cluster, prefix="sealed") as sealed_schema,
        ):
            keyring = Keyring(
                MasterKeys(MasterKey.generate()), SqliteKeyStore(Path(keys) / "keys.db")
            )
            subjects = {
                "plain": Subject(plain_schema.url(), None, now),
                "sealed": Subject(sealed_schema.url(), keyring, now),
            }
            try:
                plain, sealed = subjects["plain"], subjects["sealed"]
                for _ in range(rounds):
                    for name, pair in (
                        ("remember", (plain.remember, sealed.remember)),
                        ("read_record", (plain.read_one, sealed.read_one)),
                        (f"records ({RECORDS})", (plain.read_all, sealed.read_all)),
                    ):
                        plain_rate, sealed_rate = _rates(*pair, seconds)
                        rates["plain"].setdefault(name, []).append(plain_rate)
                        rates["sealed"].setdefault(name, []).append(sealed_rate)
                costs = _cipher_costs(keyring, sealed)
            finally:
                for subject in subjects.values():
                    subject.store.close()
    finally:
        cluster.stop()
    figures: dict[str, Any] = {
        name: {
            "plain_per_s": statistics.median(rates["plain"][name]),
            "sealed_per_s": statistics.median(rates["sealed"][name]),
        }
        for name in rates["plain"]
    }
    for figure in figures.values():
        figure["sealed_over_plain"] = figure["sealed_per_s"] / figure["plain_per_s"]
    if args.json:
        summary = {"cpus": os.cpu_count(), "figures": figures, "cipher_us": costs}
        print(json.dumps(summary, indent=2))
        return 0
    kind = "no fsync" if args.no_fsync else "durable"
    print(f"{os.cpu_count()} CPUs, {rounds} rounds of {seconds} s, {kind} cluster, 1 client")
    print(f"{'operation':>15}  {'plain /s':>10}  {'sealed /s':>10}  {'sealed/plain':>12}")
    for name, f in figures.items():
        print(
            f"{name:>15}  {f['plain_per_s']:>10,.0f}  {f['sealed_per_s']:>10,.0f}"
            f"  {f['sealed_over_plain']:>12.2f}"
        )
    print(f"one record's content: seal {costs['seal']:.1f} us, open {costs['open']:.1f} us")
    print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
