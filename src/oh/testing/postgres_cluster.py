"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` into a temporary
directory, ``pg_ctl start`` on a free 127.0.0.1 port, ``pg_ctl stop`` and delete afterwards.

The server binaries come from ``OH_PG_BIN`` or ``/usr/lib/postgresql/<15|16|17>/bin`` or
``pg_config --bindir``. PostgreSQL refuses to run as root, so when the tests run as root the
cluster belongs to the ``postgres`` system user (``runuser -u postgres --``), which the
``postgresql-15`` Debian package creates.

``shared_cluster()`` starts one cluster per process on first use and stops it at exit, so
every PostgreSQL test module of one pytest run shares it. ``fresh_schema()`` gives each test
its own schema, set up with the same role SQL a deployment runs (``oh postgres roles``).
A machine without the binaries skips the PostgreSQL tests, except under CI (``CI`` set) or
with ``OH_TEST_POSTGRES=require``, where that is an error.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

__all__ = [
    "APP_ROLE",
    "PURGE_ROLE",
    "PostgresCluster",
    "Schema",
    "find_binaries",
    "fresh_schema",
    "postgres_cluster",
    "shared_cluster",
]

APP_ROLE = "oh_app"
PURGE_ROLE = "oh_purge"
SUPERUSER = "postgres"
_VERSIONS = ("15", "16", "17")


def find_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None if there is none."""
    candidates: list[Path] = []
    if os.environ.get("OH_PG_BIN"):
        candidates.append(Path(os.environ["OH_PG_BIN"]))
    candidates += [Path(f"/usr/lib/postgresql/{v}/bin") for v in _VERSIONS]
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            bindir = subprocess.run(  # noqa: S603 (a fixed argv, no shell)
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
            candidates.append(Path(bindir))
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class PostgresCluster:
    """One PostgreSQL server of our own. ``durable=False`` (tests) turns off fsync; the
    benchmark keeps PostgreSQL's durable defaults."""

    durable: bool = False
    bindir: Path | None = None
    port: int = 0
    directory: Path | None = None
    _as_postgres: bool = field(default=False, repr=False)

    @property
    def data(self) -> Path:
        assert self.directory is not None
        return self.directory / "data"

    def _command(self, *argv: str) -> list[str]:
        if self._as_postgres:
            return ["runuser", "-u", SUPERUSER, "--", *argv]
        return list(argv)

    def _run(self, *argv: str) -> None:
        done = subprocess.run(  # noqa: S603 (fixed binaries, no shell)
            self._command(*argv), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> PostgresCluster:
        self.bindir = self.bindir or find_binaries()
        if self.bindir is None:
            raise FileNotFoundError("no PostgreSQL server binaries (initdb, pg_ctl) found")
        self._own_directory()
        self._run(
            str(self.bindir / "initdb"),
            "--pgdata",
            str(self.data),
            "--username",
            SUPERUSER,
            "--auth",
            "trust",
            "--encoding",
            "UTF8",
            "--locale",
            "C.UTF-8",
            "--no-sync",
        )
        self.port = _free_port()
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.directory}'",
            "max_connections": "200",
            "shared_buffers": "128MB",
            # Old WAL segments are removed, not renamed for reuse, so forgotten text does not
            # linger in recycled segment files.
            "wal_recycle": "off",
            "log_min_messages": "warning",
        }
        if not self.durable:
            # No fsync (fast), but commits still write their WAL before returning, so what a
            # test committed is in the files it scans.
            settings |= {"fsync": "off", "full_page_writes": "off"}
        config = "".join(f"{key} = {value}\n" for key, value in settings.items())
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(config)
        self._pg_ctl_start()
        return self

    def _own_directory(self) -> None:
        self._as_postgres = os.geteuid() == 0
        self.directory = Path(tempfile.mkdtemp(prefix="oh-pg-"))
        if self._as_postgres:
            user = pwd.getpwnam(SUPERUSER)
            os.chown(self.directory, user.pw_uid, user.pw_gid)

    def _pg_ctl_start(self) -> None:
        assert self.bindir is not None and self.directory is not None
        self._run(
            str(self.bindir / "pg_ctl"),
            "--pgdata",
            str(self.data),
            "--log",
            str(self.directory / "server.log"),
            "--wait",
            "--timeout",
            "60",
            "start",
        )

    def replica(self) -> PostgresCluster:
        """A hot standby of this cluster, streaming from it (``pg_basebackup -R``), started on
        a port of its own; ``stop()`` it like any cluster."""
        assert self.bindir is not None
        standby = PostgresCluster(durable=self.durable, bindir=self.bindir)
        standby._own_directory()
        self._run(
            str(self.bindir / "pg_basebackup"),
            "--pgdata",
            str(standby.data),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--username",
            SUPERUSER,
            "--write-recovery-conf",
            "--wal-method",
            "stream",
            "--no-sync",
        )
        standby.port = _free_port()
        settings = {
            "port": str(standby.port),
            "unix_socket_directories": f"'{standby.directory}'",
            "hot_standby": "on",
        }
        with (standby.data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))
        standby._pg_ctl_start()
        return standby

    def stop(self) -> None:
        if self.directory is None or self.bindir is None:
            return
        with contextlib.suppress(RuntimeError):
            self._run(
                str(self.bindir / "pg_ctl"), "--pgdata", str(self.data), "--mode", "fast", "stop"
            )
        shutil.rmtree(self.directory, ignore_errors=True)
        self.directory = None

    def url(self, user: str = SUPERUSER, database: str = "postgres", **options: str) -> str:
        """A ``postgresql://`` URL; ``options`` become server settings (``search_path=...``)."""
        base = f"postgresql://{user}@127.0.0.1:{self.port}/{database}"
        if not options:
            return base
        flags = " ".join(f"-c{key}={value}" for key, value in options.items())
        return f"{base}?options={quote(flags, safe='')}"

    def execute(self, sql: str, params: tuple[Any, ...] = (), database: str = "postgres") -> None:
        """Run SQL as the superuser (autocommit)."""
        import psycopg

        with psycopg.connect(self.url(database=database), autocommit=True) as conn:
            conn.execute(sql, params or None)

    def relation_files(self, schema: str, database: str = "postgres") -> list[Path]:
        """The data files of every table, index and TOAST table of ``schema``."""
        import psycopg

        with psycopg.connect(self.url(database=database), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'i')"
                " UNION ALL SELECT pg_relation_filepath(c.reltoastrelid) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %(schema)s AND c.reltoastrelid <> 0"
                " UNION ALL SELECT pg_relation_filepath(i.indexrelid) FROM pg_index i"
                " JOIN pg_class c ON c.reltoastrelid = i.indrelid"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %(schema)s",
                {"schema": schema},
            ).fetchall()
        files: list[Path] = []
        for (relative,) in rows:
            if relative is None:
                continue
            main = self.data / relative
            files += sorted(main.parent.glob(main.name + "*"))  # segments, _fsm, _vm
        return files

    def wal_files(self) -> list[Path]:
        return sorted(p for p in (self.data / "pg_wal").iterdir() if p.is_file())


_shared: PostgresCluster | None = None
_shared_lock = threading.Lock()


def _required() -> bool:
    return bool(os.environ.get("CI")) or os.environ.get("OH_TEST_POSTGRES") == "require"


def shared_cluster() -> PostgresCluster:
    """This process's test cluster, started on first use and stopped at exit; skips the
    calling test when PostgreSQL is not installed (fails instead under CI)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            if find_binaries() is None:
                message = (
                    "PostgreSQL server binaries not found (apt-get install postgresql-15,"
                    " or set OH_PG_BIN)"
                )
                if _required():
                    pytest.fail(message)
                pytest.skip(message)
            cluster = PostgresCluster().start()
            atexit.register(cluster.stop)
            cluster.execute(roles_bootstrap())
            _shared = cluster
        return _shared


def roles_bootstrap() -> str:
    """The cluster-wide roles the tests use; a deployment creates them with ``roles_sql``."""
    from oh.storage.postgres.notebooks import roles_sql

    return roles_sql(schema="public", app_role=APP_ROLE, purge_role=PURGE_ROLE)


@pytest.fixture(scope="session")
def postgres_cluster() -> PostgresCluster:
    return shared_cluster()


@dataclass(frozen=True)
class Schema:
    """One test's schema on the shared cluster, owned by the application role."""

    cluster: PostgresCluster
    name: str

    def url(self, user: str = APP_ROLE) -> str:
        return self.cluster.url(user, search_path=self.name)

    @property
    def purge_url(self) -> str:
        return self.url(PURGE_ROLE)


@contextlib.contextmanager
def fresh_schema(cluster: PostgresCluster, prefix: str = "t") -> Iterator[Schema]:
    """A new schema set up exactly as ``oh postgres roles`` sets one up; dropped afterwards."""
    from oh.storage.postgres.notebooks import roles_sql

    name = f"{prefix}_{secrets.token_hex(6)}"
    cluster.execute(roles_sql(schema=name, app_role=APP_ROLE, purge_role=PURGE_ROLE))
    try:
        yield Schema(cluster, name)
    finally:
        cluster.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
