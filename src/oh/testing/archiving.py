"""A throwaway PostgreSQL cluster with WAL archiving on, as operators run one for point-in-time
recovery: ``archive_mode = on`` and an ``archive_command`` copying every finished WAL segment to
``archive``; base backups of it (``pg_basebackup``) and clusters started on them.

Tests and stress scripts use it to prove that forgetting reaches what operators keep of a
cluster (docs/keys.md): a base backup or an archived segment taken while a notebook was open
holds only its sealed values, which no key left in the key store opens.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from oh.testing.postgres_cluster import (
    SUPERUSER,
    PostgresCluster,
    _free_port,
    roles_bootstrap,
)

__all__ = ["ArchivingCluster"]

ARCHIVE_WAIT = 30.0  # seconds for the archiver to copy a finished segment


class ArchivingCluster:
    """A cluster of its own (``PostgresCluster``) restarted with WAL archiving on, with the
    roles the tests use. ``stop()`` stops it and deletes every file, backups and archive too."""

    def __init__(self, *, durable: bool = False) -> None:
        self.cluster = PostgresCluster(durable=durable).start()
        try:
            self._archive()
            self.cluster.execute(roles_bootstrap())
        except BaseException:
            self.cluster.stop()
            raise

    @property
    def root(self) -> Path:
        """The directory holding everything: the data directory, backups, the archive, logs."""
        assert self.cluster.directory is not None
        return self.cluster.directory

    @property
    def archive(self) -> Path:
        return self.root / "archive"

    def run(self, *argv: str) -> None:
        """``argv`` as the cluster's owner (the ``postgres`` user when run as root)."""
        self.cluster._run(*argv)

    def _bin(self, name: str) -> str:
        assert self.cluster.bindir is not None
        return str(self.cluster.bindir / name)

    def _archive(self) -> None:
        self.run("mkdir", "-m", "0700", str(self.archive))
        command = f"test ! -f {self.archive}/%f && cp %p {self.archive}/%f"
        settings = {"archive_mode": "on", "archive_command": f"'{command}'"}
        with (self.cluster.data / "postgresql.conf").open("a") as conf:
            conf.write("".join(f"{key} = {value}\n" for key, value in settings.items()))
        data, log = str(self.cluster.data), str(self.root / "server.log")
        self.run(self._bin("pg_ctl"), "--pgdata", data, "--log", log, "--wait", "restart")

    def archived(self) -> list[str]:
        """Switch to a new WAL segment, wait until the one before is archived; return the
        names of every archived segment."""
        import psycopg

        with psycopg.connect(self.cluster.url(), autocommit=True) as conn:
            row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
            assert row is not None
            deadline = time.monotonic() + ARCHIVE_WAIT
            while True:
                done = conn.execute("SELECT last_archived_wal FROM pg_stat_archiver").fetchone()
                if done is not None and done[0] is not None and done[0] >= row[0]:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"WAL segment {row[0]} was not archived in time")
                time.sleep(0.05)  # the archiver's pace; no data is stamped with it
        return sorted(path.name for path in self.archive.iterdir())

    def base_backup(self, name: str) -> Path:
        """A ``pg_basebackup`` of the running cluster into ``root/name``, its WAL streamed
        alongside, as an operator takes one."""
        target = self.root / name
        self.run(
            self._bin("pg_basebackup"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.cluster.port),
            "--username",
            SUPERUSER,
            "--pgdata",
            str(target),
            "--wal-method",
            "stream",
            "--checkpoint",
            "fast",
            "--no-sync",
        )
        return target

    @contextlib.contextmanager
    def started_on(self, backup: Path) -> Iterator[PostgresCluster]:
        """A cluster started on a copy of ``backup`` (left as it was taken), as a restore
        starts one: it replays the WAL the backup holds and serves the databases as they were
        when it was taken. Archiving is off there, so nothing reaches this cluster's archive."""
        copy = self.root / f"{backup.name}-restored"
        self.run("cp", "-a", str(backup), str(copy))
        port = _free_port()
        options = f"-c port={port} -c archive_mode=off -c unix_socket_directories='{self.root}'"
        log = str(self.root / f"{backup.name}-restored.log")
        pg_ctl = self._bin("pg_ctl")
        self.run(pg_ctl, "--pgdata", str(copy), "--log", log, "-o", options, "--wait", "start")
        try:
            yield PostgresCluster(bindir=self.cluster.bindir, port=port)
        finally:
            self.run(pg_ctl, "--pgdata", str(copy), "--mode", "immediate", "stop")
            self.run("rm", "-rf", str(copy))

    def stop(self) -> None:
        self.cluster.stop()
