"""What a ``remember`` call decides, as one pure function.

A backend reads, under its write lock, what the call depends on (``Seen``: the notebook's state,
version and head, an earlier call with the same request id, which named records exist) and
hands it to ``decide`` with the prepared call (``Call``). The answer says what to do:

* ``Write``: append this chained entry (and apply it to the current records), then answer
  ``Applied``;
* ``Reuse``: an identical call was applied before: answer the result of the entry at
  ``version`` and write nothing;
* ``Refused``: ``based_on`` is stale: answer it and write nothing.

Anything else raises the error the caller sees (not writable, request id reused with another
payload, an add of an existing name, a replace or remove of a missing one), and the backend then
writes nothing. So every backend decides alike because none decides at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from oh.core.changes import (
    Applied,
    Change,
    LogEntry,
    LoggedChange,
    Refused,
    check_against,
    entry_hash,
    fingerprint_and_log,
)
from oh.core.clock import utc_text
from oh.core.notebook import check_writable
from oh.errors import RequestIdReused

__all__ = ["Call", "Decision", "Reuse", "Seen", "Write", "decide"]

_new_tuple = tuple.__new__  # builds a named tuple without its Python-level __new__


class Call(NamedTuple):
    """A remember call with everything that needs no database done: its retry fingerprint, its
    changes as the log keeps them, and its time stamp. Build it with ``Call.prepare`` before
    taking any lock."""

    notebook_id: str
    based_on: int
    request_id: str
    changes: tuple[Change, ...]
    author: str
    now: datetime
    written_at: str
    fingerprint: str
    logged: tuple[LoggedChange, ...]

    @classmethod
    def prepare(
        cls,
        notebook_id: str,
        *,
        based_on: int,
        request_id: str,
        changes: tuple[Change, ...],
        author: str,
        now: datetime,
    ) -> Call:
        payload, logged = fingerprint_and_log(based_on, changes)
        return _new_tuple(
            cls,
            (
                notebook_id,
                based_on,
                request_id,
                changes,
                author,
                now,
                utc_text(now),
                payload,
                logged,
            ),
        )

    @property
    def names(self) -> list[str]:
        return [change.name for change in self.logged]

    def entry(self, version: int, prev_hash: str) -> LogEntry:
        """This call's log entry at ``version`` after the head ``prev_hash``, hash computed."""
        body = (
            self.notebook_id,
            version,
            self.request_id,
            self.fingerprint,
            self.author,
            self.written_at,
            self.logged,
            prev_hash,
        )
        return _new_tuple(LogEntry, (*body, entry_hash(*body)))

    def applied(self, version: int) -> Applied:
        """The result of this call applied at ``version``."""
        return Applied(version, tuple([(c.name, c.digest) for c in self.logged]))


class Seen(NamedTuple):
    """What the call depends on, as the backend read it under its write lock."""

    state: str
    forgets_at: str
    version: int
    head_hash: str
    prior_version: int | None  # the entry of an earlier call with this request id, if any
    prior_fingerprint: str | None
    existing: Iterable[str]  # which of the call's names are current records


class Write(NamedTuple):
    """Append ``entry`` and answer ``result``."""

    entry: LogEntry
    result: Applied


class Reuse(NamedTuple):
    """Answer the result of the entry at ``version`` (the call's identical original)."""

    version: int


Decision = Write | Reuse | Refused


def decide(call: Call, seen: Seen) -> Decision:
    """The one rule for a remember call (see the module docstring), in order: the notebook must
    be writable; a request id seen before answers its original (or refuses another payload); a
    stale ``based_on`` is refused; then each change must fit the records that exist."""
    if seen.state != "open" or call.written_at >= seen.forgets_at:
        check_writable(call.notebook_id, seen.state, seen.forgets_at, call.now)
    if seen.prior_version is not None:
        if seen.prior_fingerprint != call.fingerprint:
            raise RequestIdReused(
                f"request_id {call.request_id!r} was used for a different write",
                request_id=call.request_id,
            )
        return Reuse(seen.prior_version)
    if call.based_on != seen.version:
        return Refused(current_version=seen.version)
    check_against(call.changes, seen.existing)
    version = seen.version + 1
    return Write(call.entry(version, seen.head_hash), call.applied(version))
