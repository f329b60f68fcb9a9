"""The purge worker that ``oh serve`` and ``oh mcp`` run by default (docs/cli.md, "Purge").

Forgetting on schedule must need no cron job: a serving command starts ``oh purge --every N``
as a child process of its own, over the same locations. The child holds only the purge
credential (delete-only on the memory database, destroy-only on the key store) and never the
master key, exactly as when an operator runs ``oh purge --every`` elsewhere (``--no-purge``).

The child keeps its last pass in a status file that ``/healthz`` shows; each pass that forgot
something, and each failed pass, is one line of the serving command's log (stderr). A child
that ends while the server serves is started again after a pause; it is stopped (SIGTERM, then
SIGKILL) with the server, and on Linux it is told to stop if the server dies without that.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

__all__ = ["DEFAULT_PURGE_EVERY", "PURGE_STATUS_FILE", "PurgeWorker"]

DEFAULT_PURGE_EVERY = 60.0  # seconds between two passes of the default worker
PURGE_STATUS_FILE = "purge-status.json"  # in the keys directory, which every server has
_RESTART_PAUSE = 5.0  # seconds before a child that ended is started again


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """On Linux, the child gets SIGTERM when the serving process dies, even by SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class PurgeWorker:
    """``oh purge --every SECONDS`` as a supervised child of a serving command."""

    def __init__(
        self,
        command: Sequence[str],
        locations: Mapping[str, str],
        every: float,
        status_file: Path,
        log: IO[str] | None = None,
    ) -> None:
        """``locations``: the child's ``OH_DATA``, ``OH_KEYS``, ``OH_MEMORY_URL`` ... values,
        passed in its environment, not its arguments: a database URL may hold a password,
        which the process list shows to every user of the machine."""
        self.every = every
        self.status_file = status_file
        self._argv = [*command, "purge", "--every", f"{every:g}", "--status-file", str(status_file)]
        self._env = {**os.environ, **locations}
        self._log = log
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the child (and its supervising thread); a status from an earlier run goes."""
        with contextlib.suppress(FileNotFoundError):
            self.status_file.unlink()
        self._thread = threading.Thread(target=self._supervise, name="oh-purge", daemon=True)
        self._thread.start()

    def _spawn(self) -> subprocess.Popen[str] | None:
        with self._lock:
            if self._stopping.is_set():
                return None
            self._process = subprocess.Popen(  # noqa: S603 (this same oh, its own flags)
                self._argv,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
            return self._process

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            process = self._spawn()
            if process is None:
                return
            assert process.stdout is not None
            for line in process.stdout:
                self._report(line)
            status = process.wait()
            if self._stopping.is_set():
                return
            self._say(f"purge worker ended (exit status {status}); starting it again")
            if self._stopping.wait(_RESTART_PAUSE):
                return

    def _report(self, line: str) -> None:
        """One line of the serving command's log for each pass that forgot or failed."""
        try:
            event: dict[str, Any] = json.loads(line)
        except ValueError:
            self._say(f"purge worker: {line.rstrip()}")
            return
        if not isinstance(event, dict):
            return
        if event.get("event") == "purge_failed":
            error = event.get("error") or {}
            self._say(f"purge pass failed: {error.get('code')}: {error.get('message')}")
        elif event.get("event") == "purge_pass" and (event.get("purged") or event.get("emptied")):
            self._say(
                f"purge pass at {event.get('at')}: {event.get('purged')} expired notebooks"
                f" forgotten, {event.get('emptied')} abandoned openings ended"
            )

    def _say(self, text: str) -> None:
        print(f"oh: {text}", file=self._log or sys.stderr, flush=True)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the child after the pass it is in (SIGTERM; SIGKILL after ``timeout``)."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._thread is not None:
            self._thread.join(timeout)
