"""The notebook as a value (docs/design.md): identity, state, clock bounds, who may write when."""

from __future__ import annotations

import functools
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from oh.core.clock import from_utc_text, utc_text
from oh.errors import Expired, Forbidden, Purged

__all__ = [
    "STATES",
    "Notebook",
    "NotebookState",
    "check_not_closed",
    "check_writable",
    "is_past",
    "new_notebook_id",
]

NotebookState = Literal["opening", "open", "expired", "purged", "empty"]
STATES: tuple[NotebookState, ...] = ("opening", "open", "expired", "purged", "empty")


def new_notebook_id() -> str:
    """128 random bits: ids are never reused, so a purged id can never name a new notebook."""
    return "nb_" + secrets.token_hex(16)


@dataclass(frozen=True, slots=True)
class Notebook:
    id: str
    owner: str
    document: str
    run: str
    state: NotebookState
    started_at: str
    forgets_at: str
    version: int
    pinned_revision: int | None
    head_hash: str
    purged_at: str | None = None

    def state_at(self, now: datetime) -> NotebookState:
        """The state as a caller sees it at ``now``: an open notebook past its time is expired."""
        if self.state == "open" and is_past(now, self.forgets_at):
            return "expired"
        return self.state

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "started_at": self.started_at,
            "forgets_at": self.forgets_at,
            "version": self.version,
            "pinned_revision": self.pinned_revision,
        }


def is_past(now: datetime, stamp: str) -> bool:
    """Whether ``now`` has reached the time written as ``stamp`` (``utc_text``'s form).

    It means ``utc_text(now) >= stamp``. Every tool call asks it of its notebook's forget time,
    so a well-formed stamp is read into a moment once per process and compared with ``now``
    as a moment, where writing ``now`` as text costs more than the rest of the check."""
    if now.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    moment = _moment(stamp)
    return utc_text(now) >= stamp if moment is None else now >= moment


@functools.lru_cache(maxsize=4096)
def _moment(stamp: str) -> datetime | None:
    """``stamp`` as a moment, or None unless it is exactly ``utc_text``'s form of one."""
    try:
        moment = from_utc_text(stamp)
    except (TypeError, ValueError):
        return None
    return moment if utc_text(moment) == stamp else None


def check_not_closed(notebook_id: str, state: str) -> None:
    """Refuse a notebook whose memory is gone (``purged``) or waits for the purge."""
    if state in ("purged", "empty"):
        raise Purged(f"notebook {notebook_id} was forgotten; its memory is gone")
    if state == "expired":
        raise Expired(f"notebook {notebook_id} has expired and waits for the purge")


def check_writable(notebook_id: str, state: str, forgets_at: str, now: datetime) -> None:
    """Refuse any tool call on a notebook that is not open, or open but past its time."""
    check_not_closed(notebook_id, state)
    if is_past(now, forgets_at):
        raise Expired(f"notebook {notebook_id} has expired and waits for the purge")
    if state != "open":
        raise Forbidden(f"notebook {notebook_id} is still opening")
