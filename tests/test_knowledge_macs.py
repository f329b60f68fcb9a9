"""Authenticated reviewed knowledge (docs/keys.md): every knowledge row carries a MAC under the
host's key, a forgery written straight into the database is refused by reads (``integrity``)
and reported by ``verify``, on the embedded backend and on PostgreSQL alike."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnesses import PublishedByReview
from oh.core.canonical import canonical_text, sha256_hex
from oh.core.records import Record
from oh.core.reviewed import Decision, accepted_version
from oh.errors import IntegrityError, OhError
from oh.keys import MasterKey, MasterKeys
from oh.keys.macs import MARKER, KnowledgeMacs, remac
from oh.services.knowledge import Knowledge
from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.rows import KINDS
from oh.storage.sql.knowledge import SqlKnowledgeStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import Driver, SqliteMemoryStore
from oh.testing.knowledge import (
    SOURCE,
)
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0
from oh.verify import verify_knowledge

ROOT = Path(__file__).resolve().parents[1]
OLD = MasterKey(bytes(range(32)))
NEW = MasterKey(bytes(range(32, 64)))


class Backend:
    """One knowledge database, opened by Oh with or without MACs, and reached with raw SQL
    outside Oh as a forger with database access would (triggers dropped or disabled)."""

    def __init__(self, kind: str, location: str, keys: Path, driver: Driver = "sqlite3") -> None:
        self.kind = kind
        self.driver = driver  # the embedded database's driver
        self.location = location
        self.key_store = SqliteKeyStore(keys)
        self.clock = FakeClock(T0)

    def macs(self, masters: MasterKeys | None = None) -> KnowledgeMacs:
        return KnowledgeMacs(masters or MasterKeys(OLD), self.key_store, self.clock)

    def open(self, macs: KnowledgeMacs | None = None) -> SqlKnowledgeStore:
        if self.kind == "postgres":
            from oh.storage.postgres.knowledge import PostgresKnowledgeStore

            return PostgresKnowledgeStore(self.location, max_size=2, macs=macs)
        return SqliteKnowledgeStore(self.location, macs=macs, driver=self.driver)

    def sql(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.location, autocommit=True) as conn:
                text = sql.replace("%", "%%").replace("?", "%s") if params else sql
                cursor = conn.execute(text, params or None)
                return list(cursor.fetchall()) if cursor.description else []
        conn = sqlite3.connect(self.location, isolation_level=None)
        try:
            cursor = conn.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []
        finally:
            conn.close()

    def forger(self) -> None:
        """Take the append-only triggers away, as whoever can write the database can."""
        if self.kind == "postgres":
            for table in ("reviewed", "revisions", "proposals", "packs"):
                self.sql(f"ALTER TABLE {table} DISABLE TRIGGER USER")
            return
        for (name,) in self.sql("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
            self.sql(f"DROP TRIGGER {name}")


# The embedded database on each of its drivers, and PostgreSQL.
BACKENDS = ("libsql", "libsql_driver", "postgres")


@contextlib.contextmanager
def opened_backend(kind: str, directory: Path) -> Iterator[Backend]:
    """A knowledge database of ``kind`` (one of ``BACKENDS``) with its key store, closed after."""
    if kind != "postgres":
        driver: Driver = "libsql" if kind == "libsql_driver" else "sqlite3"
        found = Backend(
            "libsql", str(directory / "knowledge.db"), directory / "keys" / "keys.db", driver
        )
        try:
            yield found
        finally:
            found.key_store.close()
        return
    from oh.testing.postgres_cluster import fresh_schema, shared_cluster

    with fresh_schema(shared_cluster()) as schema:
        found = Backend("postgres", schema.url(), directory / "keys" / "keys.db")
        try:
            yield found
        finally:
            found.key_store.close()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    with opened_backend(request.param, tmp_path) as found:
        yield found


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db")
    yield store
    store.close()


@pytest.fixture
def store(backend: Backend) -> Iterator[SqlKnowledgeStore]:
    opened = backend.open(backend.macs())
    yield opened
    opened.close()


def _accept(store: KnowledgeStore, memory: MemoryStore, name: str, text: str) -> int:
    knowledge = Knowledge(store, memory, clock=FakeClock(T0))
    proposal = knowledge.propose("ann", source=SOURCE, record={"name": name, "text": text})
    decided = knowledge.decide("ann", proposal.id, decision="accept", reason="checked")
    assert decided.record is not None
    return decided.record.revision


def _reject(store: KnowledgeStore, memory: MemoryStore, name: str) -> str:
    knowledge = Knowledge(store, memory, clock=FakeClock(T0))
    proposal = knowledge.propose("ann", source=SOURCE, record={"name": name, "text": "no"})
    knowledge.decide("ann", proposal.id, decision="reject", reason="unsupported")
    return proposal.id


def _pending(store: KnowledgeStore, memory: MemoryStore, name: str) -> str:
    knowledge = Knowledge(store, memory, clock=FakeClock(T0))
    return knowledge.propose("ann", source=SOURCE, record={"name": name, "text": "later"}).id


def _install(store: KnowledgeStore, name: str, expected: dict[str, str]) -> str:
    content = canonical_text({"name": name, "profiles": []})
    digest = sha256_hex(content)
    installed = store.install_pack(
        "ann",
        name=name,
        version="1.0.0",
        digest=digest,
        content=content,
        expected=expected,
        made_by="ann",
        made_at="2026-11-29T12:00:00.000000Z",
    )
    assert installed is not None
    return digest


def _fill(store: KnowledgeStore, memory: MemoryStore) -> None:
    """Two names accepted (one twice), a rejection, a pending proposal and a pack install."""
    _accept(store, memory, "finding:a", "coral recovers in ten years")
    _accept(store, memory, "finding:b", "bleaching recurs")
    _accept(store, memory, "finding:a", "coral recovers in a decade or more")
    _reject(store, memory, "finding:c")
    _pending(store, memory, "finding:d")
    _install(store, "reef-pack", {})


def _macs(backend: Backend, table: str) -> list[Any]:
    return [row[0] for row in backend.sql(f"SELECT mac FROM {table}")]


def _mac_problems(store: KnowledgeStore, macs: KnowledgeMacs) -> list[str]:
    report = verify_knowledge(store, macs=macs)
    return [p.detail for p in report.problems if p.what == "mac"]


def _reads_refused(store: KnowledgeStore, *, name: str, revision: int) -> str:
    """Every read that serves the row is refused with ``integrity``; the message of one."""
    with pytest.raises(IntegrityError) as refused:
        store.records_at("ann", store.latest_revision("ann"))
    with pytest.raises(IntegrityError):
        store.record_at("ann", name, revision)
    with pytest.raises(IntegrityError):
        store.history("ann", name)
    assert refused.value.code == "integrity"
    return refused.value.message


# -- rows written carry MACs --------------------------------------------------------------------


def test_every_row_written_with_macs_carries_a_mac_that_matches(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _fill(store, memory)
    for table in ("reviewed", "revisions", "proposals", "packs"):
        macs = _macs(backend, table)
        assert macs and all(type(m) is str and m.startswith(OLD.id + ":") for m in macs), table
    rows = store.mac_rows()
    assert len(rows) == 4 + 3 + 5 + 1  # revisions, reviewed, proposals, packs
    assert all(store.macs and store.macs.problem(k, v, m) is None for k, v, m in rows)
    assert verify_knowledge(store, macs=store.macs).ok
    assert [r.name for r in store.records_at("ann", 4)] == ["finding:a", "finding:b"]
    assert sorted(p.state for p in store.proposals("ann")) == [
        "accepted",
        "accepted",
        "accepted",
        "pending",
        "rejected",
    ]
    assert [p.name for p in store.installed_packs("ann")] == ["reef-pack"]


def test_a_decision_is_maced_in_the_statement_that_records_it(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    proposal_id = _pending(store, memory, "finding:a")
    (before,) = backend.sql("SELECT mac FROM proposals WHERE id = ?", (proposal_id,))
    Knowledge(store, memory, clock=FakeClock(T0)).decide(
        "ann", proposal_id, decision="reject", reason="no"
    )
    (after,) = backend.sql("SELECT mac FROM proposals WHERE id = ?", (proposal_id,))
    assert before != after
    assert store.proposal(proposal_id).state == "rejected"


def test_a_forger_still_cannot_change_knowledge_through_the_triggers_but_the_mac_can_change(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _accept(store, memory, "finding:a", "true")
    proposal_id = _reject(store, memory, "finding:b")
    for sql in (
        "UPDATE reviewed SET content = '{}'",
        "UPDATE revisions SET made_by = 'eve'",
        "DELETE FROM reviewed",
    ):
        with pytest.raises(Exception, match=r"(?i)append-only"):
            backend.sql(sql)
    with pytest.raises(Exception, match=r"(?i)already decided"):
        backend.sql(
            "UPDATE proposals SET state = 'pending', decision = NULL WHERE id = ?", (proposal_id,)
        )
    backend.sql("UPDATE reviewed SET mac = NULL")  # the MAC alone may change: and is checked
    with pytest.raises(IntegrityError):
        store.records_at("ann", 1)


# -- forgeries are refused by reads and reported by verify --------------------------------------


def test_content_changed_with_its_digest_recomputed_is_refused_and_reported(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _accept(store, memory, "finding:a", "coral recovers in ten years")
    backend.forger()
    forged = Record.parse({"name": "finding:a", "text": "coral never recovers"})
    backend.sql(
        "UPDATE reviewed SET content = ?, digest = ? WHERE owner = 'ann' AND name = 'finding:a'",
        (forged.canonical(), forged.digest),
    )
    backend.sql("UPDATE revisions SET digest = ?", (forged.digest,))  # the entry agrees, too
    message = _reads_refused(store, name="finding:a", revision=1)
    assert "finding:a" in message and "ann" in message and "revision 1" in message
    problems = _mac_problems(store, backend.macs())
    assert len(problems) == 2
    assert "reviewed record finding:a of ann at revision 1 does not match its MAC" in problems[1]
    assert "revision 1 of ann does not match its MAC" in problems[0]


def test_a_forged_decision_is_refused_and_reported(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _accept(store, memory, "finding:a", "coral recovers")
    rejected = _reject(store, memory, "finding:b")
    pending = _pending(store, memory, "finding:c")
    backend.forger()
    other = canonical_text(Decision("accept", "bob", "2026-11-29T12:00:00.000000Z", "ok").to_json())
    backend.sql("UPDATE reviewed SET decision = ?", (other,))
    backend.sql(
        "UPDATE proposals SET decision = ? WHERE id = ?",
        (canonical_text(Decision("reject", "bob", T0.isoformat(), "forged").to_json()), rejected),
    )
    backend.sql(  # a pending proposal decided behind Oh's back
        "UPDATE proposals SET state = 'rejected', decision = ? WHERE id = ?", (other, pending)
    )
    _reads_refused(store, name="finding:a", revision=1)
    for proposal_id in (rejected, pending):
        with pytest.raises(IntegrityError, match=proposal_id):
            store.proposal(proposal_id)
    with pytest.raises(IntegrityError):
        store.proposals("ann")
    problems = _mac_problems(store, backend.macs())
    assert len(problems) == 3
    assert any(rejected in p for p in problems) and any(pending in p for p in problems)


def test_a_decision_on_a_forged_pending_proposal_is_refused(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    genuine = store.proposal(_pending(store, memory, "finding:a"))
    backend.sql(
        "INSERT INTO proposals (id, owner, proposed_by, proposed_at, name, content, digest,"
        " source, state) VALUES (?, 'ann', 'agent:x', ?, 'finding:b', ?, ?, ?, 'pending')",
        (
            "pr_" + "f" * 32,
            genuine.proposed_at,
            genuine.content.replace("finding:a", "finding:b"),
            genuine.digest,
            canonical_text(genuine.source.to_json()),
        ),
    )
    knowledge = Knowledge(store, memory, clock=FakeClock(T0))
    with pytest.raises(IntegrityError):
        knowledge.decide("ann", "pr_" + "f" * 32, decision="accept", reason="looks fine")
    assert store.latest_revision("ann") == 0
    with pytest.raises(IntegrityError):
        store.pending_proposal("ann", "finding:b")


def test_a_forged_new_revision_is_refused_and_reported(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    """A whole new revision, chained and digested exactly as Oh would write it: only its MAC
    (which the forger cannot compute) tells it from a real one. Without MACs verify sees no
    problem at all."""
    _accept(store, memory, "finding:a", "coral recovers")
    proposal = store.proposals("ann")[0]
    latest, head = store.head("ann")
    record = Record.parse({"name": "finding:z", "text": "forged knowledge"})
    decision = Decision("accept", "ann", "2026-11-29T13:00:00.000000Z", "ok")
    forged = dataclasses.replace(proposal, id="pr_" + "e" * 32, name="finding:z")
    reviewed, entry = accepted_version(
        forged, decision, record, author="ann", revision=latest + 1, prev_hash=head, supersedes=None
    )
    backend.sql(
        "INSERT INTO revisions (owner, revision, what, proposal_id, name, digest, made_by,"
        " made_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*entry.hashed_body().values(), entry.hash),
    )
    backend.sql(
        "INSERT INTO reviewed (owner, name, kind, content, digest, author, written_at, revision,"
        " source, decision, proposal_id, supersedes, mac)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "ann",
            reviewed.name,
            reviewed.kind,
            reviewed.content,
            reviewed.digest,
            reviewed.author,
            reviewed.written_at,
            reviewed.revision,
            canonical_text(reviewed.source.to_json()),
            canonical_text(reviewed.decision.to_json()),
            reviewed.proposal_id,
            None,
            f"{OLD.id}:{'0' * 64}",  # a MAC-shaped guess
        ),
    )
    backend.sql(
        "UPDATE knowledge_bases SET revision = ?, head_hash = ?", (entry.revision, entry.hash)
    )
    _reads_refused(store, name="finding:z", revision=2)
    with pytest.raises(IntegrityError, match="revision 2 of ann"):
        store.revisions("ann")
    assert store.record_at("ann", "finding:a", 2) is not None  # genuine rows are still served
    assert verify_knowledge(store.unchecked()).ok  # chain and digests are consistent
    problems = _mac_problems(store, backend.macs())
    assert len(problems) == 2
    assert any("revision 2 of ann carries no MAC" in p for p in problems)
    assert any("finding:z of ann at revision 2 does not match its MAC" in p for p in problems)


@pytest.mark.parametrize("table", ["reviewed", "revisions", "proposals", "packs"])
def test_a_mac_copied_from_another_row_is_refused_and_reported(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore, table: str
) -> None:
    _fill(store, memory)
    macs = sorted(_macs(backend, table))
    other = _macs(backend, "revisions")[0] if table == "packs" else macs[0]
    backend.sql(f"UPDATE {table} SET mac = ? WHERE mac = ?", (other, macs[-1]))
    (problem,) = _mac_problems(store, backend.macs())
    assert "does not match its MAC" in problem
    reads = {
        "reviewed": lambda: [store.history("ann", n) for n in ("finding:a", "finding:b")],
        "revisions": lambda: store.revisions("ann"),
        "proposals": lambda: store.proposals("ann"),
        "packs": lambda: store.installed_packs("ann"),
    }
    with pytest.raises(IntegrityError):
        reads[table]()


def test_a_mac_copied_to_another_owner_is_refused(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    """The owner is under the MAC: a genuine row and its MAC copied to another owner's
    knowledge base do not make it that owner's."""
    _accept(store, memory, "finding:a", "coral recovers")
    backend.forger()
    backend.sql("INSERT INTO knowledge_bases (owner, revision, head_hash) VALUES ('bob', 1, 'x')")
    for table in ("revisions", "reviewed"):
        columns = [c for c in _columns(backend, table) if c != "owner"]
        backend.sql(
            f"INSERT INTO {table} (owner, {', '.join(columns)})"
            f" SELECT 'bob', {', '.join(columns)} FROM {table} WHERE owner = 'ann'"
        )
    with pytest.raises(IntegrityError, match="of bob"):
        store.records_at("bob", 1)
    assert len(_mac_problems(store, backend.macs())) == 2


def _columns(backend: Backend, table: str) -> list[str]:
    if backend.kind == "postgres":
        rows = backend.sql(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_name = ? AND table_schema = current_schema() ORDER BY ordinal_position",
            (table,),
        )
    else:
        rows = [(row[1],) for row in backend.sql(f"PRAGMA table_info({table})")]
    return [row[0] for row in rows]


def test_a_removed_mac_is_refused_and_reported(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _fill(store, memory)
    backend.sql("UPDATE reviewed SET mac = NULL WHERE name = 'finding:b'")
    backend.sql("UPDATE packs SET mac = NULL")
    message = _reads_refused(store, name="finding:b", revision=2)
    assert "finding:b of ann at revision 2 carries no MAC" in message
    with pytest.raises(IntegrityError, match="pack reef-pack of ann"):
        store.installed_packs("ann")
    with pytest.raises(IntegrityError, match="pack reef-pack of ann"):  # nor installed over it
        _install(store, "other-pack", {"reef-pack": "x"})
    assert store.record_at("ann", "finding:a", 4) is not None
    problems = _mac_problems(store, backend.macs())
    assert len(problems) == 2 and all("carries no MAC" in p for p in problems)


def test_a_deleted_reviewed_version_is_reported_by_verify(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    """What no MAC can show, a row that is gone, the revision entry naming it does."""
    _accept(store, memory, "finding:a", "first")
    _accept(store, memory, "finding:a", "second")
    backend.forger()
    backend.sql("DELETE FROM reviewed WHERE revision = 2")
    served = store.record_at("ann", "finding:a", 2)
    assert served is not None and served.revision == 1  # a read cannot notice
    report = verify_knowledge(store)
    assert [(p.what, p.detail) for p in report.problems] == [
        ("drift", "finding:a at revision 2 was decided but is missing")
    ]


def test_verify_uses_the_stores_macs_by_default_and_reports_every_row(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _fill(store, memory)
    backend.sql("UPDATE reviewed SET mac = NULL")
    report = verify_knowledge(store)  # opened with MACs: checks them, never stops at one
    assert sorted(p.what for p in report.problems) == ["mac"] * 3
    assert report.records == 3  # the other checks still read every version
    assert {p.notebook_id for p in report.problems} == {"knowledge:ann"}


def test_a_value_no_genuine_write_makes_is_refused_not_a_crash(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    if backend.kind != "libsql":
        pytest.skip("only SQLite stores any type in any column")
    _accept(store, memory, "finding:a", "coral recovers")
    backend.forger()
    backend.sql("UPDATE reviewed SET author = X'00ff'")
    with pytest.raises(IntegrityError):
        store.records_at("ann", 1)
    assert len(_mac_problems(store, backend.macs())) == 1


# -- the migration of existing rows ---------------------------------------------------------------


def test_opening_with_macs_macs_existing_rows_once_and_sets_the_marker(
    backend: Backend, memory: MemoryStore
) -> None:
    plain = backend.open()
    _fill(plain, memory)
    plain.close()
    assert set(_macs(backend, "reviewed")) == {None}
    assert backend.key_store.marker(MARKER) is None
    store = backend.open(backend.macs())
    try:
        for table in ("reviewed", "revisions", "proposals", "packs"):
            assert None not in _macs(backend, table), table
        assert backend.key_store.marker(MARKER) == "2026-11-29T12:00:00.000000Z"
        assert verify_knowledge(store).ok
        assert [r.name for r in store.records_at("ann", 4)] == ["finding:a", "finding:b"]
    finally:
        store.close()


def test_once_marked_an_unmaced_row_is_never_maced_on_open(
    backend: Backend, memory: MemoryStore
) -> None:
    """After the marker is set, a row without a MAC is a forgery or damage: opening again (the
    clock moved on) leaves it without one, and reads refuse it."""
    first = backend.open(backend.macs())
    _accept(first, memory, "finding:a", "genuine")
    first.close()
    unkeyed = backend.open()  # a writer without the keys: its row carries no MAC
    _accept(unkeyed, memory, "finding:b", "forged")
    unkeyed.close()
    backend.clock.advance(days=1)
    again = backend.open(backend.macs())
    try:
        assert backend.sql("SELECT mac FROM reviewed WHERE name = 'finding:b'") == [(None,)]
        assert backend.key_store.marker(MARKER) == "2026-11-29T12:00:00.000000Z"
        with pytest.raises(IntegrityError, match="finding:b of ann at revision 2 carries no MAC"):
            again.records_at("ann", 2)
        assert again.record_at("ann", "finding:a", 2) is not None
    finally:
        again.close()


def test_the_migration_leaves_a_wrong_mac_wrong(backend: Backend, memory: MemoryStore) -> None:
    """Only rows without a MAC are MACed on the first open: a row whose MAC is wrong was
    written with MACs and altered since, and stays refused."""
    plain = backend.open()
    _accept(plain, memory, "finding:a", "coral recovers")
    plain.close()
    backend.sql("UPDATE reviewed SET mac = ?", (f"{OLD.id}:{'1' * 64}",))
    store = backend.open(backend.macs())
    try:
        with pytest.raises(IntegrityError, match="does not match"):
            store.records_at("ann", 1)
    finally:
        store.close()


# -- remac (master key rotation) -----------------------------------------------------------------


def test_remac_moves_every_row_to_the_new_key(backend: Backend, memory: MemoryStore) -> None:
    store = backend.open(backend.macs())
    _fill(store, memory)
    store.close()
    rotating = backend.open(backend.macs(MasterKeys(OLD)))
    try:
        assert remac(rotating, MasterKeys(NEW, (OLD,))) == 13
        assert rotating.macs is not None and rotating.macs.masters.current == NEW
        assert [r.name for r in rotating.records_at("ann", 4)] == ["finding:a", "finding:b"]
    finally:
        rotating.close()
    for table in ("reviewed", "revisions", "proposals", "packs"):
        assert all(m.startswith(NEW.id + ":") for m in _macs(backend, table)), table
    only_new = backend.open(backend.macs(MasterKeys(NEW)))  # the old key retired
    try:
        assert verify_knowledge(only_new).ok
        assert len(only_new.history("ann", "finding:a")) == 2
    finally:
        only_new.close()
    only_old = backend.open(backend.macs(MasterKeys(OLD)))
    try:
        with pytest.raises(IntegrityError):
            only_old.records_at("ann", 4)
    finally:
        only_old.close()


def test_remac_refuses_tampered_data_and_changes_nothing(
    backend: Backend, store: SqlKnowledgeStore, memory: MemoryStore
) -> None:
    _fill(store, memory)
    backend.forger()
    backend.sql("UPDATE proposals SET proposed_by = 'eve' WHERE name = 'finding:d'")
    before = {table: sorted(_macs(backend, table)) for table in ("reviewed", "proposals")}
    with pytest.raises(
        IntegrityError, match=r"proposal .* of ann \(finding:d\): MAC wrong"
    ) as refused:
        remac(store, MasterKeys(NEW, (OLD,)))
    assert refused.value.code == "integrity"
    assert {table: sorted(_macs(backend, table)) for table in before} == before
    assert store.macs is not None and store.macs.masters.current == OLD


def test_remac_needs_a_store_opened_with_macs(backend: Backend) -> None:
    plain = backend.open()
    try:
        with pytest.raises(OhError):
            remac(plain, MasterKeys(NEW, (OLD,)))
    finally:
        plain.close()


# -- without macs nothing changes -----------------------------------------------------------------


def test_without_macs_nothing_is_written_or_checked(backend: Backend, memory: MemoryStore) -> None:
    plain = backend.open()
    try:
        _fill(plain, memory)
        for table in ("reviewed", "revisions", "proposals", "packs"):
            assert set(_macs(backend, table)) == {None}, table
        backend.sql("UPDATE reviewed SET mac = 'anything'")
        assert [r.name for r in plain.records_at("ann", 4)] == ["finding:a", "finding:b"]
        assert verify_knowledge(plain).ok  # no MACs given: none checked
        assert backend.key_store.marker(MARKER) is None
    finally:
        plain.close()


def test_verify_with_macs_on_a_store_that_keeps_none_is_a_typed_error() -> None:
    from oh.storage.memory import InMemoryKnowledgeStore

    with pytest.raises(OhError):
        verify_knowledge(
            InMemoryKnowledgeStore(), macs=KnowledgeMacs(MasterKeys(OLD), _NoMarkers())
        )


class _NoMarkers:
    def marker(self, name: str) -> str | None:
        return None

    def mark(self, name: str, value: str) -> None:
        raise AssertionError("not marked here")


# -- the conformance suites hold with MACs on -----------------------------------------------------


class MacedHarness(PublishedByReview):
    def __init__(self, backend: Backend, directory: Path) -> None:
        self.backend = backend
        self.memory_path = directory / "memory.db"

    def open_memory(self) -> MemoryStore:
        return SqliteMemoryStore(self.memory_path)

    def open_knowledge(self) -> KnowledgeStore:
        return self.backend.open(self.backend.macs())

    def execute_knowledge(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.backend.sql(sql, params)


# -- the tamper suite's knowledge forgeries --------------------------------------------------------


def test_the_tamper_suite_finds_every_knowledge_forgery(backend: Backend, tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "stress"))
    try:
        import tamper
    finally:
        sys.path.remove(str(ROOT / "stress"))
    summary = tamper.run_knowledge(
        tamper.KnowledgeTarget(backend.kind, backend.location, str(tmp_path / "tamper-keys.db")),
        trials=60,
        seed=7,
    )
    assert summary["ok"], summary
    assert summary["alterations"] == 60
    assert summary["verify_missed"] == 0 and summary["read_served_forgery"] == 0


# -- what a MAC covers ----------------------------------------------------------------------------

_VALUE = st.one_of(
    st.none(),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
)


@given(data=st.data())
@settings(max_examples=300, deadline=None)
def test_a_mac_is_the_master_keys_mac_of_the_rows_rfc_8785_form(data: st.DataObject) -> None:
    """The one definition: ``MasterKeys.mac`` under the kind's purpose, over the RFC 8785 form
    (``canonical_text``) of the row's columns by name, whatever the fast path does."""
    kind = data.draw(st.sampled_from(KINDS))
    values = data.draw(st.tuples(*[_VALUE] * len(kind.columns)))
    macs = KnowledgeMacs(MasterKeys(OLD), _NoMarkers())
    expected = MasterKeys(OLD).mac(
        kind.purpose, canonical_text(dict(zip(kind.columns, values, strict=True))).encode()
    )
    assert macs.mac(kind, values) == expected
    assert macs.problem(kind, values, expected) is None
    other = dataclasses.replace(kind, purpose=kind.purpose + b"x")
    assert macs.problem(other, values, expected) == "wrong"  # each kind its own purpose


def test_a_row_json_cannot_carry_has_no_mac_that_matches() -> None:
    macs = KnowledgeMacs(MasterKeys(OLD), _NoMarkers())
    (reviewed,) = [k for k in KINDS if k.table == "reviewed"]
    values = ("ann", "finding:a", "finding", "{}", "d", "ann", "t", 1, "{}", "{}", None, None)
    mac = macs.mac(reviewed, values)
    for bad in ("\ud800", b"bytes", 1.5, 2**60, True):
        forged = (*values[:3], bad, *values[4:])
        assert macs.problem(reviewed, forged, mac) == "wrong"
        with pytest.raises(IntegrityError):
            macs.check(reviewed, forged, mac)
    assert macs.problem(reviewed, values[:-1], mac) == "wrong"  # a column short
    assert macs.problem(reviewed, values, None) == "missing"
    assert macs.problem(reviewed, values, 42) == "wrong"


def test_the_purge_role_gains_nothing_on_postgresql(tmp_path: Path, memory: MemoryStore) -> None:
    """Migration 0005 adds columns and triggers, no function and no grant: the purge role can
    neither read a MAC nor set one."""
    import psycopg

    from oh.testing.postgres_cluster import fresh_schema, shared_cluster

    with fresh_schema(shared_cluster()) as schema:
        backend = Backend("postgres", schema.url(), tmp_path / "keys.db")
        store = backend.open(backend.macs())
        try:
            _accept(store, memory, "finding:a", "coral recovers")
        finally:
            store.close()
            backend.key_store.close()
        with psycopg.connect(schema.purge_url, autocommit=True) as conn:
            for sql in ("SELECT mac FROM reviewed", "UPDATE reviewed SET mac = NULL"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(sql)
