"""Reviewed-knowledge conformance suites (docs/design.md).

``KnowledgeSourceConformance`` holds for anything a host plugs in as a ``KnowledgeSource``
(revisions read exactly as they were, forever). ``ReviewConformance`` holds for Oh's own
knowledge base with review: proposals, decisions, pins, read-only views and conflicts.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oh.core.canonical import canonical_text
from oh.core.records import Record
from oh.core.reviewed import Decision, ReviewedRecord, Source
from oh.errors import AlreadyExists, Forbidden, IntegrityError, InvalidArgument, NotFound, OhError
from oh.services.knowledge import Knowledge
from oh.services.notebooks import Notebooks
from oh.services.view import view_of
from oh.storage.base import KnowledgeSource, KnowledgeStore, MemoryStore
from oh.testing.declared import ran
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import add, replace, write
from oh.testing.tampering import require_sql

__all__ = [
    "KnowledgeSourceConformance",
    "ReviewConformance",
    "ReviewHarness",
    "SourceHarness",
    "publish_by_review",
]

SOURCE = {
    "document": "hughes-2018-coral-recovery.pdf",
    "passage": "Recovery of coral cover took at least 10 years after the 1998 bleaching.",
    "locator": {"page": 4, "section": "3.2"},
}


class SourceHarness(Protocol):
    def open(self) -> KnowledgeSource: ...

    def publish(self, source: KnowledgeSource, owner: str, record: dict[str, Any]) -> int:
        """Make ``record`` reviewed knowledge of ``owner`` at a new revision; return it."""
        ...


class ReviewHarness(Protocol):
    def open_memory(self) -> MemoryStore: ...

    def open_knowledge(self) -> KnowledgeStore: ...

    def execute_knowledge(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Raw SQL on the knowledge database, outside Oh: for what the database itself
        refuses. A harness with no SQL database leaves it out; the tests that need it skip."""
        ...


def publish_by_review(
    knowledge: KnowledgeStore, memory: MemoryStore, owner: str, record: dict[str, Any]
) -> int:
    """``SourceHarness.publish`` for Oh's own knowledge store: propose ``record`` and accept it,
    as a reviewer would; return its revision."""
    review = Knowledge(knowledge, memory, clock=FakeClock())
    proposal = review.propose(owner, source=SOURCE, record=record)
    decided = review.decide(owner, proposal.id, decision="accept", reason="ok")
    assert decided.record is not None
    return decided.record.revision


def _digest(record: dict[str, Any]) -> str:
    return Record.parse(record).digest


def _together(work: Callable[[int], None], count: int) -> None:
    """Run ``work(0)`` … ``work(count - 1)`` on threads of their own, and wait for all."""
    threads = [threading.Thread(target=work, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a proposer is stuck"


class KnowledgeSourceConformance:
    @pytest.fixture
    def harness(self) -> SourceHarness:
        raise NotImplementedError("a test module provides the harness fixture")

    @pytest.fixture
    def source(
        self, harness: SourceHarness, request: pytest.FixtureRequest
    ) -> Iterator[KnowledgeSource]:
        source = harness.open()
        ran(request, KnowledgeSourceConformance, source)
        yield source
        close = getattr(source, "close", None)
        if close is not None:
            close()

    def test_an_owner_without_knowledge_is_at_revision_zero(self, source: KnowledgeSource) -> None:
        assert source.latest_revision("ann") == 0
        assert source.records_at("ann", 0) == []

    def test_each_publication_is_the_next_revision(
        self, harness: SourceHarness, source: KnowledgeSource
    ) -> None:
        first = harness.publish(source, "ann", {"name": "finding:a", "text": "one"})
        second = harness.publish(source, "ann", {"name": "finding:b", "text": "two"})
        assert (first, second) == (1, 2)
        assert source.latest_revision("ann") == 2

    def test_a_revision_reads_exactly_as_it_was_after_later_corrections(
        self, harness: SourceHarness, source: KnowledgeSource
    ) -> None:
        harness.publish(source, "ann", {"name": "finding:a", "text": "ten years"})
        harness.publish(source, "ann", {"name": "finding:b", "text": "other"})
        before = source.records_at("ann", 2)
        harness.publish(source, "ann", {"name": "finding:a", "text": "twelve years"})
        assert source.records_at("ann", 2) == before
        assert [r.name for r in before] == ["finding:a", "finding:b"]
        old = source.record_at("ann", "finding:a", 2)
        new = source.record_at("ann", "finding:a", 3)
        assert old is not None
        assert new is not None
        assert old.digest == _digest({"name": "finding:a", "text": "ten years"})
        assert new.digest == _digest({"name": "finding:a", "text": "twelve years"})

    def test_a_record_is_not_in_view_before_its_revision(
        self, harness: SourceHarness, source: KnowledgeSource
    ) -> None:
        harness.publish(source, "ann", {"name": "finding:a", "text": "one"})
        harness.publish(source, "ann", {"name": "finding:b", "text": "two"})
        assert source.record_at("ann", "finding:b", 1) is None
        assert [r.name for r in source.records_at("ann", 1)] == ["finding:a"]

    @pytest.mark.parametrize("revision", [-1, 2])
    def test_a_revision_that_does_not_exist_is_not_found(
        self, harness: SourceHarness, source: KnowledgeSource, revision: int
    ) -> None:
        harness.publish(source, "ann", {"name": "finding:a", "text": "one"})
        with pytest.raises(NotFound):
            source.records_at("ann", revision)

    def test_owners_never_see_each_others_knowledge(
        self, harness: SourceHarness, source: KnowledgeSource
    ) -> None:
        harness.publish(source, "ann", {"name": "finding:a", "text": "ann's"})
        assert source.latest_revision("bob") == 0
        assert source.records_at("bob", 0) == []
        assert source.record_at("bob", "finding:a", 0) is None

    def test_every_reviewed_record_carries_source_and_decision(
        self, harness: SourceHarness, source: KnowledgeSource
    ) -> None:
        harness.publish(source, "ann", {"name": "finding:a", "text": "one"})
        (record,) = source.records_at("ann", 1)
        body = record.to_json()
        assert body["origin"] == "reviewed"
        assert set(body["source"]) == {"document", "passage", "locator"}
        assert set(body["decision"]) == {"decision", "by", "at", "reason"}
        assert body["revision"] == 1

    def test_reading_at_every_revision_matches_a_replay_up_to_it(
        self, harness: SourceHarness
    ) -> None:
        names = st.sampled_from(["finding:a", "finding:b", "study:c", "method:d"])
        texts = st.text(min_size=1, max_size=20).filter(str.strip)  # reviewed text is never blank
        steps = st.lists(st.tuples(names, texts), max_size=12)

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(steps)
        def check(published: list[tuple[str, str]]) -> None:
            owner = f"owner-{secrets.token_hex(8)}"  # examples share one database
            source = harness.open()
            try:
                model: list[dict[str, str]] = [{}]
                for name, text in published:
                    harness.publish(source, owner, {"name": name, "text": text})
                    model.append({**model[-1], name: _digest({"name": name, "text": text})})
                assert source.latest_revision(owner) == len(published)
                for revision, expected in enumerate(model):
                    got = {r.name: r.digest for r in source.records_at(owner, revision)}
                    assert got == expected
            finally:
                close = getattr(source, "close", None)
                if close is not None:
                    close()

        check()


class ReviewConformance:
    @pytest.fixture
    def harness(self) -> ReviewHarness:
        raise NotImplementedError("a backend's test module provides the harness fixture")

    @pytest.fixture
    def memory(self, harness: ReviewHarness) -> Iterator[MemoryStore]:
        store = harness.open_memory()
        yield store
        store.close()

    @pytest.fixture
    def store(
        self, harness: ReviewHarness, request: pytest.FixtureRequest
    ) -> Iterator[KnowledgeStore]:
        store = harness.open_knowledge()
        ran(request, ReviewConformance, store)
        yield store
        store.close()

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def knowledge(self, store: KnowledgeStore, memory: MemoryStore, clock: FakeClock) -> Knowledge:
        return Knowledge(store, memory, clock=clock)

    @pytest.fixture
    def notebooks(self, memory: MemoryStore, store: KnowledgeStore, clock: FakeClock) -> Notebooks:
        return Notebooks(memory, clock=clock, knowledge=store)

    def _accepted(self, knowledge: Knowledge, owner: str, record: dict[str, Any]) -> int:
        proposal = knowledge.propose(owner, source=SOURCE, record=record)
        decided = knowledge.decide(owner, proposal.id, decision="accept", reason="checked")
        assert decided.record is not None
        return decided.record.revision

    # -- proposals ------------------------------------------------------------------------

    def test_a_proposed_note_keeps_a_copy_that_survives_the_notebook(
        self, knowledge: Knowledge, notebooks: Notebooks, memory: MemoryStore, clock: FakeClock
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(
            memory,
            notebook.id,
            0,
            "r-1",
            add("finding:threshold", "bleaching at 29.4C"),
            now=clock(),
            author="agent:run-1",
        )
        proposal = knowledge.propose(
            "ann", source=SOURCE, notebook=notebook.id, name="finding:threshold"
        )
        stored = memory.record(notebook.id, "finding:threshold")
        assert stored is not None
        assert proposal.digest == stored.digest
        assert proposal.note == {
            "notebook": notebook.id,
            "name": "finding:threshold",
            "author": "agent:run-1",
            "version": 1,
        }
        notebooks.forget(notebook.id, "ann")
        decided = knowledge.decide("ann", proposal.id, decision="accept", reason="matches p.4")
        assert decided.record is not None
        assert decided.record.digest == stored.digest
        assert decided.record.verified_content()["text"] == "bleaching at 29.4C"

    @pytest.mark.parametrize(
        "source",
        [
            None,
            {},
            {**SOURCE, "passage": ""},
            {**SOURCE, "passage": "   "},
            {key: value for key, value in SOURCE.items() if key != "document"},
            {key: value for key, value in SOURCE.items() if key != "passage"},
            {key: value for key, value in SOURCE.items() if key != "locator"},
            {**SOURCE, "locator": {"chapter": 2}},
            {**SOURCE, "locator": {"page": -1}},
            {**SOURCE, "extra": 1},
            {**SOURCE, "passage": "x" * 4001},
        ],
    )
    def test_a_proposal_without_a_complete_source_is_invalid(
        self, knowledge: Knowledge, store: KnowledgeStore, source: Any
    ) -> None:
        with pytest.raises(InvalidArgument):
            knowledge.propose("ann", source=source, record={"name": "finding:a", "text": "x"})
        assert store.proposals("ann") == []

    def test_a_proposal_is_either_a_note_or_a_new_record(self, knowledge: Knowledge) -> None:
        with pytest.raises(InvalidArgument):
            knowledge.propose("ann", source=SOURCE)
        with pytest.raises(InvalidArgument):
            knowledge.propose(
                "ann",
                source=SOURCE,
                notebook="nb_x",
                name="note:a",
                record={"name": "note:a", "text": "x"},
            )
        with pytest.raises(InvalidArgument):
            knowledge.propose("ann", source=SOURCE, record={"name": "Bad Name", "text": "x"})

    def test_only_the_notebooks_owner_can_propose_its_notes(
        self, knowledge: Knowledge, notebooks: Notebooks, memory: MemoryStore, clock: FakeClock
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(memory, notebook.id, 0, "r-1", add("note:a"), now=clock())
        with pytest.raises(Forbidden):
            knowledge.propose("bob", source=SOURCE, notebook=notebook.id, name="note:a")
        with pytest.raises(NotFound):
            knowledge.propose("ann", source=SOURCE, notebook=notebook.id, name="note:missing")

    @pytest.mark.parametrize("text", ["", "   ", "\n\t "])
    def test_a_proposal_with_empty_text_is_refused(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
        text: str,
    ) -> None:
        with pytest.raises(InvalidArgument) as caught:
            knowledge.propose("ann", source=SOURCE, record={"name": "finding:a", "text": text})
        assert caught.value.details["rule"] == "reviewed.text"
        notebook = notebooks.open("ann", "doc", "run-1")
        write(memory, notebook.id, 0, "r-1", add("lead:blank", text), now=clock())
        with pytest.raises(InvalidArgument):
            knowledge.propose("ann", source=SOURCE, notebook=notebook.id, name="lead:blank")
        assert store.proposals("ann") == []

    # -- one pending proposal per name ----------------------------------------------------

    def test_proposing_the_same_content_while_it_is_pending_answers_the_pending_proposal(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
    ) -> None:
        record = {"name": "finding:a", "text": "ten years"}
        first = knowledge.propose("ann", source=SOURCE, record=record)
        clock.advance(minutes=1)
        again = knowledge.propose("ann", source=dict(SOURCE), record=dict(record))
        assert again == first
        notebook = notebooks.open("ann", "doc", "run-1")
        write(memory, notebook.id, 0, "r-1", add("lead:a", "methods missing"), now=clock())
        from_note = knowledge.propose("ann", source=SOURCE, notebook=notebook.id, name="lead:a")
        repeat = knowledge.propose("ann", source=SOURCE, notebook=notebook.id, name="lead:a")
        assert repeat.id == from_note.id
        assert sorted(p.id for p in store.proposals("ann")) == sorted([first.id, from_note.id])
        # ``submit`` says which call made the proposal (HTTP answers 201, then 200).
        assert knowledge.submit("ann", source=SOURCE, record=record).created is False

    @pytest.mark.parametrize("other", ["content", "source", "origin"])
    def test_another_proposal_for_a_pending_name_is_already_exists_naming_it(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
        other: str,
    ) -> None:
        record = {"name": "lead:a", "text": "methods missing"}
        pending = knowledge.propose("ann", source=SOURCE, record=record)
        arguments: dict[str, Any] = {"source": SOURCE, "record": record}
        if other == "content":
            arguments["record"] = {**record, "text": "other"}
        elif other == "source":
            arguments["source"] = {**SOURCE, "locator": "p. 5"}
        else:  # the same content, but from a note rather than as a new record
            notebook = notebooks.open("ann", "doc", "run-1")
            write(memory, notebook.id, 0, "r-1", add("lead:a", "methods missing"), now=clock())
            arguments = {"source": SOURCE, "notebook": notebook.id, "name": "lead:a"}
        with pytest.raises(AlreadyExists) as caught:
            knowledge.propose("ann", **arguments)
        assert caught.value.details == {"proposal_id": pending.id, "name": "lead:a"}
        assert pending.id in caught.value.message
        assert [p.id for p in store.proposals("ann")] == [pending.id]

    @pytest.mark.parametrize("decision", ["accept", "reject"])
    def test_once_decided_a_name_can_be_proposed_again(
        self, knowledge: Knowledge, store: KnowledgeStore, decision: str
    ) -> None:
        record = {"name": "finding:a", "text": "ten years"}
        first = knowledge.propose("ann", source=SOURCE, record=record)
        knowledge.decide("ann", first.id, decision=decision, reason="decided")
        again = knowledge.submit("ann", source=SOURCE, record=record)
        assert again.created and again.proposal.id != first.id
        assert store.pending_proposal("ann", "finding:a") == again.proposal
        assert knowledge.submit("bob", source=SOURCE, record=record).created  # per owner

    def test_the_database_keeps_one_pending_proposal_per_name(
        self, harness: ReviewHarness, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        require_sql(harness, "execute_knowledge")
        pending = knowledge.propose("ann", source=SOURCE, record={"name": "finding:a", "text": "x"})
        sql = (
            "INSERT INTO proposals (id, owner, proposed_by, proposed_at, name, content, digest,"
            " source, state) VALUES (?, 'ann', 'ann', ?, 'finding:a', ?, ?, ?, 'pending')"
        )
        row = (
            "pr_" + "1" * 32,
            pending.proposed_at,
            pending.content,
            pending.digest,
            canonical_text(pending.source.to_json()),
        )
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            harness.execute_knowledge(sql, row)
        assert [p.id for p in store.proposals("ann")] == [pending.id]
        knowledge.decide("ann", pending.id, decision="reject", reason="no")
        harness.execute_knowledge(sql, row)  # decided: the name is free again
        if getattr(store, "macs", None) is None:
            assert store.pending_proposal("ann", "finding:a") is not None
        else:  # a store that MACs its rows refuses one written outside Oh when it reads it
            with pytest.raises(IntegrityError, match="carries no MAC"):
                store.pending_proposal("ann", "finding:a")

    @pytest.mark.parametrize("same", [True, False], ids=["same-content", "other-content"])
    def test_concurrent_proposals_for_one_name_leave_one_pending(
        self, harness: ReviewHarness, memory: MemoryStore, clock: FakeClock, same: bool
    ) -> None:
        """Proposers on their own connections (as separate processes would be) propose one
        name at once: the database lets one proposal through; the same content answers it,
        other content is refused naming it."""
        proposers = 6
        start = threading.Barrier(proposers)
        outcomes: list[Any] = [None] * proposers

        def propose(index: int) -> None:
            store = harness.open_knowledge()
            try:
                own = Knowledge(store, memory, clock=clock)
                text = "ten years" if same else f"version {index}"
                start.wait()
                outcomes[index] = own.propose(
                    "ann", source=SOURCE, record={"name": "finding:a", "text": text}
                )
            except OhError as exc:
                outcomes[index] = exc
            finally:
                store.close()

        _together(propose, proposers)
        check = harness.open_knowledge()
        try:
            stored = check.proposals("ann")
        finally:
            check.close()
        assert len(stored) == 1, [p.id for p in stored]
        answered = [o for o in outcomes if not isinstance(o, OhError)]
        assert {o.id for o in answered} == {stored[0].id}
        if same:
            assert len(answered) == proposers, outcomes
        else:
            assert len(answered) == 1
            refused = [o for o in outcomes if isinstance(o, OhError)]
            assert all(isinstance(o, AlreadyExists) for o in refused), refused
            assert {o.details["proposal_id"] for o in refused} == {stored[0].id}

    # -- decisions ------------------------------------------------------------------------

    @pytest.mark.parametrize("text", ["", "   ", "\n"])
    def test_accepting_a_record_with_empty_text_is_refused_and_changes_nothing(
        self, knowledge: Knowledge, store: KnowledgeStore, text: str
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "ten years"}
        )
        with pytest.raises(InvalidArgument) as caught:
            knowledge.decide(
                "ann",
                proposal.id,
                decision="accept",
                reason="cleared the text",
                record={"name": "finding:a", "text": text},
            )
        assert caught.value.details["rule"] == "reviewed.text"
        assert store.proposal(proposal.id).state == "pending"
        assert store.latest_revision("ann") == 0

    def test_the_store_never_accepts_a_record_without_text(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "ten years"}
        )
        decision = Decision("accept_with_edits", "ann", "2026-11-29T12:00:00.000000Z", "edit")
        with pytest.raises(InvalidArgument):
            store.accept(
                proposal.id, decision, Record.parse({"name": "finding:a", "text": " "}), "ann"
            )
        assert store.proposal(proposal.id).state == "pending"
        assert (store.latest_revision("ann"), store.revisions("ann")) == (0, [])

    def test_accepting_creates_the_next_revision_with_source_and_decision(
        self, knowledge: Knowledge, store: KnowledgeStore, clock: FakeClock
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "ten years"}
        )
        clock.advance(minutes=2)
        decided = knowledge.decide("ann", proposal.id, decision="accept", reason="cited p.4")
        record = decided.record
        assert record is not None
        assert record.revision == store.latest_revision("ann") == 1
        assert record.source == Source.parse(SOURCE)
        assert record.decision == Decision(
            "accept", "ann", "2026-11-29T12:02:00.000000Z", "cited p.4"
        )
        assert decided.proposal.state == "accepted"
        assert decided.proposal.revision == 1
        assert decided.to_json()["revision"] == 1

    def test_accepting_with_edits_records_the_edited_content(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "ten years"}
        )
        edited = {"name": "finding:a", "text": "at least ten years", "supports": ["study:b"]}
        decided = knowledge.decide(
            "ann", proposal.id, decision="accept", reason="sharper", record=edited
        )
        assert decided.record is not None
        assert decided.record.decision.decision == "accept_with_edits"
        assert decided.record.digest == _digest(edited)
        assert store.proposal(proposal.id).digest == _digest(
            {"name": "finding:a", "text": "ten years"}
        )

    def test_an_edit_cannot_rename_the_record(self, knowledge: Knowledge) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "x"}
        )
        with pytest.raises(InvalidArgument):
            knowledge.decide(
                "ann",
                proposal.id,
                decision="accept",
                reason="r",
                record={"name": "finding:b", "text": "x"},
            )

    def test_a_rejection_stays_in_history_and_makes_no_revision(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "guess"}
        )
        decided = knowledge.decide("ann", proposal.id, decision="reject", reason="no evidence")
        assert decided.record is None
        assert store.latest_revision("ann") == 0
        (kept,) = store.proposals("ann")
        assert kept.state == "rejected"
        assert kept.decision is not None
        assert (kept.decision.decision, kept.decision.reason) == ("reject", "no evidence")
        # The decision stays, the text goes (docs/design.md, "Proposals").
        assert kept.discarded and (kept.content, kept.digest) == ("", "")
        assert (kept.name, kept.source) == ("finding:a", proposal.source)

    @pytest.mark.parametrize("first", ["accept", "reject"])
    @pytest.mark.parametrize("second", ["accept", "reject"])
    def test_deciding_twice_is_refused(
        self, knowledge: Knowledge, store: KnowledgeStore, first: str, second: str
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "x"}
        )
        knowledge.decide("ann", proposal.id, decision=first, reason="first")
        with pytest.raises(AlreadyExists):
            knowledge.decide("ann", proposal.id, decision=second, reason="second")
        assert store.latest_revision("ann") == (1 if first == "accept" else 0)
        assert store.proposal(proposal.id).decision.reason == "first"  # type: ignore[union-attr]

    def test_the_database_refuses_to_change_a_decided_proposal(
        self, harness: ReviewHarness, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "x"}
        )
        require_sql(harness, "execute_knowledge")
        knowledge.decide("ann", proposal.id, decision="reject", reason="no")
        with pytest.raises(Exception, match=r"(?i)already decided"):
            harness.execute_knowledge(
                "UPDATE proposals SET state = 'pending', decision = NULL WHERE id = ?",
                (proposal.id,),
            )
        assert store.proposal(proposal.id).state == "rejected"

    def test_reviewed_knowledge_is_append_only_in_the_database(
        self, harness: ReviewHarness, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        require_sql(harness, "execute_knowledge")
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "true"})
        with pytest.raises(Exception, match=r"(?i)append-only"):
            harness.execute_knowledge("UPDATE reviewed SET content = '{}'")
        with pytest.raises(Exception, match=r"(?i)append-only"):
            harness.execute_knowledge("DELETE FROM reviewed")
        with pytest.raises(Exception, match=r"(?i)append-only"):
            harness.execute_knowledge("DELETE FROM revisions")
        assert store.records_at("ann", 1)[0].verified_content()["text"] == "true"

    def test_a_reviewed_record_needs_a_source_and_a_decision(self) -> None:
        with pytest.raises(InvalidArgument):
            ReviewedRecord("finding:a", "finding", "{}", "d", "ann", "t", 1, None, None)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            ReviewedRecord(
                "finding:a",
                "finding",
                "{}",
                "d",
                "ann",
                "t",
                1,
                Source.parse(SOURCE),
                Decision("reject", "ann", "t", "no"),
            )

    def test_bad_decisions_are_typed_errors(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        proposal = knowledge.propose(
            "ann", source=SOURCE, record={"name": "finding:a", "text": "x"}
        )
        with pytest.raises(NotFound):
            knowledge.decide("ann", "pr_missing", decision="accept", reason="r")
        with pytest.raises(InvalidArgument):
            knowledge.decide("ann", proposal.id, decision="maybe", reason="r")
        with pytest.raises(InvalidArgument):
            knowledge.decide("ann", proposal.id, decision="accept", reason="")
        with pytest.raises(InvalidArgument):
            knowledge.decide(
                "ann",
                proposal.id,
                decision="reject",
                reason="r",
                record={"name": "finding:a", "text": "y"},
            )
        with pytest.raises(Forbidden):
            knowledge.decide("bob", proposal.id, decision="accept", reason="r")
        assert store.proposal(proposal.id).state == "pending"

    # -- corrections ----------------------------------------------------------------------

    def test_a_correction_supersedes_and_both_stay_in_history(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        first = self._accepted(knowledge, "ann", {"name": "finding:a", "text": "ten years"})
        second = self._accepted(knowledge, "ann", {"name": "finding:a", "text": "twelve years"})
        history = store.history("ann", "finding:a")
        assert [(r.revision, r.supersedes) for r in history] == [(first, None), (second, first)]
        old = store.record_at("ann", "finding:a", first)
        assert old is not None
        assert old.verified_content()["text"] == "ten years"

    def test_a_correction_record_links_to_what_it_corrects(
        self, knowledge: Knowledge, store: KnowledgeStore
    ) -> None:
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "ten years"})
        self._accepted(
            knowledge,
            "ann",
            {"name": "correction:a-1", "text": "twelve, see erratum", "contradicts": ["finding:a"]},
        )
        names = [r.name for r in store.records_at("ann", 2)]
        assert names == ["correction:a-1", "finding:a"]

    # -- pinned views ---------------------------------------------------------------------

    def test_a_notebook_sees_its_pinned_revision_and_nothing_newer(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
    ) -> None:
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "one"})
        pinned = notebooks.open("ann", "doc", "run-1")
        assert pinned.pinned_revision == 1
        self._accepted(knowledge, "ann", {"name": "finding:b", "text": "two"})
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "one, corrected"})
        view = view_of(memory, store, memory.notebook(pinned.id))
        assert sorted(view.reviewed) == ["finding:a"]
        assert view.reviewed["finding:a"].digest == _digest({"name": "finding:a", "text": "one"})
        fresh = notebooks.open("ann", "doc", "run-2")
        assert fresh.pinned_revision == 3
        assert sorted(view_of(memory, store, fresh).reviewed) == ["finding:a", "finding:b"]
        older = notebooks.open("ann", "doc", "run-3", pin=0)
        assert view_of(memory, store, older).reviewed == {}

    def test_a_notebook_sees_only_its_owners_knowledge(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
    ) -> None:
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "ann's"})
        bobs = notebooks.open("bob", "doc", "run-1")
        assert bobs.pinned_revision == 0
        assert view_of(memory, store, bobs).reviewed == {}

    def test_writing_a_note_named_like_a_reviewed_record_never_changes_it(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
    ) -> None:
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "reviewed"})
        notebook = notebooks.open("ann", "doc", "run-1")
        write(memory, notebook.id, 0, "r-1", add("finding:a", "agent's guess"), now=clock())
        write(memory, notebook.id, 1, "r-2", replace("finding:a", "another guess"), now=clock())
        reviewed = store.record_at("ann", "finding:a", 1)
        assert reviewed is not None
        assert reviewed.verified_content()["text"] == "reviewed"
        assert store.latest_revision("ann") == 1
        view = view_of(memory, store, memory.notebook(notebook.id))
        assert set(view.notes) == set(view.reviewed) == {"finding:a"}

    # -- conflicts ------------------------------------------------------------------------

    def test_a_note_and_a_reviewed_record_with_one_name_and_two_digests_conflict(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
    ) -> None:
        self._accepted(knowledge, "ann", {"name": "finding:a", "text": "reviewed"})
        self._accepted(knowledge, "ann", {"name": "finding:b", "text": "agreed"})
        notebook = notebooks.open("ann", "doc", "run-1")
        write(
            memory,
            notebook.id,
            0,
            "r-1",
            add("finding:a", "disagrees"),
            add("finding:b", "agreed"),
            now=clock(),
        )
        view = view_of(memory, store, memory.notebook(notebook.id))
        assert view.conflicts == {
            ("note", "finding:a"): ["finding:a"],
            ("reviewed", "finding:a"): ["finding:a"],
        }

    @pytest.mark.parametrize("declared_by", ["note", "reviewed"])
    def test_an_explicit_contradiction_shows_on_both_sides(
        self,
        knowledge: Knowledge,
        notebooks: Notebooks,
        memory: MemoryStore,
        store: KnowledgeStore,
        clock: FakeClock,
        declared_by: str,
    ) -> None:
        if declared_by == "reviewed":
            self._accepted(
                knowledge,
                "ann",
                {"name": "finding:a", "text": "ten years", "contradicts": ["lead:b"]},
            )
            note = add("lead:b", "five years")
        else:
            self._accepted(knowledge, "ann", {"name": "finding:a", "text": "ten years"})
            note = add("lead:b", "five years", contradicts=["finding:a"])
        notebook = notebooks.open("ann", "doc", "run-1")
        write(memory, notebook.id, 0, "r-1", note, now=clock())
        view = view_of(memory, store, memory.notebook(notebook.id))
        assert view.conflicts == {
            ("note", "lead:b"): ["finding:a"],
            ("reviewed", "finding:a"): ["lead:b"],
        }
        assert len(list(view.entries())) == 2
