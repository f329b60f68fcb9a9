"""The options several commands share, and how the command line reads them.

``common()`` holds ``--data``, ``--memory-url``, ``--knowledge-url``, ``--keys`` and
``--keys-url``, which every command but ``profile`` and ``key`` themselves takes (their actions
do); ``read_locations`` reads them (then the environment, then the defaults) into
``oh.config.Locations``.
``parse_every`` reads a duration for ``--every`` and ``--recall-deadline``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from oh.config import Locations
from oh.errors import OhError

__all__ = [
    "MAX_PROCESSES",
    "SERVE_ADDRESS_FILE",
    "StopFlag",
    "common",
    "forget_address",
    "parse_every",
    "process_count",
    "read_locations",
    "record_address",
    "recorded_address",
]


def common() -> argparse.ArgumentParser:
    """The parent parser of the location flags."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--data", metavar="DIR", help="data directory (env OH_DATA, ./oh-data)")
    parser.add_argument("--memory-url", metavar="URL", help="memory database (env OH_MEMORY_URL)")
    parser.add_argument(
        "--knowledge-url", metavar="URL", help="knowledge database (env OH_KNOWLEDGE_URL)"
    )
    parser.add_argument(
        "--keys",
        metavar="DIR",
        help="keys directory: the master key and the key store (env OH_KEYS, DATA-keys beside"
        " the data directory)",
    )
    parser.add_argument(
        "--keys-url",
        metavar="URL",
        help="the key store in a PostgreSQL database every server shares (env OH_KEYS_URL;"
        " default the key store file in the keys directory)",
    )
    return parser


def read_locations(args: argparse.Namespace, *, create: bool = False) -> Locations:
    """The locations a command was given (``--data``, ``--memory-url``, ``--knowledge-url``,
    ``--keys``, then the environment). A command opens only existing data unless it is one that
    starts a data directory (``create=True``)."""
    return Locations.resolve(
        getattr(args, "data", None),
        getattr(args, "memory_url", None),
        getattr(args, "knowledge_url", None),
        create=create,
        keys_dir=getattr(args, "keys", None),
        keys_url=getattr(args, "keys_url", None),
    )


def parse_every(text: str) -> float:
    """``300``, ``300s``, ``5m``, ``1h`` → seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (try 30, 30s, 5m, 1h)"
        ) from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError("the interval must be positive")
    return seconds


MAX_PROCESSES = 256  # what --workers and --jobs accept at most


def process_count(text: str) -> int:
    """A number of processes for ``--workers`` or ``--jobs``: a whole number written in ASCII
    digits, from 1 to ``MAX_PROCESSES``. ``ValueError`` (with the reason) otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > 6:
        raise ValueError(f"not a whole number of processes: {text!r}")
    count = int(text)
    if not 1 <= count <= MAX_PROCESSES:
        raise ValueError(f"from 1 to {MAX_PROCESSES} processes, not {count}")
    return count


class StopFlag:
    """Set by a SIGTERM or SIGINT handler, waited on by the main thread.

    Not a ``threading.Event``: a signal handler runs in the main thread between two bytecodes,
    which may be inside ``Event.wait`` while it holds the event's lock, and ``Event.set`` there
    waits for that lock forever (a stopped ``oh purge --every`` hung so, beside a server that
    had gone). Setting an attribute takes no lock; ``wait`` sleeps in short slices, which a
    signal interrupts."""

    SLICE = 0.1  # seconds: the longest a set flag goes unnoticed by ``wait``

    def __init__(self) -> None:
        self._set = False

    def set(self, _signum: object = None, _frame: object = None) -> None:
        """Set the flag; usable as the signal handler itself."""
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, seconds: float) -> bool:
        """Wait until the flag is set or ``seconds`` have passed; whether it is set."""
        deadline = time.monotonic() + seconds
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, self.SLICE))
        return self._set


# Where a running ``oh serve`` says it listens, in the keys directory every server has: ``oh
# notebook open`` prints MCP configs with that address when not told another.
SERVE_ADDRESS_FILE = "serve-address.json"


def record_address(locations: Locations, url: str) -> None:
    """Say where this ``oh serve`` listens (for as long as it runs; ``forget_address``)."""
    path = locations.keys_path() / SERVE_ADDRESS_FILE
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(json.dumps({"url": url, "pid": os.getpid()}) + "\n", "utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # only a convenience for ``oh notebook open``


def forget_address(locations: Locations) -> None:
    """Take back this process's ``record_address`` (another server's record is left alone)."""
    path = locations.keys_path() / SERVE_ADDRESS_FILE
    record = _address_record(path)
    if record is not None and record[1] == os.getpid():
        path.unlink(missing_ok=True)


def recorded_address(locations: Locations) -> str | None:
    """The address the ``oh serve`` running on these locations recorded; None when none runs."""
    try:
        record = _address_record(locations.keys_path() / SERVE_ADDRESS_FILE)
    except OhError:
        return None
    if record is None:
        return None
    url, pid = record
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # the server that recorded it is gone
    except PermissionError:
        pass  # alive, another user's
    return url


def _address_record(path: Path) -> tuple[str, int] | None:
    """``(url, pid)`` as ``record_address`` wrote them; None when there is no such record."""
    try:
        record = json.loads(path.read_text("utf-8"))
        url, pid = record["url"], record["pid"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if type(url) is not str or type(pid) is not int or not url.startswith("http"):
        return None
    return url, pid
