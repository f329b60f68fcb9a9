"""Authenticated reviewed knowledge (docs/keys.md): the MAC every knowledge row carries.

Four kinds of row make up an owner's reviewed knowledge, and each carries a MAC in its ``mac``
column, under the host's knowledge MAC key (``oh.keys.MasterKeys.mac``):

* a reviewed record version (``reviewed``): the owner and every column of the row — name,
  kind, content, digest, author, time written, revision, the source it cites, the decision
  (decided how, by whom, when, why), the proposal it came from and the revision it supersedes;
* a proposal (``proposals``), pending or decided: every column — who proposed it and when,
  the name, content, digest and source proposed, the note it copies, and once decided, its
  state, the decision and the revision accepting it made. Deciding writes the new MAC in the
  same statement that records the decision;
* a revision entry of the hash chain (``revisions``): every column, hash and previous hash too;
* a pack install (``packs``): every column, the pack's content included.

The MAC covers the RFC 8785 form of the row's columns by name (``oh.core.canonical``), each
kind under a purpose label of its own, so a MAC is good for exactly one row of one kind: a row
changed in any column, copied to another owner, or given another row's MAC is refused. The
knowledge base's head (``knowledge_bases``) carries none: it is checked against the chain of
MACed revision entries (``verify``).

The store checks the MAC of every row it serves (``IntegrityError``, naming the row) and writes
one with every row in the same statement. Rows written before MACs existed are MACed once, the
first time a store opens with MACs; the ``knowledge_macs`` marker in the key store says it was
done, so a row without a MAC after that is a forgery or damage, never MACed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_string, canonical_text
from oh.core.clock import Clock, system_clock, utc_text
from oh.errors import IntegrityError, InvalidArgument, OhError
from oh.keys.master import MasterKeys

__all__ = [
    "MARKER",
    "AuthenticatedKnowledge",
    "KnowledgeMacs",
    "Markers",
    "Remaced",
    "RowKind",
    "column_names",
    "refusal",
    "remac",
]

MARKER = "knowledge_macs"  # in the key store: when existing rows were MACed (once)


def column_names(columns: str) -> tuple[str, ...]:
    """``"a, b, c"`` (a store's column list) as ``("a", "b", "c")``."""
    return tuple(column.strip() for column in columns.split(","))


@dataclass(frozen=True, slots=True)
class RowKind:
    """One kind of MACed row: its table, its purpose label, and its columns in the order the
    store reads and writes them, the MAC not among them. The kinds a knowledge store MACs are
    declared with its columns (``oh.storage.rows``)."""

    table: str
    purpose: bytes
    columns: tuple[str, ...]
    key: tuple[str, ...]  # the primary key
    # The columns' places in RFC 8785 key order, and each one's ``"name":`` (``_data``).
    order: tuple[int, ...] = field(init=False, repr=False)
    labels: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not all(column.isascii() for column in self.columns):
            raise InvalidArgument("a MACed row's columns have ASCII names")  # pragma: no cover
        order = tuple(sorted(range(len(self.columns)), key=lambda i: self.columns[i]))
        object.__setattr__(self, "order", order)
        labels = tuple(canonical_string(column) + ":" for column in self.columns)
        object.__setattr__(self, "labels", labels)

    def describe(self, values: Sequence[Any]) -> str:
        """The row in words, for an error or a reported problem."""
        row = dict(zip(self.columns, values, strict=False))
        if self.table == "reviewed":
            return (
                f"reviewed record {row.get('name')} of {row.get('owner')} at revision"
                f" {row.get('revision')}"
            )
        if self.table == "proposals":
            return f"proposal {row.get('id')} of {row.get('owner')} ({row.get('name')})"
        if self.table == "revisions":
            return f"revision {row.get('revision')} of {row.get('owner')}"
        return f"pack {row.get('name')} of {row.get('owner')} at revision {row.get('revision')}"


class Markers(Protocol):
    """Where the migration marker lives: the key store (``oh.storage.sqlite.keys``), never the
    knowledge database, whose writer could otherwise erase it and have forgeries MACed."""

    def marker(self, name: str) -> str | None: ...

    def mark(self, name: str, value: str) -> None: ...


def _data(kind: RowKind, values: Sequence[Any]) -> bytes | None:
    """What a row's MAC covers: the RFC 8785 form of its columns by name (``canonical_text``
    of that object). None for a row no genuine write makes (a value JSON cannot carry, such as
    bytes or a lone surrogate).

    Every read checks one per row, so the common row, of text, integers and nulls under ASCII
    keys, is written here directly, member by member in key order: RFC 8785 writes exactly this
    for such an object (``canonical_string`` is its form of a string; a test holds the two
    equal). Anything else takes ``canonical_text``."""
    if len(values) != len(kind.columns):
        return None
    parts = []
    for index in kind.order:
        value = values[index]
        kind_of = type(value)
        if kind_of is str:
            parts.append(kind.labels[index] + canonical_string(value))
        elif value is None:
            parts.append(kind.labels[index] + "null")
        elif kind_of is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            parts.append(kind.labels[index] + str(value))
        else:
            break
    else:
        try:
            return ("{" + ",".join(parts) + "}").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate
            return None
    try:
        return canonical_text(dict(zip(kind.columns, values, strict=True))).encode("utf-8")
    except (OhError, UnicodeEncodeError):
        return None


@dataclass(slots=True)
class KnowledgeMacs:
    """Computes and checks the MACs of knowledge rows under ``masters``; ``markers`` keeps the
    marker of the one migration of existing rows, stamped by ``clock``."""

    masters: MasterKeys
    markers: Markers
    clock: Clock = system_clock

    def mac(self, kind: RowKind, values: Sequence[Any]) -> str:
        """The MAC of a row about to be written, under the current master key."""
        data = _data(kind, values)
        if data is None:  # pragma: no cover - the store writes only values it built itself
            raise IntegrityError(f"{kind.describe(values)} holds a value JSON cannot carry")
        return self.masters.mac(kind.purpose, data)

    def problem(self, kind: RowKind, values: Sequence[Any], mac: Any) -> str | None:
        """Why the row's MAC is refused (``missing`` or ``wrong``), or None when it matches."""
        if mac is None:
            return "missing"
        data = _data(kind, values)
        if data is None or not self.masters.mac_matches(kind.purpose, data, mac):
            return "wrong"
        return None

    def check(self, kind: RowKind, values: Sequence[Any], mac: Any) -> None:
        """Nothing when the row's MAC matches; else ``IntegrityError`` naming the row."""
        data = _data(kind, values)
        if data is not None and self.masters.mac_matches(kind.purpose, data, mac):
            return
        raise IntegrityError(refusal(kind, values, "missing" if mac is None else "wrong"))

    def marked(self) -> bool:
        """Whether the rows written before MACs existed were MACed (the marker is set)."""
        return self.markers.marker(MARKER) is not None

    def mark(self) -> None:
        self.markers.mark(MARKER, utc_text(self.clock()))


def refusal(kind: RowKind, values: Sequence[Any], why: str) -> str:
    """The message of a refused row: which row, and what is wrong with its MAC."""
    detail = "carries no MAC" if why == "missing" else "does not match its MAC"
    return (
        f"{kind.describe(values)} {detail}: it was not written by Oh with this host's keys"
        " (forged or damaged; run oh verify)"
    )


@runtime_checkable
class AuthenticatedKnowledge(Protocol):
    """A knowledge store whose rows carry MACs: what ``verify`` asks of it, whatever the
    database beneath."""

    macs: KnowledgeMacs | None  # what it checks the rows it serves with; None: it MACs nothing

    def mac_rows(self) -> list[tuple[RowKind, tuple[Any, ...], Any]]:
        """Every MACed row as ``(kind, values, mac)``, its MAC unchecked."""
        ...

    def unchecked(self) -> Any:
        """The same store serving its rows without checking their MACs (for ``verify``, which
        reports a refused row instead of stopping at it)."""
        ...


class Remaced(Protocol):
    """A knowledge store whose rows can be MACed again under a new master key."""

    def remac(self, masters: MasterKeys) -> int: ...


def remac(store: Remaced, masters: MasterKeys) -> int:
    """MAC every knowledge row again under ``masters.current``, after checking each under the
    key it was MACed with (one of ``masters``), in one transaction; return how many rows.
    ``integrity`` and nothing changed if any row's MAC is missing or wrong. Master key rotation
    calls it with the new key current and the old one among the others."""
    return store.remac(masters)
