"""What the reliability scripts under stress/ share: where a memory database lives (an embedded
file or a PostgreSQL schema), a real ``oh serve`` process to drive over HTTP and MCP, and the
one way every script reports its figure.

Each script has ``run(...) -> dict`` (what tests/test_reliability.py calls with small sizes)
and ``main()`` (the full run, printing ``key: value`` lines, or one JSON object with
``--json``). Every summary carries ``figure`` (the published number, e.g. ``200/200``) and
``ok``; ``stress/run_all.py`` collects them into one table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from oh.storage.base import MemoryStore, PurgeAccess

ROOT = Path(__file__).resolve().parents[1]
STRESS = ROOT / "stress"

__all__ = [
    "ROOT",
    "STRESS",
    "Server",
    "Target",
    "common_arguments",
    "free_port",
    "postgres_target",
    "report",
    "script_command",
]


# -- where the memory database lives --------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A memory database: ``kind`` is ``libsql`` (``location`` a file path) or ``postgres``
    (``location`` a ``postgresql://`` URL of the application role on a schema of its own)."""

    kind: str
    location: str
    purge_location: str = ""  # PostgreSQL: the purge role's URL
    data_directory: str = ""  # PostgreSQL: the cluster's data directory, to scan its files
    key_store: str = ""  # sealed notebooks (docs/keys.md): the key store file, and
    master_key: str = ""  # the master key's text; every store opened seals with them

    def sealed(self, directory: Path) -> Target:
        """This database with its notebooks sealed, the key store in ``directory``."""
        from dataclasses import replace

        from oh.keys import MasterKey

        key_store = str(directory / "keys" / "keys.db")
        return replace(self, key_store=key_store, master_key=MasterKey.generate().text())

    @classmethod
    def libsql(cls, directory: Path) -> Target:
        return cls("libsql", str(directory / "memory.db"))

    def open(self, *, application_name: str = "oh-stress", **options: Any) -> MemoryStore:
        max_size = options.pop("max_size", 2)
        if self.key_store:
            from oh.keys import Keyring, MasterKey, MasterKeys
            from oh.storage.sqlite.keys import SqliteKeyStore

            masters = MasterKeys(MasterKey.parse(self.master_key))
            options["keyring"] = Keyring(masters, SqliteKeyStore(self.key_store))
        if self.kind == "postgres":
            from oh.storage.postgres.notebooks import PostgresMemoryStore

            return PostgresMemoryStore(
                self.location, max_size=max_size, application_name=application_name, **options
            )
        from oh.storage.sqlite.notebooks import SqliteMemoryStore

        return SqliteMemoryStore(self.location, **options)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """Raw SQL outside Oh (``?`` placeholders), e.g. to look at or damage stored rows."""
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.location, autocommit=True) as conn:
                text = sql.replace("%", "%%").replace("?", "%s") if params else sql
                cursor = conn.execute(text, params or None)
                return list(cursor.fetchall()) if cursor.description else []
        conn = sqlite3.connect(self.location, isolation_level=None)
        try:
            cursor = conn.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []
        finally:
            conn.close()

    def purge_access(self) -> PurgeAccess:
        if self.kind == "postgres":
            from oh.storage.postgres.notebooks import PostgresPurgeAccess

            return PostgresPurgeAccess(self.purge_location)
        from oh.storage.sqlite.notebooks import SqlitePurgeAccess

        return SqlitePurgeAccess(self.location)

    def files(self) -> list[Path]:
        """Every file the database keeps: the libSQL file, its WAL and shared memory; or every
        file of the PostgreSQL database (tables, indexes, TOAST, catalogs) and the WAL."""
        if self.kind == "libsql":
            return [Path(self.location + suffix) for suffix in ("", "-wal", "-shm")]
        oid = self.execute("SELECT oid FROM pg_database WHERE datname = current_database()")
        data = Path(self.data_directory)
        database = data / "base" / str(oid[0][0])
        files = [p for p in database.iterdir() if p.is_file()]
        files += [p for p in (data / "global").iterdir() if p.is_file()]
        return sorted(files + [p for p in (data / "pg_wal").iterdir() if p.is_file()])

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "location": self.location,
            "purge_location": self.purge_location,
            "data_directory": self.data_directory,
        }

    @classmethod
    def from_json(cls, text: str) -> Target:
        return cls(**json.loads(text))


@contextlib.contextmanager
def postgres_target(cluster: Any = None) -> Iterator[Target]:
    """A PostgreSQL memory database in a fresh schema (set up as ``oh postgres roles`` does) on
    ``cluster`` (pytest passes its shared test cluster), or on a throwaway cluster of our own
    (``oh.testing.postgres_cluster``), stopped afterwards."""
    from oh.testing.postgres_cluster import PostgresCluster, fresh_schema, roles_bootstrap

    own = cluster is None
    if own:
        cluster = PostgresCluster().start()
        cluster.execute(roles_bootstrap())
    try:
        with fresh_schema(cluster, prefix="stress") as schema:
            yield Target("postgres", schema.url(), schema.purge_url, str(cluster.data))
    finally:
        if own:
            cluster.stop()


# -- a real `oh serve` ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """``oh serve`` as its own process on 127.0.0.1, which can be killed and started again on
    the same data directory and port."""

    def __init__(self, data: Path, *, port: int | None = None, recall: str = "off") -> None:
        self.data = data
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.recall = recall
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"{data.name}-serve.log"

    def oh(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "oh.cli", *args, "--data", str(self.data)],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def owner_token(self, owner: str) -> str:
        return self.oh("token", "create", "--owner", owner).strip().splitlines()[-1]

    def start(self) -> Server:
        argv = [sys.executable, "-m", "oh.cli", "serve", "--data", str(self.data)]
        argv += ["--port", str(self.port)]
        if self.recall != "default":
            argv += ["--recall", self.recall]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"oh serve did not start:\n{self.output()[-4000:]}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flushing, whatever was in flight."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


@contextlib.contextmanager
def scratch(prefix: str, keep: Path | None = None) -> Iterator[Path]:
    """A temporary working directory (or ``keep``, left in place for inspection)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


# -- reporting ------------------------------------------------------------------------------------


def common_arguments(description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(description or "").split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    return parser


def seed_of(value: int | None) -> int:
    return value if value is not None else int.from_bytes(os.urandom(4), "big")


def report(summary: dict[str, Any], as_json: bool) -> int:
    """Print the summary; exit status 1 unless it is ``ok``."""
    if as_json:
        print(json.dumps(summary, sort_keys=False, default=str))
    else:
        for key, value in summary.items():
            if key in ("figure", "ok"):
                continue
            print(f"{key}: {value}")
        print(f"==> {summary['figure']}  ({'ok' if summary['ok'] else 'FAILED'})")
    return 0 if summary["ok"] else 1


def script_command(script: str, *args: str) -> list[str]:
    return [sys.executable, str(STRESS / script), *args]
