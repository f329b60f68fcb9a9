"""``oh purge``: delete expired notebooks once, or on a schedule with ``--every``.

A thin loop around ``oh.services.notebooks.purge_expired``: one JSON line per pass; a scheduled
worker outlives a passing fault (it prints ``purge_failed`` and tries again) and stops on
SIGTERM or SIGINT after the pass it is in. ``--status-file`` keeps the last pass in a small
JSON file, replaced atomically: ``oh serve`` runs this command as its own purge worker and
shows that file in ``/healthz`` (``oh.cli.purge_worker``).
"""

from __future__ import annotations

import argparse
import json
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

from oh.cli.options import StopFlag, parse_every, read_locations
from oh.config import open_purge_access
from oh.core.clock import utc_text
from oh.errors import OhError
from oh.services.notebooks import purge_expired, write_purge_status
from oh.storage.base import OPENING_GRACE_FLOOR

__all__ = ["cmd_purge", "configure_purge", "parse_grace"]


def configure_purge(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--every",
        type=parse_every,
        metavar="SECONDS",
        help="run a pass every SECONDS (or 30s, 5m, 1h) until SIGTERM/SIGINT",
    )
    command.add_argument(
        "--opening-grace",
        type=parse_grace,
        default=600.0,
        metavar="SECONDS",
        help="mark empty a notebook still opening after this long (default and least 600)",
    )
    command.add_argument(
        "--status-file",
        type=Path,
        metavar="PATH",
        help="keep the last pass as JSON in PATH, replaced atomically (oh serve shows it)",
    )


def parse_grace(text: str) -> float:
    """``--opening-grace`` in seconds, no shorter than the floor the database enforces."""
    floor = OPENING_GRACE_FLOOR.total_seconds()
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds >= floor:
        raise argparse.ArgumentTypeError(
            f"at least {floor:.0f}: the database never lets the purge end a younger opening"
        )
    return seconds


def cmd_purge(args: argparse.Namespace) -> int:
    access = open_purge_access(read_locations(args))
    stop = StopFlag()
    signal.signal(signal.SIGTERM, stop.set)
    signal.signal(signal.SIGINT, stop.set)
    grace = timedelta(seconds=args.opening_grace)
    status: Path | None = args.status_file
    try:
        while True:
            try:
                report = purge_expired(access, datetime.now(UTC), opening_grace=grace)
                line: dict[str, object] = report.to_json()
            except OhError as exc:
                if args.every is None:
                    raise
                # A scheduled worker outlives a passing fault; it says so and tries again.
                line = {"event": "purge_failed", "at": utc_text(datetime.now(UTC)), **exc.to_json()}
            print(json.dumps(line), flush=True)
            if status is not None:
                write_purge_status(status, {"every": args.every, **line})
            if args.every is None or stop.wait(args.every):
                break
    finally:
        access.close()
    if args.every is not None:
        print(json.dumps({"event": "purge_stopped"}), flush=True)
    return 0
