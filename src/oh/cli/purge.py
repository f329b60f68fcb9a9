"""``oh purge``: delete expired notebooks once, or on a schedule with ``--every``.

A thin loop around ``oh.notebooks.purge_expired``: one JSON line per pass; a scheduled worker
outlives a passing fault (it prints ``purge_failed`` and tries again) and stops on SIGTERM or
SIGINT after the pass it is in.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from datetime import UTC, datetime, timedelta

from oh.cli.options import parse_every, read_locations
from oh.config import open_purge_access
from oh.errors import OhError
from oh.notebooks import purge_expired
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
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    grace = timedelta(seconds=args.opening_grace)
    try:
        while True:
            try:
                report = purge_expired(access, datetime.now(UTC), opening_grace=grace)
                print(json.dumps(report.to_json()), flush=True)
            except OhError as exc:
                if args.every is None:
                    raise
                # A scheduled worker outlives a passing fault; it says so and tries again.
                print(json.dumps({"event": "purge_failed", **exc.to_json()}), flush=True)
            if args.every is None or stop.wait(args.every):
                break
    finally:
        access.close()
    if args.every is not None:
        print(json.dumps({"event": "purge_stopped"}), flush=True)
    return 0
