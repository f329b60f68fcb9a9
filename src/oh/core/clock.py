"""Time as Oh sees it: an injected clock and one UTC text form for every stamp."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "from_utc_text", "system_clock", "utc_text"]

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def utc_text(moment: datetime) -> str:
    """``2026-11-29T22:52:20.123456Z``: fixed width, so text order is time order.

    Every read and write stamps or compares one, so it is written by ``isoformat`` (C, the
    year always four digits), not ``strftime``: the same text, in a third less time."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def from_utc_text(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
