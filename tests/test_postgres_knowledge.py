"""Reviewed knowledge on PostgreSQL beyond the suites (its rows in tests/test_conformance.py):
concurrent decisions from several connections."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from harnesses import PostgresReviewHarness
from oh.errors import AlreadyExists
from oh.services.knowledge import Knowledge
from oh.testing.knowledge import (
    SOURCE,
)
from oh.testing.lifecycle import FakeClock
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.verify import verify_knowledge


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


def test_concurrent_decisions_make_each_revision_once(schema: Schema) -> None:
    """Reviewers on their own connections accept different proposals of one owner, and race
    to decide the same one: revisions stay contiguous and each proposal is decided once."""
    harness = PostgresReviewHarness(schema)
    setup_store, memory = harness.open_knowledge(), harness.open_memory()
    knowledge = Knowledge(setup_store, memory, clock=FakeClock())
    proposals = [
        knowledge.propose("ann", source=SOURCE, record={"name": f"finding:f{i}", "text": str(i)})
        for i in range(12)
    ]
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def reviewer() -> None:
        store = harness.open_knowledge()
        own = Knowledge(store, memory, clock=FakeClock())
        start.wait()
        try:
            for proposal in proposals:
                try:
                    own.decide("ann", proposal.id, decision="accept", reason="checked")
                    outcome = "accepted"
                except AlreadyExists:
                    outcome = "already"
                with lock:
                    outcomes.append(outcome)
        finally:
            store.close()

    threads = [threading.Thread(target=reviewer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert outcomes.count("accepted") == 12
        assert outcomes.count("already") == 36
        assert [r.revision for r in setup_store.revisions("ann")] == list(range(1, 13))
        assert verify_knowledge(setup_store).ok
    finally:
        setup_store.close()
        memory.close()


def test_reviewed_knowledge_cannot_be_truncated(schema: Schema) -> None:
    harness = PostgresReviewHarness(schema)
    harness.open_knowledge().close()
    for table in ("reviewed", "revisions"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            harness.execute_knowledge(f"TRUNCATE {table} CASCADE")


# -- packs (SPEC §8) ---------------------------------------------------------------------------


def test_packs_install_as_revisions_and_read_at_any_revision(schema: Schema) -> None:
    from oh.profiles import SHIPPED_PACKS, Profiles, shipped_pack

    harness = PostgresReviewHarness(schema)
    store, memory = harness.open_knowledge(), harness.open_memory()
    try:
        profiles = Profiles(store, clock=FakeClock())
        for name in sorted(SHIPPED_PACKS):
            assert profiles.install("ann", shipped_pack(name)).changed
        Knowledge(store, memory, clock=FakeClock()).decide(
            "ann",
            Knowledge(store, memory, clock=FakeClock())
            .propose("ann", source=SOURCE, record={"name": "lead:a", "text": "t"})
            .id,
            decision="accept",
            reason="ok",
        )
        assert [p.name for p in store.installed_packs("ann")] == sorted(SHIPPED_PACKS)
        assert [p.name for p in store.installed_packs("ann", 1)] == sorted(SHIPPED_PACKS)[:1]
        assert [p.revision for p in store.pack_history("ann")] == [1, 2, 3]
        assert [r.what for r in store.revisions("ann")] == ["pack", "pack", "pack", "decision"]
        assert not profiles.install("ann", shipped_pack(sorted(SHIPPED_PACKS)[0])).changed
        assert verify_knowledge(store).ok
    finally:
        store.close()
        memory.close()


def test_an_install_on_a_changed_base_writes_nothing(schema: Schema) -> None:
    store = PostgresReviewHarness(schema).open_knowledge()
    try:
        args: dict[str, Any] = {
            "name": "reef",
            "version": "1.0.0",
            "digest": "d" * 64,
            "content": "{}",
            "made_by": "ann",
            "made_at": "2026-11-29T12:00:00.000000Z",
        }
        assert store.install_pack("ann", expected={"other": "x"}, **args) is None
        assert store.owners() == []
        assert store.latest_revision("ann") == 0
        installed = store.install_pack("ann", expected={}, **args)
        assert installed is not None and installed.revision == 1
        assert store.install_pack("ann", expected={}, **args) is None
        assert store.latest_revision("ann") == 1
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            PostgresReviewHarness(schema).execute_knowledge("DELETE FROM packs")
    finally:
        store.close()
