"""docs/postgres.md, "Three servers, step by step", typed as written, twice: two PostgreSQL
clusters from ``initdb``, the roles, a shared key store, three ``oh serve`` processes with
nothing on disk in common, the purge worker apart, a proxy in front, an agent's calls through
it, and everything stopped again.

The blocks run in one shell session, in a directory standing in for the README's checkout (the
test's venv linked in as ``.venv``, the checkout's ``examples/``), with no ``OH_*`` variable set.
PostgreSQL's programs refuse to run as root: when the test runs as root, the one line the page
says differs between systems (where the PostgreSQL programs are) points at wrappers that run
``initdb``, ``pg_ctl`` and ``psql`` as the ``postgres`` system user, and files are made
writable for it (umask 000). Everything else runs as written.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from oh.testing.postgres_cluster import SUPERUSER, find_binaries
from test_docs import BLOCKS, ROOT

PAGE = ROOT / "docs" / "postgres.md"
STEPS = [
    block
    for block in BLOCKS
    if block.page == PAGE and block.mark == ("run by", "tests/test_postgres_walkthrough.py")
]
PRINTS = (
    "remember: applied\n"
    "read: methods section missing\n"
    "read: methods section missing\n"
    "read: methods section missing\n"
    "after forget: purged\n"
)


def test_the_walkthrough_has_its_seven_steps_and_says_what_step_six_prints() -> None:
    assert len(STEPS) == 7
    assert PRINTS in PAGE.read_text()


PG_PATH_LINE = "export PATH=/usr/lib/postgresql/15/bin:$PATH\n"


@contextlib.contextmanager
def _checkout() -> Iterator[Path]:
    """A directory standing in for the checkout."""
    directory = Path(tempfile.mkdtemp(prefix="oh-walkthrough-"))
    try:
        (directory / ".venv").symlink_to(Path(sys.prefix))
        (directory / "examples").symlink_to(ROOT / "examples")
        directory.chmod(0o777)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _as_postgres(directory: Path, bindir: Path) -> str:
    """Wrappers running PostgreSQL's programs as the ``postgres`` user; their directory."""
    wrappers = directory / "pg-as-postgres"
    wrappers.mkdir()
    for program in ("initdb", "pg_ctl", "psql"):
        wrapper = wrappers / program
        wrapper.write_text(f'#!/bin/sh\nexec runuser -u {SUPERUSER} -- "{bindir / program}" "$@"\n')
        wrapper.chmod(0o755)
    return f"umask 000\nexport PATH={wrappers}:$PATH\n"


def _script(directory: Path, bindir: Path) -> str:
    """Steps 1 to 6 stop at the first failing command; step 7 (stopping) runs in any case."""
    *steps, stop = STEPS
    body = "".join(f"# {step.where}\n{step.body}" for step in steps)
    assert body.count(PG_PATH_LINE) == 1
    if os.geteuid() == 0:
        body = body.replace(PG_PATH_LINE, _as_postgres(directory, bindir))
    return f"set -eo pipefail\n{body}set +e\n# {stop.where}\n{stop.body}"


def _environment(directory: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OH_", "VIRTUAL_ENV"))}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["HOME"] = str(directory)
    return env


def _stop_leftovers(directory: Path, bindir: Path) -> None:
    """What a failed run left: the clusters under ``oh-deploy``."""
    prefix = ["runuser", "-u", SUPERUSER, "--"] if os.geteuid() == 0 else []
    for cluster in ("notes", "keys"):
        data = directory / "oh-deploy" / cluster
        if (data / "postmaster.pid").exists():
            command = [str(bindir / "pg_ctl"), "--pgdata", str(data), "--mode", "immediate", "stop"]
            subprocess.run([*prefix, *command], capture_output=True, check=False)


def test_three_servers_from_initdb_as_the_page_says_twice() -> None:
    bindir = find_binaries()
    if bindir is None:
        if os.environ.get("CI") or os.environ.get("OH_TEST_POSTGRES") == "require":
            pytest.fail("PostgreSQL server binaries not found (scripts/test installs them)")
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql-15)")
    with _checkout() as directory:
        (directory / "walkthrough.sh").write_text(_script(directory, bindir))
        for attempt in (1, 2):
            process = subprocess.Popen(
                ["bash", "walkthrough.sh"],
                cwd=directory,
                env=_environment(directory),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            try:
                output, _ = process.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                output, _ = process.communicate()
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                _stop_leftovers(directory, bindir)
            logs = "".join(
                f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                for log in sorted((directory / "oh-deploy").glob("*.log"))
            )
            assert process.returncode == 0, f"run {attempt}:\n{output}{logs}"
            assert PRINTS in output, f"run {attempt}:\n{output}{logs}"
            assert "key store: postgresql://oh_app@/postgres?host=" in output
            assert "(shared by every server)" in output and "warning:" not in output
            # Every server answered: each logged a call of the agent's.
            for n in (1, 2, 3):
                served = (directory / "oh-deploy" / f"server-{n}.log").read_text()
                assert "/tools/" in served, f"server {n} was never reached:\n{served[-2000:]}"
