"""Write semantics (docs/design.md): the remember payload, its fingerprint, results, the
hash-chained log entry, following its chain, and folding the log into current state.

Storage backends do the I/O; every rule about what a write means lives here, so all backends
agree by construction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_string, canonical_text, sha256_hex
from oh.core.identifiers import check_identifier
from oh.core.records import Record, StoredRecord, check_name
from oh.errors import AlreadyExists, InvalidArgument, NotFound, OhError, TooManyChanges

__all__ = [
    "MAX_CHANGES",
    "MAX_REQUEST_ID",
    "Add",
    "Applied",
    "Break",
    "Change",
    "Kept",
    "LogChain",
    "LogEntry",
    "LoggedChange",
    "Refused",
    "RememberResult",
    "Remove",
    "Replace",
    "check_against",
    "entry_hash",
    "fingerprint",
    "fingerprint_and_log",
    "fold",
    "genesis_hash",
    "log_changes",
    "parse_based_on",
    "parse_changes",
    "parse_request_id",
    "replay",
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
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        raise InvalidArgument("based_on must be a non-negative integer (the version last read)")
    return value


def parse_request_id(value: Any) -> str:
    return check_identifier(value, "request_id", MAX_REQUEST_ID)


_RECORD_CHANGE_KEYS = frozenset(("op", "record"))
_REMOVE_CHANGE_KEYS = frozenset(("op", "name"))


def _parse_change(value: Any, index: int) -> Change:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise InvalidArgument(f"changes[{index}] must be an object")
    op = value.get("op")
    if op == "add" or op == "replace":
        if value.keys() != _RECORD_CHANGE_KEYS:
            raise InvalidArgument(f'changes[{index}]: an {op} change is {{"op", "record"}}')
        record = Record.parse(value["record"])
        return Add(record) if op == "add" else Replace(record)
    if op == "remove":
        if value.keys() != _REMOVE_CHANGE_KEYS:
            raise InvalidArgument(f'changes[{index}]: a remove change is {{"op", "name"}}')
        return Remove(check_name(value["name"], f"changes[{index}].name"))
    raise InvalidArgument(f'changes[{index}].op must be "add", "replace" or "remove"')


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
    another order, absent vs. empty ``fields``) have the same fingerprint. This is the
    definition; ``fingerprint_and_log`` computes the same value without serializing each record
    twice.
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


class LoggedChange(NamedTuple):
    """One operation as the log keeps it: the full canonical content of what was written.

    A named tuple rather than a dataclass: the log is read and replayed entry by entry, and a
    tuple is built several times faster than a frozen dataclass. It is just as immutable.
    """

    op: str
    name: str
    content: str | None  # canonical JSON of the seven keys; None for a remove
    digest: str | None


def _names_text(names: Iterable[str]) -> str:
    if names == ():
        return "[]"
    return "[" + ",".join(map(canonical_string, names)) + "]"


def _content_text(record: Record) -> str:
    """``record.canonical()``, written out directly.

    The content's seven keys, in their canonical (sorted) order, each value as RFC 8785 writes
    it: names, kind and text are strings, link lists are lists of strings, and only ``fields``
    (serialized on its own, one level deep) can hold numbers or non-ASCII keys. Lone surrogates
    and wrong types surface as an exception here or when the text is encoded, and the caller
    then takes ``record.canonical()``, which raises exactly what it always raised.
    """
    fields = record.fields
    fields_text = canonical_text(dict(fields), "record", depth=1) if fields else "{}"
    string = canonical_string
    name = record.name
    contradicts, depends_on, supports = record.contradicts, record.depends_on, record.supports
    return (
        f'{{"contradicts":{_names_text(contradicts) if contradicts else "[]"}'
        f',"depends_on":{_names_text(depends_on) if depends_on else "[]"}'
        f',"fields":{fields_text}'
        f',"kind":{string(name.partition(":")[0])}'
        f',"name":{string(name)}'
        f',"supports":{_names_text(supports) if supports else "[]"}'
        f',"text":{string(record.text)}}}'
    )


def _logged(change: Add | Replace) -> LoggedChange:
    record = change.record
    try:
        text = _content_text(record)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    except (InvalidArgument, TypeError, UnicodeEncodeError):
        text = record.canonical()
        digest = sha256_hex(text)
    return LoggedChange(change.op, record.name, text, digest)


def log_changes(changes: Iterable[Change]) -> tuple[LoggedChange, ...]:
    return tuple(
        LoggedChange("remove", change.name, None, None)
        if isinstance(change, Remove)
        else _logged(change)
        for change in changes
    )


_new_tuple = tuple.__new__  # builds a named tuple without its Python-level __new__
# How a change with a record opens in the canonical retry payload, by op.
_RECORD_CHANGE_OPENING = {op: f'{{"op":"{op}","record":' for op in ("add", "replace")}


def fingerprint_and_log(
    based_on: int, changes: Iterable[Change]
) -> tuple[str, tuple[LoggedChange, ...]]:
    """``(fingerprint(based_on, changes), log_changes(changes))``, serializing each record once.

    The retry payload's canonical form embeds each record's canonical content verbatim (RFC 8785
    is compositional), so the fingerprint is assembled from the texts ``log_changes`` produced.
    That holds as long as nothing in the payload could break the 32-level nesting limit, which
    is certain when no record has ``fields``; otherwise ``fingerprint`` itself runs. Anything
    unusual takes both reference functions, which raise (in their order) what they raise.
    """
    changes = tuple(changes)
    try:
        if type(based_on) is not int or not 0 <= based_on <= MAX_SAFE_INTEGER:
            raise TypeError("not a plain version number")
        logged = []
        parts = []
        simple = True
        sha256 = hashlib.sha256
        for change in changes:
            if isinstance(change, Remove):
                name = canonical_string(change.name)
                logged.append(_new_tuple(LoggedChange, ("remove", change.name, None, None)))
                parts.append('{"name":' + name + ',"op":"remove"}')
            else:
                op = change.op
                record = change.record
                simple = simple and not record.fields
                text = _content_text(record)
                digest = sha256(text.encode("utf-8")).hexdigest()
                logged.append(_new_tuple(LoggedChange, (op, record.name, text, digest)))
                parts.append(f"{_RECORD_CHANGE_OPENING[op]}{text}}}")
    except (InvalidArgument, TypeError, UnicodeEncodeError, KeyError):
        return fingerprint(based_on, changes), log_changes(changes)
    if not simple:  # the payload nests ``fields`` three levels deeper: let the definition judge
        return fingerprint(based_on, changes), tuple(logged)
    payload = f'{{"based_on":{based_on},"changes":[{",".join(parts)}]}}'
    return hashlib.sha256(payload.encode("utf-8")).hexdigest(), tuple(logged)


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
    """sha256 of the canonical JSON of the entry's body (see docs/design.md, "The log").

    The body's keys are fixed ASCII and its values strings, one integer and lists of strings, so
    its canonical form is written out directly (byte-identical to ``canonical_text`` of the
    body). Any other value (a wrong type, a lone surrogate, an unsafe integer) takes the
    reference serialization, which hashes or refuses it exactly as before.
    """
    s = canonical_string
    changes = changes if type(changes) is tuple else tuple(changes)
    try:
        if type(version) is not int or not -MAX_SAFE_INTEGER <= version <= MAX_SAFE_INTEGER:
            raise TypeError("not a plain version number")
        if len(changes) == 1:
            op, name, _, digest = changes[0]
            listed = f"[{s(op)},{s(name)},{'null' if digest is None else s(digest)}]"
        else:
            listed = ",".join(
                [
                    f"[{s(c.op)},{s(c.name)},{'null' if c.digest is None else s(c.digest)}]"
                    for c in changes
                ]
            )
        text = (
            f'{{"author":{s(author)},"changes":[{listed}],"fingerprint":{s(fingerprint)}'
            f',"notebook":{s(notebook_id)},"prev_hash":{s(prev_hash)}'
            f',"request_id":{s(request_id)},"version":{version},"written_at":{s(written_at)}}}'
        )
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except (TypeError, ValueError, UnicodeEncodeError):
        pass
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


class LogEntry(NamedTuple):
    """One applied call as the log keeps it (a named tuple, like ``LoggedChange``)."""

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


class Break(NamedTuple):
    """What one log entry breaks in its notebook's hash chain (``LogChain.follow``)."""

    expected: int  # the version the entry should carry
    misplaced: bool  # it carries another version
    detached: bool  # its prev_hash is not the hash of the entry before it
    altered: bool  # its hash is not the hash of its body: something in it was changed


class LogChain:
    """One notebook's hash chain, followed entry by entry as its log streams past.

    Each entry carries the next version, names the hash of the entry before it (the genesis hash
    for the first) as its ``prev_hash``, and hashes to its own ``hash``. ``follow`` says what an
    entry breaks and moves on to it either way, so ``verify`` reports every break and reads on
    while an import refuses at the first, by the same rule. After the last entry ``version`` and
    ``head`` are where the log ends: the notebook's version and head hash must be these.
    """

    __slots__ = ("head", "version")

    def __init__(self, notebook_id: str) -> None:
        self.version = 0  # the version of the entry followed last
        self.head = genesis_hash(notebook_id)  # the hash the next entry names

    def follow(self, entry: LogEntry) -> Break | None:
        """What ``entry`` breaks as the next link; None when it breaks nothing.

        After a misplaced entry the chain expects the version after the one it found, so a gap
        in the log is one break, not one per entry after it. A stored value of the wrong type
        (which no hash can cover) makes the entry altered rather than raising.
        """
        nid, version, request_id, fingerprint, author, written_at, changes, prev_hash, hash_ = entry
        self.version += 1
        misplaced = version != self.version
        expected = self.version
        if misplaced:
            self.version = version
        detached = prev_hash != self.head
        self.head = hash_
        try:
            genuine: str | None = entry_hash(
                nid, version, request_id, fingerprint, author, written_at, changes, prev_hash
            )
        except (OhError, TypeError, ValueError, AttributeError):
            genuine = None
        altered = hash_ != genuine
        if misplaced or detached or altered:
            return Break(expected, misplaced, detached, altered)
        return None


V = TypeVar("V")
# What ``fold`` keeps for a write: (name, kind, content, digest, author, written_at, version) of
# the change and its entry -> the value current under the name, or None for nothing. The order is
# ``StoredRecord``'s, so the class itself is what ``replay`` keeps. Values come as the log holds
# them: a damaged log may hold any type (and a name that is no text has the kind None).
Kept = Callable[[Any, Any, Any, Any, Any, Any, Any], V | None]


def fold(state: dict[str, V], entries: Iterable[LogEntry], kept: Kept[V]) -> None:
    """Apply log entries, in order, to a name → value map: the derived current table.

    A remove drops its name; an add or a replace sets it to what ``kept`` makes of the change,
    or drops it when that is None (a write whose content is lost leaves nothing current).
    ``replay`` keeps ``StoredRecord`` values; verify keeps hashes and stamps, and the views of
    past versions keep their entries. It takes a stream so that a whole log is one call: the
    replay of a log is on the path of ``verify`` and ``rebuild``.
    """
    for _, version, _, _, author, written_at, changes, _, _ in entries:
        for op, name, content, digest in changes:
            if op == "remove":
                state.pop(name, None)
                continue
            # ``kind_of``, inlined (a fold keeps one value per write); a damaged log's name may be
            # no text at all, and has no kind
            kind = name.partition(":")[0] if type(name) is str else None
            value = kept(name, kind, content, digest, author, written_at, version)
            if value is None:
                state.pop(name, None)
            else:
                state[name] = value


def replay(entries: Iterable[LogEntry]) -> dict[str, StoredRecord]:
    """Fold a log from the start into the current records it implies."""
    state: dict[str, StoredRecord] = {}
    fold(state, entries, StoredRecord)
    return state
