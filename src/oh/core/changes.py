"""Write semantics (SPEC §2): the remember payload, its fingerprint, results, the hash-chained
log entry, and folding the log into current state.

Storage backends do the I/O; every rule about what a write means lives here, so all backends
agree by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from oh.core.canonical import canonical_text, sha256_hex
from oh.core.records import Record, StoredRecord, check_name, kind_of
from oh.errors import AlreadyExists, InvalidArgument, NotFound, TooManyChanges

__all__ = [
    "MAX_CHANGES",
    "MAX_REQUEST_ID",
    "Add",
    "Applied",
    "Change",
    "LogEntry",
    "LoggedChange",
    "Refused",
    "RememberResult",
    "Remove",
    "Replace",
    "check_against",
    "entry_hash",
    "fingerprint",
    "fold",
    "genesis_hash",
    "log_changes",
    "parse_based_on",
    "parse_changes",
    "parse_request_id",
]

MAX_CHANGES = 64
MAX_REQUEST_ID = 128


@dataclass(frozen=True, slots=True)
class Add:
    record: Record
    op: Literal["add"] = "add"

    @property
    def name(self) -> str:
        return self.record.name


@dataclass(frozen=True, slots=True)
class Replace:
    record: Record
    op: Literal["replace"] = "replace"

    @property
    def name(self) -> str:
        return self.record.name


@dataclass(frozen=True, slots=True)
class Remove:
    name: str
    op: Literal["remove"] = "remove"


Change = Add | Replace | Remove


def parse_based_on(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise InvalidArgument("based_on must be a non-negative integer (the version last read)")
    return value


def parse_request_id(value: Any) -> str:
    if type(value) is not str or not 1 <= len(value) <= MAX_REQUEST_ID:
        raise InvalidArgument(f"request_id must be a string of 1 to {MAX_REQUEST_ID} characters")
    if not value.isprintable():
        raise InvalidArgument("request_id must be printable text")
    return value


def _parse_change(value: Any, index: int) -> Change:
    where = f"changes[{index}]"
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{where} must be an object")
    op = value.get("op")
    if op in ("add", "replace"):
        if set(value) != {"op", "record"}:
            raise InvalidArgument(f'{where}: an {op} change is {{"op", "record"}}')
        record = Record.parse(value["record"])
        return Add(record) if op == "add" else Replace(record)
    if op == "remove":
        if set(value) != {"op", "name"}:
            raise InvalidArgument(f'{where}: a remove change is {{"op", "name"}}')
        return Remove(check_name(value["name"], f"{where}.name"))
    raise InvalidArgument(f'{where}.op must be "add", "replace" or "remove"')


def parse_changes(value: Any) -> tuple[Change, ...]:
    """Validate the ``changes`` list: 1 to 64 operations, each name at most once."""
    if type(value) is not list:
        raise InvalidArgument("changes must be a list of 1 to 64 operations")
    if not value:
        raise InvalidArgument("changes is empty; a write holds 1 to 64 operations")
    if len(value) > MAX_CHANGES:
        raise TooManyChanges(
            f"changes holds {len(value)} operations; at most {MAX_CHANGES} per call",
            limit=MAX_CHANGES,
        )
    changes = tuple(_parse_change(item, i) for i, item in enumerate(value))
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise InvalidArgument("changes names one record more than once")
    return changes


def _change_json(change: Change) -> dict[str, Any]:
    if isinstance(change, Remove):
        return {"op": "remove", "name": change.name}
    return {"op": change.op, "record": change.record.content()}


def fingerprint(based_on: int, changes: Iterable[Change]) -> str:
    """sha256 of the canonical retry payload ``{based_on, changes}``, records normalized.

    Two payloads that mean the same write (link lists in another order, ``fields`` keys in
    another order, absent vs. empty ``fields``) have the same fingerprint.
    """
    payload = {"based_on": based_on, "changes": [_change_json(c) for c in changes]}
    return sha256_hex(canonical_text(payload))


def check_against(changes: Iterable[Change], exists: Iterable[str]) -> None:
    """Raise if an add names an existing record or a replace/remove a missing one."""
    present = set(exists)
    for change in changes:
        if isinstance(change, Add):
            if change.name in present:
                raise AlreadyExists(f"{change.name} already exists; use replace", name=change.name)
        elif change.name not in present:
            raise NotFound(f"{change.name} is not a current note", name=change.name)


@dataclass(frozen=True, slots=True)
class LoggedChange:
    """One operation as the log keeps it: the full canonical content of what was written."""

    op: str
    name: str
    content: str | None  # canonical JSON of the seven keys; None for a remove
    digest: str | None


def log_changes(changes: Iterable[Change]) -> tuple[LoggedChange, ...]:
    logged = []
    for change in changes:
        if isinstance(change, Remove):
            logged.append(LoggedChange("remove", change.name, None, None))
        else:
            text = change.record.canonical()
            logged.append(LoggedChange(change.op, change.name, text, sha256_hex(text)))
    return tuple(logged)


def genesis_hash(notebook_id: str) -> str:
    """The ``prev_hash`` of a notebook's first entry: binds the chain to its notebook."""
    return sha256_hex("oh/log/genesis\n" + notebook_id)


def entry_hash(
    notebook_id: str,
    version: int,
    request_id: str,
    fingerprint: str,
    author: str,
    written_at: str,
    changes: Iterable[LoggedChange],
    prev_hash: str,
) -> str:
    body = {
        "notebook": notebook_id,
        "version": version,
        "request_id": request_id,
        "fingerprint": fingerprint,
        "author": author,
        "written_at": written_at,
        "changes": [[c.op, c.name, c.digest] for c in changes],
        "prev_hash": prev_hash,
    }
    return sha256_hex(canonical_text(body))


@dataclass(frozen=True, slots=True)
class LogEntry:
    notebook_id: str
    version: int
    request_id: str
    fingerprint: str
    author: str
    written_at: str
    changes: tuple[LoggedChange, ...]
    prev_hash: str
    hash: str

    def expected_hash(self) -> str:
        return entry_hash(
            self.notebook_id,
            self.version,
            self.request_id,
            self.fingerprint,
            self.author,
            self.written_at,
            self.changes,
            self.prev_hash,
        )

    def result(self) -> Applied:
        """The result this entry's call returned (and every identical retry returns)."""
        return Applied(self.version, tuple((c.name, c.digest) for c in self.changes))


@dataclass(frozen=True, slots=True)
class Applied:
    version: int
    written: tuple[tuple[str, str | None], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "status": "applied",
            "version": self.version,
            "written": [{"name": name, "digest": digest} for name, digest in self.written],
        }


@dataclass(frozen=True, slots=True)
class Refused:
    current_version: int
    reason: Literal["stale"] = "stale"

    def to_json(self) -> dict[str, Any]:
        return {"status": "refused", "reason": self.reason, "current_version": self.current_version}


RememberResult = Applied | Refused


def fold(state: dict[str, StoredRecord], entry: LogEntry) -> None:
    """Apply one log entry to a name → record map (the derived current table)."""
    for change in entry.changes:
        if change.op == "remove":
            state.pop(change.name, None)
        else:
            assert change.content is not None and change.digest is not None
            state[change.name] = StoredRecord(
                name=change.name,
                kind=kind_of(change.name),
                content=change.content,
                digest=change.digest,
                author=entry.author,
                written_at=entry.written_at,
                version=entry.version,
            )
