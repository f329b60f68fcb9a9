"""The store-level conformance suite (docs/design.md storage): every ``MemoryStore`` passes it.

Subclass ``MemoryStoreConformance`` in a backend's test module and override the ``harness``
fixture with a ``StoreHarness`` for that backend.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest

from oh.core.changes import Applied, Refused, parse_changes
from oh.core.clock import utc_text
from oh.core.decision import Call
from oh.core.notebook import new_notebook_id
from oh.errors import (
    AlreadyExists,
    Expired,
    Forbidden,
    NotFound,
    RequestIdReused,
)
from oh.storage.base import MemoryStore, RecordCheck
from oh.storage.rows import ANSWER_COLUMNS
from oh.testing.declared import PLAIN_CONTENT, ran, skip_declared
from oh.testing.tampering import Edit, require_sql
from oh.tools import Caller, Tools
from oh.verify import rebuild, replay, verify_notebook

__all__ = ["T0", "MemoryStoreConformance", "StoreHarness", "add", "open_notebook"]

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
LIFETIME = timedelta(hours=24)


class StoreHarness(Protocol):
    def open(self) -> MemoryStore:
        """A new store (its own connection) on the harness's database."""
        ...

    def tamper(self, edit: Edit) -> None:
        """Make ``edit`` to the stored rows, outside Oh (``oh.testing.tampering``)."""
        ...

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        """Run raw SQL (``?`` placeholders) against the database, outside Oh: for what the
        database itself refuses. A harness with no SQL database leaves it out, and the tests
        that need it skip."""
        ...

    @property
    def change_table(self) -> str:
        """The table whose rows hold the logged changes' ``content`` and ``digest`` (keyed by
        ``notebook_id`` and ``version``): ``log`` itself where an entry and its changes share a
        row, or a table of its own."""
        ...


def open_notebook(store: MemoryStore, run: str = "run-1", owner: str = "ann") -> str:
    notebook_id = new_notebook_id()
    store.create_notebook(
        notebook_id,
        owner=owner,
        document="doc-1",
        run=run,
        started_at=T0,
        forgets_at=T0 + LIFETIME,
    )
    store.mark_open(notebook_id, None)
    return notebook_id


def add(name: str, text: str = "a note", **extra: Any) -> dict[str, Any]:
    return {"op": "add", "record": {"name": name, "text": text, **extra}}


def replace(name: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"op": "replace", "record": {"name": name, "text": text, **extra}}


def remove(name: str) -> dict[str, Any]:
    return {"op": "remove", "name": name}


def write(
    store: MemoryStore,
    notebook_id: str,
    based_on: int,
    request_id: str,
    *changes: dict[str, Any],
    now: datetime = T0,
    author: str = "agent:run-1",
) -> Applied | Refused:
    return store.remember(
        notebook_id,
        based_on=based_on,
        request_id=request_id,
        changes=parse_changes(list(changes)),
        author=author,
        now=now,
    )


# -- every call ``decide`` tells apart, against the reference backend --------------------------

# One change: op × an existing or a missing name × the current or a stale ``based_on`` × a new
# request id or the first call's × the head written by this store or by another on its database.
SINGLE_CHANGE_CASES = [
    (op, name, based_on, request_id, head)
    for op in ("add", "replace", "remove")
    for name in ("note:a", "note:z")
    for based_on in (1, 0)
    for request_id in ("r-2", "r-1")
    for head in ("known", "unknown")
]
# Two changes on a notebook holding ``note:a`` and ``note:b``: each op on an existing or a missing
# name, as both changes, on the head written by this store or by another.
TWO_CHANGE_CASES = [
    ((op1, name1), (op2, name2), head)
    for op1 in ("add", "replace", "remove")
    for name1 in ("note:a", "note:y")
    for op2 in ("add", "replace", "remove")
    for name2 in ("note:b", "note:z")
    for head in ("known", "unknown")
]


def change_of(op: str, name: str) -> dict[str, Any]:
    """A change of ``op`` on ``name`` as a caller sends it."""
    if op == "add":
        return add(name)
    return replace(name, "again") if op == "replace" else remove(name)


def decided_as_reference(
    store: MemoryStore,
    other: MemoryStore,
    reference: MemoryStore,
    call: tuple[int, str, list[dict[str, Any]]],
    *,
    first: tuple[str, ...] = ("note:a",),
    head: str = "known",
) -> None:
    """Assert that ``store`` answers ``call`` (``based_on``, ``request_id``, ``changes``) as
    ``reference`` (the in-memory backend) does, and leaves the same log and records, after a
    first write (``r-1``) adding ``first``: made by ``store`` itself when ``head`` is
    ``"known"``, else by ``other``, a second store on the same database. Whatever shortcut a
    backend takes (a head it remembers, one statement, a group), ``decide`` is the one rule."""

    def outcome(backend: MemoryStore, notebook: str) -> Any:
        try:
            return write(backend, notebook, call[0], call[1], *call[2])
        except Exception as exc:
            return type(exc)

    answers = []
    for backend, first_writer in (
        (store, store if head == "known" else other),
        (reference, reference),
    ):
        notebook = open_notebook(backend)
        write(first_writer, notebook, 0, "r-1", *[add(name) for name in first])
        answer = outcome(backend, notebook)
        log = [(e.version, e.request_id, e.changes) for e in backend.log(notebook)]
        records = sorted((r.name, r.digest, r.version) for r in backend.records(notebook))
        answers.append((answer, log, records))
    assert answers[0] == answers[1]


# The text a tampering test changes in stored content.
_TRUE_TO_FAKE = ("content", "true", "fake")


def log_length(store: MemoryStore, notebook_id: str) -> int:
    return sum(1 for _ in store.log(notebook_id))


ANSWER_SECRET = b"conformance-answers-secret-0123456789abcdef"
QUESTIONS_ASKED: tuple[dict[str, Any], ...] = (
    {"question": "current_notes"},
    {"question": "related", "name": "note:a"},
    {"question": "supports", "name": "note:a"},
    {"question": "depends_on", "name": "lead:c"},
    {"question": "dependents", "name": "note:a"},
    {"question": "conflicts"},
    {"question": "changes_since", "since": 1},
    {"question": "of_kind", "kind": "note"},
)


def keep_answers(store: MemoryStore, notebook_id: str) -> dict[str, dict[str, Any]]:
    """Write linked notes, ask every question on the menu at two versions through the tools
    (on an injected clock), and return the kept answers by question (the newer one), each
    as ``{column: value}``."""
    tools = Tools(store, None, ANSWER_SECRET, clock=lambda: T0 + timedelta(minutes=5))
    caller = Caller(notebook_id, f"agent:{notebook_id}", "agent:run-1")
    start = store.notebook(notebook_id).version
    write(
        store,
        notebook_id,
        start,
        "k-1",
        add("note:a", "base"),
        add("note:b", supports=["note:a"], contradicts=["lead:c"]),
        add("lead:c", depends_on=["note:a"]),
    )
    for arguments in QUESTIONS_ASKED[:2]:
        assert "error" not in tools.call(caller, "query", arguments)
    write(store, notebook_id, start + 1, "k-2", replace("note:a", "changed"), remove("note:b"))
    write(
        store,
        notebook_id,
        start + 2,
        "k-3",
        add("note:b", "back", supports=["note:a"], contradicts=["lead:c"]),
    )
    for arguments in QUESTIONS_ASKED:
        assert "error" not in tools.call(caller, "query", arguments)
    columns = [column.strip() for column in ANSWER_COLUMNS.split(",")]
    kept: dict[str, dict[str, Any]] = {}
    for row in sorted(store.kept_answers(notebook_id), key=lambda row: row[5]):
        kept[row[3]] = dict(zip(columns, row, strict=True))
    return kept


def _rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.split("\n")]


def _text(rows: list[list[str]]) -> str:
    return "\n".join("\t".join(row) for row in rows)


def _renamed(rows: str) -> str:
    edited = _rows(rows)
    edited[0][2] = "note:zz-not-there"
    return _text(edited)


def _redigested(rows: str) -> str:
    edited = _rows(rows)
    edited[0][3] = "f" * 64
    return _text(edited)


def _reordered(rows: str) -> str:
    edited = _rows(rows)
    return _text([edited[1], edited[0], *edited[2:]])


# Alterations of one kept answer (by question): the column, and its new value from the old.
ANSWER_ALTERATIONS: dict[str, tuple[str, str, Any]] = {
    "row renamed": ("current_notes", "rows", _renamed),
    "row digest changed": ("current_notes", "rows", _redigested),
    "row dropped": ("current_notes", "rows", lambda rows: _text(_rows(rows)[:-1])),
    "row added": ("of_kind", "rows", lambda rows: _text([*_rows(rows), _rows(rows)[0]])),
    "rows reordered": ("current_notes", "rows", _reordered),
    "conflict hidden": ("conflicts", "rows", lambda rows: rows.replace("lead:c", "")),
    "link path changed": ("related", "rows", lambda rows: rows.replace("supports", "depends_on")),
    "change relabelled": ("changes_since", "rows", lambda rows: rows.replace("add", "replace")),
    "question changed": ("current_notes", "question", lambda _: "conflicts"),
    "params changed": ("related", "params", lambda _: '{"name": "note:b"}'),
    "params damaged": ("related", "params", lambda _: '{"name": '),
    "version changed": ("current_notes", "version", lambda version: version - 1),
    "version past the log": ("current_notes", "version", lambda version: version + 5),
    "revision changed": ("current_notes", "revision", lambda _: 3),
    "caller changed": ("current_notes", "caller", lambda _: "agent:mallory"),
    "answer id changed": ("current_notes", "answer_id", lambda _: "an_" + "0" * 32),
}


class MemoryStoreConformance:
    """One test per rule. Backends override ``harness``."""

    @pytest.fixture
    def harness(self) -> StoreHarness:
        raise NotImplementedError("a backend's test module provides the harness fixture")

    @pytest.fixture
    def store(self, harness: StoreHarness, request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
        store = harness.open()
        ran(request, MemoryStoreConformance, store)
        yield store
        store.close()

    @pytest.fixture
    def notebook(self, store: MemoryStore) -> str:
        return open_notebook(store)

    # -- several calls at once -------------------------------------------------------------

    def test_remember_all_answers_each_call_as_remember_alone_in_order(
        self, store: MemoryStore
    ) -> None:
        """``remember_all`` (a batch, which a backend may write in one flush) answers every
        call exactly as ``remember`` answers the same calls one after the other, errors
        included, and a failing call touches no other."""

        def calls(a: str, b: str, gone: str) -> list[Call]:
            def request(notebook: str, based_on: int, rid: str, *changes: Any) -> Call:
                return Call.prepare(
                    notebook,
                    based_on=based_on,
                    request_id=rid,
                    changes=parse_changes(list(changes)),
                    author="agent:run-1",
                    now=T0,
                )

            return [
                request(a, 0, "a1", add("note:a1")),
                request(a, 1, "a2", add("note:a2"), add("note:a3")),  # on top of a1
                request(a, 1, "a-stale", add("note:x")),  # stale after a2
                request(a, 0, "a1", add("note:a1")),  # the retry: a1's original answer
                request(a, 2, "a1", add("note:other")),  # the id reused for another call
                request(b, 0, "b1", replace("note:none", "there is no such note")),
                request("nb_missing", 0, "m", add("note:m")),
                request(gone, 0, "g", add("note:g")),
                request(b, 0, "b2", add("note:b")),  # b untouched by the failures before
            ]

        def shape(outcome: Any) -> Any:
            if isinstance(outcome, Exception):
                return type(outcome).__name__, getattr(outcome, "code", None)
            return outcome.to_json()

        batch_ids = (open_notebook(store, run="batch-a"), open_notebook(store, run="batch-b"))
        gone = open_notebook(store, run="batch-gone")
        store.forget(gone, T0)
        batched = [shape(o) for o in store.remember_all(calls(*batch_ids, gone))]

        alone_ids = (open_notebook(store, run="alone-a"), open_notebook(store, run="alone-b"))
        alone: list[Any] = []
        for call in calls(*alone_ids, gone):
            try:
                alone.append(
                    shape(
                        store.remember(
                            call.notebook_id,
                            based_on=call.based_on,
                            request_id=call.request_id,
                            changes=call.changes,
                            author=call.author,
                            now=call.now,
                        )
                    )
                )
            except Exception as exc:
                alone.append(shape(exc))
        assert batched == alone
        assert [type(o).__name__ if isinstance(o, tuple) else "ok" for o in batched][:4] == [
            "ok"
        ] * 4
        for batch_id, alone_id in zip(batch_ids, alone_ids, strict=True):
            assert [r.name for r in store.records(batch_id)] == [
                r.name for r in store.records(alone_id)
            ]
            assert verify_notebook(store, batch_id).ok
        assert store.remember_all([]) == []

    # -- notebooks ------------------------------------------------------------------------

    def test_a_notebook_is_created_opening_then_opened(self, store: MemoryStore) -> None:
        notebook_id = new_notebook_id()
        created = store.create_notebook(
            notebook_id,
            owner="ann",
            document="d",
            run="r",
            started_at=T0,
            forgets_at=T0 + LIFETIME,
        )
        assert (created.state, created.version) == ("opening", 0)
        opened = store.mark_open(notebook_id, 3)
        assert (opened.state, opened.pinned_revision) == ("open", 3)
        assert store.notebook(notebook_id) == opened

    def test_notebook_ids_and_runs_are_unique(self, store: MemoryStore, notebook: str) -> None:
        with pytest.raises(AlreadyExists):
            store.create_notebook(
                notebook, owner="bob", document="d", run="x", started_at=T0, forgets_at=T0
            )
        with pytest.raises(AlreadyExists):
            open_notebook(store, run="run-1")

    def test_unknown_notebook_is_not_found(self, store: MemoryStore) -> None:
        with pytest.raises(NotFound):
            store.notebook("nb_missing")
        with pytest.raises(NotFound):
            write(store, "nb_missing", 0, "r-1", add("note:a"))

    def test_find_notebook_by_owner_document_and_run(
        self, store: MemoryStore, notebook: str
    ) -> None:
        found = store.find_notebook("ann", "doc-1", "run-1")
        assert found is not None and found.id == notebook
        assert store.find_notebook("ann", "doc-1", "run-2") is None

    def test_an_owners_notebooks_are_listed_newest_first_filtered_and_paged(
        self, store: MemoryStore
    ) -> None:
        def made(run: str, hours: int, document: str = "doc-1", owner: str = "ann") -> str:
            notebook_id = new_notebook_id()
            started = T0 + timedelta(hours=hours)
            store.create_notebook(
                notebook_id,
                owner=owner,
                document=document,
                run=run,
                started_at=started,
                forgets_at=started + LIFETIME,
            )
            return notebook_id

        oldest = made("r-0", 0)
        store.mark_open(oldest, None)  # forgets at T0 + 24 h
        forgotten = made("r-1", 1)
        store.mark_open(forgotten, None)
        store.forget(forgotten, T0 + timedelta(hours=2))
        other_document = made("r-2", 2, document="doc-2")
        store.mark_open(other_document, None)
        opening = made("r-3", 3)  # never opened
        same_time = [made(f"r-4{i}", 4) for i in range(3)]  # one started_at: ordered by id
        for notebook_id in same_time:
            store.mark_open(notebook_id, None)
        made("r-9", 9, owner="bob")
        now = utc_text(T0 + timedelta(hours=25))  # the oldest has expired, the rest are open

        def listed(**filters: Any) -> list[str]:
            return [n.id for n in store.owner_notebooks("ann", now=now, limit=50, **filters)]

        newest = [*sorted(same_time, reverse=True), opening, other_document, forgotten, oldest]
        assert listed() == newest
        assert listed(document="doc-1") == [i for i in newest if i != other_document]
        assert listed(state="expired") == [oldest]
        assert listed(state="open") == [*sorted(same_time, reverse=True), other_document]
        assert listed(state="purged") == [forgotten]
        assert listed(state="opening") == [opening]
        assert listed(document="doc-2", state="expired") == []
        # Pages of two, each after the last of the one before, cover the list once.
        pages, after = [], None
        while True:
            page = store.owner_notebooks("ann", now=now, after=after, limit=2)
            pages.append([n.id for n in page])
            if len(page) < 2:
                break
            after = (page[-1].started_at, page[-1].id)
        assert [i for page in pages for i in page] == newest
        assert store.owner_notebooks("carol", now=now, limit=50) == []

    # -- remember -------------------------------------------------------------------------

    def test_an_applied_write_adds_one_to_the_version(
        self, store: MemoryStore, notebook: str
    ) -> None:
        result = write(store, notebook, 0, "r-1", add("note:a"), add("note:b"))
        assert isinstance(result, Applied)
        assert result.version == 1
        assert [name for name, _ in result.written] == ["note:a", "note:b"]
        assert store.notebook(notebook).version == 1

    def test_written_digests_are_the_record_digests(
        self, store: MemoryStore, notebook: str
    ) -> None:
        result = write(store, notebook, 0, "r-1", add("note:a", supports=["note:z", "note:b"]))
        assert isinstance(result, Applied)
        stored = store.record(notebook, "note:a")
        assert stored is not None
        assert result.written == (("note:a", stored.digest),)
        assert stored.verified_content()["supports"] == ["note:b", "note:z"]

    def test_author_time_and_version_are_stamped_by_the_caller_of_the_store(
        self, store: MemoryStore, notebook: str
    ) -> None:
        later = T0 + timedelta(minutes=5)
        write(store, notebook, 0, "r-1", add("note:a"), now=later, author="agent:x")
        stored = store.record(notebook, "note:a")
        assert stored is not None
        assert (stored.author, stored.written_at, stored.version) == (
            "agent:x",
            "2026-11-29T12:05:00.000000Z",
            1,
        )

    def test_notebook_activity_counts_current_records_and_names_the_last_write(
        self, store: MemoryStore, notebook: str
    ) -> None:
        """What an owner's list of notebooks shows: the notes a notebook holds now, and when
        it was last written — a removal counts as a write."""
        other = open_notebook(store, run="run-2")
        bobs = open_notebook(store, run="run-3", owner="bob")
        assert store.notebook_activity("ann", [notebook, other]) == {
            notebook: (0, None),
            other: (0, None),
        }
        write(store, notebook, 0, "r-1", add("note:a"), add("note:b"), now=T0)
        later = T0 + timedelta(minutes=7)
        write(store, notebook, 1, "r-2", remove("note:a"), now=later)
        activity = store.notebook_activity("ann", [notebook, other, new_notebook_id(), bobs])
        assert activity == {
            notebook: (1, "2026-11-29T12:07:00.000000Z"),
            other: (0, None),
        }  # an unknown id, and another owner's, are left out
        assert store.notebook_activity("bob", [notebook, bobs]) == {bobs: (0, None)}
        assert store.notebook_activity("ann", []) == {}

    def test_a_remove_is_written_with_a_null_digest(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        result = write(store, notebook, 1, "r-2", remove("note:a"))
        assert result == Applied(2, (("note:a", None),))
        assert store.record(notebook, "note:a") is None

    def test_replace_gives_a_name_new_content(self, store: MemoryStore, notebook: str) -> None:
        write(store, notebook, 0, "r-1", add("note:a", "first"))
        write(store, notebook, 1, "r-2", replace("note:a", "second"))
        stored = store.record(notebook, "note:a")
        assert stored is not None
        assert stored.verified_content()["text"] == "second"
        assert stored.version == 2

    def test_a_stale_write_is_refused_with_the_current_version(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        result = write(store, notebook, 0, "r-2", add("note:b"))
        assert result == Refused(current_version=1)
        assert store.record(notebook, "note:b") is None
        assert log_length(store, notebook) == 1

    def test_a_refusal_does_not_use_up_the_request_id(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        assert isinstance(write(store, notebook, 0, "r-2", add("note:b")), Refused)
        # The same id with a different payload is fine: nothing was recorded for it.
        assert write(store, notebook, 1, "r-2", add("note:b")) == Applied(
            2,
            (("note:b", store.record(notebook, "note:b").digest),),  # type: ignore[union-attr]
        )

    def test_an_identical_retry_returns_the_original_result_and_writes_nothing(
        self, store: MemoryStore, notebook: str
    ) -> None:
        first = write(store, notebook, 0, "r-1", add("note:a"))
        write(store, notebook, 1, "r-2", add("note:b"))
        retry = write(store, notebook, 0, "r-1", add("note:a"), now=T0 + timedelta(hours=1))
        assert retry == first
        assert retry.to_json() == first.to_json()
        assert log_length(store, notebook) == 2
        assert store.notebook(notebook).version == 2

    def test_a_retry_with_the_links_in_another_order_is_identical(
        self, store: MemoryStore, notebook: str
    ) -> None:
        first = write(store, notebook, 0, "r-1", add("note:a", depends_on=["note:b", "note:c"]))
        retry = write(store, notebook, 0, "r-1", add("note:a", depends_on=["note:c", "note:b"]))
        assert retry == first

    def test_a_reused_request_id_with_another_payload_is_refused(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        with pytest.raises(RequestIdReused):
            write(store, notebook, 0, "r-1", add("note:a", "other text"))
        with pytest.raises(RequestIdReused):
            write(store, notebook, 1, "r-1", add("note:a"))
        assert log_length(store, notebook) == 1

    def test_request_ids_belong_to_one_notebook(self, store: MemoryStore, notebook: str) -> None:
        other = open_notebook(store, run="run-2")
        write(store, notebook, 0, "r-1", add("note:a"))
        assert isinstance(write(store, other, 0, "r-1", add("note:b")), Applied)

    def test_adding_an_existing_name_is_already_exists(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        with pytest.raises(AlreadyExists):
            write(store, notebook, 1, "r-2", add("note:a"))

    @pytest.mark.parametrize("change", [replace("note:zz", "x"), remove("note:zz")])
    def test_replacing_or_removing_a_missing_name_is_not_found(
        self, store: MemoryStore, notebook: str, change: dict[str, Any]
    ) -> None:
        with pytest.raises(NotFound):
            write(store, notebook, 0, "r-1", change)

    def test_a_batch_applies_entirely_or_not_at_all(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        with pytest.raises(NotFound):
            write(
                store,
                notebook,
                1,
                "r-2",
                add("note:b"),
                replace("note:a", "new"),
                remove("note:missing"),
            )
        assert store.record(notebook, "note:b") is None
        assert store.record(notebook, "note:a").verified_content()["text"] == "a note"  # type: ignore[union-attr]
        assert store.notebook(notebook).version == 1
        assert log_length(store, notebook) == 1
        # ...and the failed call did not use up its request id.
        assert isinstance(write(store, notebook, 1, "r-2", add("note:b")), Applied)

    def test_a_notebook_still_opening_refuses_writes(self, store: MemoryStore) -> None:
        notebook_id = new_notebook_id()
        store.create_notebook(
            notebook_id,
            owner="ann",
            document="d",
            run="r",
            started_at=T0,
            forgets_at=T0 + LIFETIME,
        )
        with pytest.raises(Forbidden):
            write(store, notebook_id, 0, "r-1", add("note:a"))

    def test_a_notebook_past_its_forget_time_refuses_writes_and_retries(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        with pytest.raises(Expired):
            write(store, notebook, 1, "r-2", add("note:b"), now=T0 + LIFETIME)
        with pytest.raises(Expired):
            write(store, notebook, 0, "r-1", add("note:a"), now=T0 + LIFETIME)

    # -- reads, log, verify ---------------------------------------------------------------

    def test_records_are_listed_in_name_order(self, store: MemoryStore, notebook: str) -> None:
        write(store, notebook, 0, "r-1", add("note:c"), add("lead:b"), add("note:a"))
        assert [r.name for r in store.records(notebook)] == ["lead:b", "note:a", "note:c"]

    def test_notebooks_never_see_each_others_records(
        self, store: MemoryStore, notebook: str
    ) -> None:
        other = open_notebook(store, run="run-2")
        write(store, notebook, 0, "r-1", add("note:a"))
        assert store.records(other) == []
        assert store.record(other, "note:a") is None

    def test_the_log_is_hash_chained_in_version_order(
        self, store: MemoryStore, notebook: str
    ) -> None:
        for version in range(3):
            write(store, notebook, version, f"r-{version}", add(f"note:n{version}"))
        entries = list(store.log(notebook))
        assert [e.version for e in entries] == [1, 2, 3]
        for before, after in itertools.pairwise(entries):
            assert after.prev_hash == before.hash
        assert all(e.expected_hash() == e.hash for e in entries)
        assert store.notebook(notebook).head_hash == entries[-1].hash

    def test_replaying_the_log_rebuilds_the_current_records(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"), add("note:b"))
        write(store, notebook, 1, "r-2", replace("note:a", "x"), remove("note:b"))
        write(store, notebook, 2, "r-3", add("note:b", "back"))
        state = replay(store.log(notebook))
        assert sorted(state.values(), key=lambda r: r.name) == store.records(notebook)
        assert verify_notebook(store, notebook).ok

    def test_an_acknowledged_write_survives_reopening(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        store.close()
        again = harness.open()
        try:
            assert again.notebook(notebook).version == 1
            assert [r.name for r in again.records(notebook)] == ["note:a"]
            assert verify_notebook(again, notebook).ok
        finally:
            again.close()

    # -- tamper evidence and rebuild ------------------------------------------------------

    def test_verify_detects_an_altered_log_entry(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        harness.tamper(Edit("log", {"notebook_id": notebook}, {"author": "agent:mallory"}))
        assert {p.what for p in verify_notebook(store, notebook).problems} >= {"chain"}

    def test_verify_detects_altered_logged_content(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        skip_declared(
            harness,
            PLAIN_CONTENT,
            "the test edits plain content in place, and a sealed store's files hold none",
        )
        write(store, notebook, 0, "r-1", add("note:a", "true text"))
        harness.tamper(
            Edit(harness.change_table, {"notebook_id": notebook}, substitute=_TRUE_TO_FAKE)
        )
        whats = {p.what for p in verify_notebook(store, notebook).problems}
        assert "digest" in whats

    def test_verify_detects_a_truncated_log(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        write(store, notebook, 1, "r-2", add("note:b"))
        for table in dict.fromkeys((harness.change_table, "log")):  # children first
            harness.tamper(Edit(table, {"notebook_id": notebook, "version": 2}, action="delete"))
        whats = {p.what for p in verify_notebook(store, notebook).problems}
        assert {"head", "drift"} <= whats

    def test_verify_detects_drift_in_the_current_records(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        skip_declared(
            harness,
            PLAIN_CONTENT,
            "the test edits plain content in place, and a sealed store's files hold none",
        )
        write(store, notebook, 0, "r-1", add("note:a", "true text"))
        harness.tamper(Edit("records", {"notebook_id": notebook}, substitute=_TRUE_TO_FAKE))
        problems = verify_notebook(store, notebook).problems
        assert {"drift", "digest"} <= {p.what for p in problems}

    def test_record_checks_give_each_record_without_its_content(
        self, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", *[add(f"note:n{i}", f"text {i}") for i in range(7)])
        write(store, notebook, 1, "r-2", replace("note:n3", "new"), remove("note:n5"))
        write(store, notebook, 2, "r-3", add("note:n5", "back"))
        write(store, notebook, 3, "r-4", replace("note:n0", "one change"))
        want = [
            RecordCheck(r.name, r.kind, r.digest, r.author, r.written_at, r.version, True)
            for r in store.records(notebook)
        ]
        assert len(want) == 7
        for page in (1, 3, 7, 2000):  # page boundaries fall anywhere, or nowhere
            checks = list(store.record_checks(notebook, page=page))
            assert sorted(checks) == want
            assert all(type(check.as_logged) is bool for check in checks)  # not 1 for True

    def test_record_checks_tell_which_records_are_not_what_was_logged(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        skip_declared(
            harness,
            PLAIN_CONTENT,
            "the test edits plain content in place, and a sealed store's files hold none",
        )
        write(store, notebook, 0, "r-1", add("note:a", "true text"), add("note:b"))
        write(store, notebook, 1, "r-2", add("note:c"))
        write(store, notebook, 2, "r-3", add("note:d"))
        harness.tamper(
            Edit("records", {"notebook_id": notebook, "name": "note:a"}, substitute=_TRUE_TO_FAKE)
        )
        # note:c claims the entry that wrote note:d, and note:d one that does not exist
        for name, version in (("note:c", 3), ("note:d", 9)):
            harness.tamper(
                Edit("records", {"notebook_id": notebook, "name": name}, {"version": version})
            )
        checks = {c.name: c.as_logged for c in store.record_checks(notebook, page=2)}
        assert checks == {"note:a": False, "note:b": True, "note:c": False, "note:d": False}
        whats = {(p.what, p.detail.split()[0]) for p in verify_notebook(store, notebook).problems}
        assert whats == {
            ("drift", "note:a"),
            ("digest", "current"),
            ("drift", "note:c"),
            ("drift", "note:d"),
        }

    # -- every derived or stamped value is checked: seals and kept answers -------------------

    @pytest.mark.parametrize(
        ("column", "value"),
        [
            ("forgets_at", "2999-01-01T00:00:00.000000Z"),
            ("started_at", "2026-11-28T12:00:00.000000Z"),
            ("owner", "mallory"),
            ("document", "doc-other"),
            ("run", "run-other"),
            ("pinned_revision", 7),
            ("state", "opening"),
            ("purged_at", "2026-11-29T13:00:00.000000Z"),
            ("seal", None),
            ("seal", "0" * 64),
        ],
    )
    def test_verify_reports_notebook_metadata_changed_behind_oh(
        self, harness: StoreHarness, store: MemoryStore, notebook: str, column: str, value: Any
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        assert verify_notebook(store, notebook).ok
        harness.tamper(Edit("notebooks", {"id": notebook}, {column: value}))
        problems = verify_notebook(store, notebook).problems
        assert [p.what for p in problems] == ["seal"]
        if column in ("forgets_at", "started_at", "pinned_revision", "state", "purged_at"):
            assert str(value) in problems[0].detail  # `oh verify` shows what the row says now

    @pytest.mark.parametrize(
        ("column", "value"),
        [
            ("forgets_at", "2999-01-01T00:00:00.000000Z"),
            ("purged_at", "2026-11-30T00:00:00.000000Z"),
            ("owner", "mallory"),
            ("run", "run-other"),
        ],
    )
    def test_verify_reports_a_tombstone_changed_behind_oh(
        self, harness: StoreHarness, store: MemoryStore, notebook: str, column: str, value: Any
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"))
        store.forget(notebook, T0 + timedelta(hours=1))
        assert verify_notebook(store, notebook).ok
        harness.tamper(Edit("notebooks", {"id": notebook}, {column: value}))
        assert [p.what for p in verify_notebook(store, notebook).problems] == ["seal"]

    def test_every_notebook_oh_writes_matches_its_seal(self, store: MemoryStore) -> None:
        # (An imported live notebook is checked by the export/import tests, tests/test_transfer.)
        opening = new_notebook_id()
        store.create_notebook(
            opening, owner="ann", document="d", run="r-opening", started_at=T0, forgets_at=T0
        )
        repinned = new_notebook_id()
        store.create_notebook(
            repinned, owner="ann", document="d", run="r-pin", started_at=T0, forgets_at=T0
        )
        store.mark_open(repinned, 3)  # the pin given at open is the one sealed
        forgotten_opening = new_notebook_id()
        store.create_notebook(
            forgotten_opening, owner="ann", document="d", run="r-f", started_at=T0, forgets_at=T0
        )
        store.forget(forgotten_opening, T0)
        forgotten = open_notebook(store, run="r-forgotten")
        write(store, forgotten, 0, "r-1", add("note:a"))
        store.forget(forgotten, T0 + timedelta(hours=1))
        tombstone = dataclasses.replace(store.notebook(forgotten), id=new_notebook_id(), run="r-t")
        store.import_notebook(tombstone, [])
        for notebook_id in store.notebook_ids():
            assert verify_notebook(store, notebook_id).problems == []

    def test_verify_recomputes_every_kept_answer(self, store: MemoryStore, notebook: str) -> None:
        kept = keep_answers(store, notebook)
        assert set(kept) == {arguments["question"] for arguments in QUESTIONS_ASKED}
        assert len(store.kept_answers(notebook)) == len(QUESTIONS_ASKED) + 2  # two versions
        assert verify_notebook(store, notebook).problems == []

    @pytest.mark.parametrize("alteration", sorted(ANSWER_ALTERATIONS))
    def test_verify_reports_an_altered_kept_answer(
        self, harness: StoreHarness, store: MemoryStore, notebook: str, alteration: str
    ) -> None:
        question, column, change = ANSWER_ALTERATIONS[alteration]
        answer = keep_answers(store, notebook)[question]
        new = change(answer[column])
        assert new != answer[column]
        harness.tamper(
            Edit(
                "answers",
                {"notebook_id": notebook, "answer_id": answer["answer_id"]},
                {column: new},
            )
        )
        problems = verify_notebook(store, notebook).problems
        assert [p.what for p in problems] == ["answer"]

    def test_verify_reports_a_kept_answer_moved_to_another_notebook(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        answer = keep_answers(store, notebook)["current_notes"]
        other = open_notebook(store, run="run-other")
        harness.tamper(
            Edit(
                "answers",
                {"notebook_id": notebook, "answer_id": answer["answer_id"]},
                {"notebook_id": other},
            )
        )
        assert verify_notebook(store, notebook).ok  # it left this notebook, as answers may
        assert [p.what for p in verify_notebook(store, other).problems] == ["answer"]

    def test_rebuild_and_import_keep_every_record_of_a_large_notebook(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        # More records than one statement carries (the embedded store sends 500 a statement).
        for call in range(18):
            names = range(call * 64, min(call * 64 + 64, 1100))
            write(
                store, notebook, call, f"r-{call}", *[add(f"note:n{i:04d}", f"t{i}") for i in names]
            )
        before = store.records(notebook)
        assert len(before) == 1100
        harness.tamper(Edit("records", {"notebook_id": notebook}, action="delete"))
        assert rebuild(store, notebook) == 1100
        assert store.records(notebook) == before
        copy = dataclasses.replace(store.notebook(notebook), id=new_notebook_id(), run="run-copy")
        store.import_notebook(copy, list(store.log(notebook)))
        assert store.records(copy.id) == before
        assert store.notebook(copy.id).version == 18

    def test_rebuild_restores_the_current_records_exactly(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        write(store, notebook, 0, "r-1", add("note:a"), add("note:b", depends_on=["note:a"]))
        write(store, notebook, 1, "r-2", replace("note:a", "changed"))
        before = store.records(notebook)
        harness.tamper(Edit("records", {"notebook_id": notebook}, action="delete"))
        columns = "notebook_id, name, kind, content, digest, author, written_at, version"
        values = (notebook, "note:zz", "note", "{}", "x", "a", "b", 9)
        stray = dict(zip(columns.split(", "), values, strict=True))
        harness.tamper(Edit("records", values=stray, action="insert"))
        assert not verify_notebook(store, notebook).ok
        assert rebuild(store, notebook) == 2
        assert store.records(notebook) == before
        assert verify_notebook(store, notebook).ok

    # -- the database enforces the invariants ---------------------------------------------

    def test_the_database_refuses_a_second_entry_at_one_version(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        require_sql(harness, "execute")
        write(store, notebook, 0, "r-1", add("note:a"))
        write(store, notebook, 1, "r-2", add("note:b"))
        with pytest.raises(Exception, match=r"(?i)unique|duplicate|primary"):
            harness.execute(
                "UPDATE log SET version = 1 WHERE notebook_id = ? AND version = 2", (notebook,)
            )

    def test_the_database_refuses_a_request_id_twice(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        require_sql(harness, "execute")
        write(store, notebook, 0, "r-1", add("note:a"))
        write(store, notebook, 1, "r-2", add("note:b"))
        with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
            harness.execute(
                "UPDATE log SET request_id = (SELECT request_id FROM log AS l"
                " WHERE l.notebook_id = ? AND l.version = 1) WHERE notebook_id = ? AND version = 2",
                (notebook, notebook),
            )

    def test_concurrent_writers_never_lose_an_update(
        self, harness: StoreHarness, store: MemoryStore, notebook: str
    ) -> None:
        """Writers on their own connections race on one notebook: every applied write gets
        its own version, versions are contiguous, every refusal names a newer version."""
        writers, attempts = 4, 15
        applied: list[int] = []
        refusals: list[tuple[int, int]] = []
        lock = threading.Lock()

        def run(worker: int) -> None:
            own = harness.open()
            try:
                for attempt in range(attempts):
                    based_on = own.notebook(notebook).version
                    result = write(
                        own,
                        notebook,
                        based_on,
                        f"w{worker}-{attempt}",
                        add(f"note:w{worker}-{attempt}"),
                    )
                    with lock:
                        if isinstance(result, Applied):
                            applied.append(result.version)
                        else:
                            refusals.append((based_on, result.current_version))
            finally:
                own.close()

        threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(applied) == list(range(1, len(applied) + 1))
        assert all(current > based_on for based_on, current in refusals)
        assert len(applied) + len(refusals) == writers * attempts
        assert len(store.records(notebook)) == len(applied)
        assert verify_notebook(store, notebook).ok
