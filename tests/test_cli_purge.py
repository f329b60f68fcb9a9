"""`oh purge`: one pass, or a scheduled worker that stops cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from oh.core.changes import parse_changes
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.notebooks import SqliteMemoryStore


def _expired_notebook(data: Path) -> str:
    store = SqliteMemoryStore(data / "memory.db")
    # The wall clock, deliberately: the `oh purge` child decides expiry on its own real clock
    # (shifted with this process's when OH_CLOCK_SHIFT_DAYS is set), so the notebook must be
    # old by that clock.
    long_ago = datetime.now(UTC) - timedelta(hours=30)
    notebook = Notebooks(store, clock=lambda: long_ago).open("ann", "doc", "run-1")
    store.remember(
        notebook.id,
        based_on=0,
        request_id="r-1",
        changes=parse_changes([{"op": "add", "record": {"name": "note:a", "text": "x"}}]),
        author="agent:run-1",
        now=long_ago,
    )
    store.close()
    return notebook.id


def _oh(*args: str) -> list[str]:
    return [sys.executable, "-m", "oh.cli", *args]


def test_one_pass_purges_and_prints_a_structured_line(tmp_path: Path) -> None:
    notebook_id = _expired_notebook(tmp_path)
    done = subprocess.run(_oh("purge", "--data", str(tmp_path)), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.strip().splitlines()[-1])
    assert line["event"] == "purge_pass"
    assert line["purged"] == 1
    assert {table: n for table, n in line["removed"].items() if n} == {
        "records": 1,
        "log": 1,
    }
    store = SqliteMemoryStore(tmp_path / "memory.db")
    assert store.notebook(notebook_id).state == "purged"
    store.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_scheduled_worker_stops_cleanly_on_a_signal(tmp_path: Path, signum: int) -> None:
    _expired_notebook(tmp_path)
    worker = subprocess.Popen(
        _oh("purge", "--every", "30s", "--data", str(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert worker.stdout is not None
    first = json.loads(worker.stdout.readline())
    assert (first["event"], first["purged"]) == ("purge_pass", 1)
    worker.send_signal(signum)
    out, err = worker.communicate(timeout=10)
    assert worker.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"event": "purge_stopped"}


def test_a_missing_database_is_a_typed_error(tmp_path: Path) -> None:
    done = subprocess.run(
        _oh("purge", "--memory-url", str(tmp_path / "nope.db")), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "not_found" in done.stderr


@pytest.mark.parametrize("every", ["0", "-5", "soon", "5x"])
def test_a_bad_interval_is_refused(tmp_path: Path, every: str) -> None:
    done = subprocess.run(
        _oh("purge", "--every", every, "--data", str(tmp_path)), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--every" in done.stderr


@pytest.mark.parametrize("grace", ["0", "60", "599", "soon"])
def test_an_opening_grace_below_the_databases_floor_is_refused(tmp_path: Path, grace: str) -> None:
    _expired_notebook(tmp_path)
    done = subprocess.run(
        _oh("purge", "--opening-grace", grace, "--data", str(tmp_path)),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--opening-grace" in done.stderr
    assert done.stdout == ""  # refused before any pass


def test_a_signal_that_lands_inside_the_wait_never_hangs_the_stop() -> None:
    """The worker's stop flag is set from the signal handler, which runs in the main thread
    wherever it is: inside the wait, too. A ``threading.Event`` set there can wait forever for
    the lock its own ``wait`` holds (a stopped worker once hung so); ``StopFlag`` takes none.
    Signals are sent as fast as they come, hundreds of them into one wait."""
    import os
    import threading
    import time

    from oh.cli.options import StopFlag

    flag = StopFlag()
    previous = signal.signal(signal.SIGUSR1, flag.set)
    try:
        me = os.getpid()

        def pelt() -> None:
            for _ in range(500):
                os.kill(me, signal.SIGUSR1)

        pelting = threading.Thread(target=pelt)
        started = time.monotonic()
        pelting.start()
        assert flag.wait(30)
        pelting.join(10)
        assert time.monotonic() - started < 10
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert StopFlag().wait(0.05) is False  # unset, it waits out its time
