"""The notebook lifecycle conformance suite (docs/design.md): every backend passes it unchanged.

Subclass ``NotebookLifecycleConformance`` and override the ``harness`` fixture with a
``LifecycleHarness``: a ``StoreHarness`` that can also hand out the purge credential, run raw
SQL through it (where it has a connection), and list the database's files for the forensic
scan.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import pytest

from oh.core.notebook import Notebook, new_notebook_id
from oh.core.reviewed import ReviewedRecord
from oh.errors import (
    AlreadyExists,
    Expired,
    Forbidden,
    InvalidArgument,
    NotFound,
    Purged,
)
from oh.services.notebooks import Notebooks, purge_expired
from oh.storage.base import OPENING_GRACE_FLOOR, MemoryStore, PurgeAccess
from oh.testing.declared import FILES, PLAIN_CONTENT, not_offered, ran, skip_declared
from oh.testing.memory_store import T0, StoreHarness, add, write
from oh.testing.tampering import Edit, require_sql
from oh.verify import verify_notebook

__all__ = ["FakeClock", "LifecycleHarness", "NotebookLifecycleConformance"]

DENIED = r"(?i)not authorized|prohibited|permission denied|denied"
MARKER = "reef-recovery-forgotten-marker-29.4C"
CENTURY = timedelta(days=36525)
LATER = "2026-11-30T13:00:00.000000Z"  # T0 + 25 hours: the suite's "now" in purge tests
FAR = "9999-12-31T23:59:59.999999Z"  # a "now" the purge credential might claim


class LifecycleHarness(StoreHarness, Protocol):
    def purge_access(self) -> PurgeAccess: ...

    def purge_execute(self, access: PurgeAccess, sql: str, params: tuple[Any, ...] = ()) -> Any:
        """Run raw SQL (``?`` placeholders) on the purge credential's own connection. A
        harness whose credential has no connection leaves it out; the tests that need it skip."""
        ...

    def files(self) -> list[Path] | None:
        """The database's files (main file, WAL, ...) to scan, or None if not file-based."""
        ...

    def reader(self) -> AbstractContextManager[None]:
        """A read transaction on a connection of its own, its snapshot taken on entry and kept
        until exit (a file-based harness; entered and left in one thread)."""
        ...


class FakeClock:
    """An injected clock: tests move time instead of sleeping."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class FixedRevisions:
    """A knowledge source with revisions 0..latest and no records: enough to pin."""

    def __init__(self, latest: int) -> None:
        self.latest = latest

    def latest_revision(self, owner: str) -> int:
        return self.latest

    def records_at(self, owner: str, revision: int) -> list[ReviewedRecord]:
        return []

    def record_at(self, owner: str, name: str, revision: int) -> ReviewedRecord | None:
        return None


class NotebookLifecycleConformance:
    @pytest.fixture
    def harness(self) -> LifecycleHarness:
        raise NotImplementedError("a backend's test module provides the harness fixture")

    @pytest.fixture
    def store(
        self, harness: LifecycleHarness, request: pytest.FixtureRequest
    ) -> Iterator[MemoryStore]:
        store = harness.open()
        ran(request, NotebookLifecycleConformance, store)
        yield store
        store.close()

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def notebooks(self, store: MemoryStore, clock: FakeClock) -> Notebooks:
        return Notebooks(store, clock=clock)

    @pytest.fixture
    def access(self, harness: LifecycleHarness, store: MemoryStore) -> Iterator[PurgeAccess]:
        # ``store`` first: the memory database exists before the purge credential opens it.
        access = harness.purge_access()
        yield access
        access.close()

    # -- opening --------------------------------------------------------------------------

    def test_opening_the_same_run_twice_returns_the_same_notebook(
        self, notebooks: Notebooks
    ) -> None:
        first = notebooks.open("ann", "doc", "run-1")
        assert first.state == "open"
        assert notebooks.open("ann", "doc", "run-1") == first

    def test_a_new_run_gets_a_new_empty_notebook(
        self, notebooks: Notebooks, store: MemoryStore
    ) -> None:
        first = notebooks.open("ann", "doc", "run-1")
        write(store, first.id, 0, "r-1", add("lead:survey", "methods missing"))
        second = notebooks.open("ann", "doc", "run-2")
        assert second.id != first.id
        assert second.version == 0
        assert store.records(second.id) == []
        assert store.record(second.id, "lead:survey") is None

    def test_opening_is_two_phase_and_records_the_pin(
        self, store: MemoryStore, clock: FakeClock
    ) -> None:
        seen: list[tuple[str, int | None]] = []

        def prepare(notebook: Notebook) -> None:
            seen.append((store.notebook(notebook.id).state, notebook.pinned_revision))

        knowledge = FixedRevisions(latest=9)
        notebooks = Notebooks(store, clock=clock, knowledge=knowledge, prepare=prepare)
        notebook = notebooks.open("ann", "d", "r", pin=7)
        assert seen == [("opening", 7)]
        assert (notebook.state, notebook.pinned_revision) == ("open", 7)
        assert notebooks.open("ann", "d", "latest-run").pinned_revision == 9

    def test_a_pin_beyond_the_latest_revision_opens_nothing(
        self, store: MemoryStore, clock: FakeClock
    ) -> None:
        notebooks = Notebooks(store, clock=clock, knowledge=FixedRevisions(latest=3))
        with pytest.raises(NotFound):
            notebooks.open("ann", "d", "r", pin=4)
        assert store.notebook_ids() == []

    def test_a_notebook_whose_preparation_failed_is_finished_by_the_next_open(
        self, store: MemoryStore, clock: FakeClock
    ) -> None:
        def failing(_notebook: Notebook) -> None:
            raise RuntimeError("bootstrap could not be prepared")

        with pytest.raises(RuntimeError):
            Notebooks(store, clock=clock, prepare=failing).open("ann", "d", "r")
        stuck = store.find_notebook("ann", "d", "r")
        assert stuck is not None
        assert stuck.state == "opening"
        with pytest.raises(Forbidden):
            write(store, stuck.id, 0, "r-1", add("note:a"))
        reopened = Notebooks(store, clock=clock).open("ann", "d", "r")
        assert (reopened.id, reopened.state) == (stuck.id, "open")

    @pytest.mark.parametrize(
        ("owner", "document", "run", "pin"),
        [
            ("", "d", "r", "latest"),
            ("ann", "d" * 201, "r", "latest"),
            ("ann", "d", 7, "latest"),
            ("ann", "d", "line\nbreak", "latest"),
            ("ann", "d", "r", -1),
            ("ann", "d", "r", "newest"),
            ("ann", "d", "r", True),
        ],
    )
    def test_bad_open_arguments_are_invalid_and_create_nothing(
        self,
        notebooks: Notebooks,
        store: MemoryStore,
        owner: Any,
        document: Any,
        run: Any,
        pin: Any,
    ) -> None:
        with pytest.raises(InvalidArgument):
            notebooks.open(owner, document, run, pin)
        assert store.notebook_ids() == []

    # -- expiry ---------------------------------------------------------------------------

    def test_a_notebook_forgets_24_hours_after_it_starts(self, notebooks: Notebooks) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        assert notebook.forgets_at == "2026-11-30T12:00:00.000000Z"

    def test_the_lifetime_is_configurable(self, store: MemoryStore, clock: FakeClock) -> None:
        notebook = Notebooks(store, clock=clock, lifetime=timedelta(hours=2)).open("a", "d", "r")
        assert notebook.forgets_at == "2026-11-29T14:00:00.000000Z"

    def test_after_the_forget_time_every_call_is_expired_before_any_purge(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(store, notebook.id, 0, "r-1", add("note:a"), now=clock())
        clock.advance(hours=24)
        with pytest.raises(Expired):
            write(store, notebook.id, 1, "r-2", add("note:b"), now=clock())
        with pytest.raises(Expired):
            write(store, notebook.id, 0, "r-1", add("note:a"), now=clock())
        assert notebooks.get(notebook.id, "ann").state == "expired"
        with pytest.raises(Expired):
            notebooks.open("ann", "doc", "run-1")

    # -- forget now -----------------------------------------------------------------------

    def test_forget_now_removes_everything_and_leaves_a_tombstone(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(store, notebook.id, 0, "r-1", add("note:a"), add("note:b"), now=clock())
        write(store, notebook.id, 1, "r-2", add("note:c"), now=clock())
        clock.advance(minutes=3)
        report = notebooks.forget(notebook.id, "ann")
        assert report.removed["records"] == 3
        assert report.removed["log"] == 2
        assert report.removed.get("log_changes", 3) == 3  # where changes have a table of their own
        tombstone = notebooks.get(notebook.id, "ann")
        assert (tombstone.state, tombstone.purged_at) == ("purged", "2026-11-29T12:03:00.000000Z")
        assert store.records(notebook.id) == []
        assert list(store.log(notebook.id)) == []

    def test_a_forgotten_notebook_refuses_writes_retries_and_reopening(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(store, notebook.id, 0, "r-1", add("note:a"), now=clock())
        notebooks.forget(notebook.id, "ann")
        with pytest.raises(Purged):
            write(store, notebook.id, 1, "r-2", add("note:b"), now=clock())
        with pytest.raises(Purged):
            write(store, notebook.id, 0, "r-1", add("note:a"), now=clock())
        with pytest.raises(Purged):
            notebooks.open("ann", "doc", "run-1")
        with pytest.raises(Purged):
            store.mark_open(notebook.id, None)
        with pytest.raises(Purged):
            notebooks.forget(notebook.id, "ann")
        assert store.records(notebook.id) == []

    def test_only_the_owner_can_see_or_forget_a_notebook(
        self, notebooks: Notebooks, store: MemoryStore
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        with pytest.raises(Forbidden):
            notebooks.get(notebook.id, "bob")
        with pytest.raises(Forbidden):
            notebooks.forget(notebook.id, "bob")
        assert store.notebook(notebook.id).state == "open"

    def test_an_unknown_notebook_is_not_found(self, notebooks: Notebooks) -> None:
        with pytest.raises(NotFound):
            notebooks.get("nb_0000", "ann")
        with pytest.raises(NotFound):
            notebooks.forget("nb_0000", "ann")

    # -- the purge ------------------------------------------------------------------------

    def test_the_purge_removes_expired_notebooks_only(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock, access: PurgeAccess
    ) -> None:
        old = notebooks.open("ann", "doc", "old")
        write(store, old.id, 0, "r-1", add("note:a"), now=clock())
        clock.advance(hours=23)
        young = notebooks.open("ann", "doc", "young")
        write(store, young.id, 0, "r-1", add("note:a"), now=clock())
        clock.advance(hours=1)
        report = purge_expired(access, clock())
        assert report.purged == [old.id]
        removed = {table: n for table, n in report.removed.items() if n}
        assert removed.pop("log_changes", 1) == 1  # where changes have a table of their own
        assert removed == {"records": 1, "log": 1}
        assert store.notebook(old.id).state == "purged"
        assert store.notebook(young.id).state == "open"
        assert len(store.records(young.id)) == 1
        assert purge_expired(access, clock()).purged == []

    def test_the_purge_marks_a_notebook_stuck_opening_empty(
        self, store: MemoryStore, clock: FakeClock, access: PurgeAccess
    ) -> None:
        def failing(_notebook: Notebook) -> None:
            raise RuntimeError("crashed while opening")

        with pytest.raises(RuntimeError):
            Notebooks(store, clock=clock, prepare=failing).open("ann", "d", "r")
        stuck = store.find_notebook("ann", "d", "r")
        assert stuck is not None
        clock.advance(minutes=5)
        assert purge_expired(access, clock(), opening_grace=timedelta(minutes=10)).emptied == []
        clock.advance(minutes=6)
        report = purge_expired(access, clock(), opening_grace=timedelta(minutes=10))
        assert report.emptied == [stuck.id]
        assert store.notebook(stuck.id).state == "empty"
        with pytest.raises(Purged):
            Notebooks(store, clock=clock).open("ann", "d", "r")
        with pytest.raises(Purged):
            store.mark_open(stuck.id, None)

    def test_the_purge_seals_the_tombstones_it_leaves(
        self,
        harness: LifecycleHarness,
        store: MemoryStore,
        clock: FakeClock,
        access: PurgeAccess,
    ) -> None:
        # The purge may not read owner, document or run: it chains the tombstone's state and
        # time onto the notebook's seal, and verify checks the chain.
        notebooks = Notebooks(store, clock=clock, lifetime=timedelta(hours=1))
        expired = notebooks.open("ann", "doc", "run-expired")
        write(store, expired.id, 0, "r-1", add("note:a"), now=clock())
        stuck = store.create_notebook(
            "nb_" + "5" * 32,
            owner="ann",
            document="doc",
            run="run-stuck",
            started_at=clock(),
            forgets_at=clock() + timedelta(hours=24),
        )
        clock.advance(hours=2)
        report = purge_expired(access, clock())
        assert (report.purged, report.emptied) == ([expired.id], [stuck.id])
        for notebook_id in (expired.id, stuck.id):
            assert verify_notebook(store, notebook_id).problems == []
            harness.tamper(Edit("notebooks", {"id": notebook_id}, {"purged_at": "2026-12-01"}))
            assert [p.what for p in verify_notebook(store, notebook_id).problems] == ["seal"]

    def test_a_purged_notebook_never_comes_back(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock, access: PurgeAccess
    ) -> None:
        notebook = notebooks.open("ann", "doc", "run-1")
        write(store, notebook.id, 0, "r-1", add("note:a"), now=clock())
        clock.advance(hours=25)
        purge_expired(access, clock())
        late = notebook.started_at  # a slow agent step that still believes it is early
        with pytest.raises(Purged):
            write(store, notebook.id, 1, "r-2", add("note:b"), now=T0)
        with pytest.raises(Purged):
            write(store, notebook.id, 0, "r-1", add("note:a"), now=T0)
        with pytest.raises(Purged):
            store.mark_open(notebook.id, None)
        with pytest.raises(AlreadyExists):
            store.create_notebook(
                notebook.id,
                owner="ann",
                document="doc",
                run="run-9",
                started_at=T0,
                forgets_at=T0 + timedelta(hours=24),
            )
        assert late == "2026-11-29T12:00:00.000000Z"
        assert store.records(notebook.id) == []
        assert store.notebook(notebook.id).state == "purged"

    def test_the_database_refuses_to_reopen_a_tombstone(
        self, harness: LifecycleHarness, notebooks: Notebooks, store: MemoryStore
    ) -> None:
        require_sql(harness, "execute")
        notebook = notebooks.open("ann", "doc", "run-1")
        notebooks.forget(notebook.id, "ann")
        with pytest.raises(Exception, match=r"(?i)purged"):
            harness.execute("UPDATE notebooks SET state = 'open' WHERE id = ?", (notebook.id,))
        with pytest.raises(Exception, match=r"(?i)not open"):
            harness.execute(
                "INSERT INTO log (notebook_id, version, request_id, fingerprint, author,"
                " written_at, prev_hash, hash) VALUES (?, 1, 'r', 'f', 'a', 'w', 'p', 'h')",
                (notebook.id,),
            )
        assert store.notebook(notebook.id).state == "purged"

    # -- the purge credential -------------------------------------------------------------

    def test_the_purge_credential_offers_nothing_but_the_purge(self, access: PurgeAccess) -> None:
        public = {name for name in dir(access) if not name.startswith("_")}
        assert public - {"busy_wait"} == {
            "expired",
            "stale_openings",
            "purge",
            "mark_empty",
            "compact",
            "close",
        }

    @pytest.mark.parametrize(
        "sql",
        [
            "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at,"
            " version, head_hash) VALUES ('nb_new', 'o', 'd', 'r', 'open', 'a', 'b', 0, 'h')",
            "INSERT INTO log (notebook_id, version, request_id, fingerprint, author, written_at,"
            " prev_hash, hash) VALUES (?, 9, 'r', 'f', 'a', 'w', 'p', 'h')",
            "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
            " version) VALUES (?, 'note:x', 'note', '{}', 'd', 'a', 'w', 1)",
            "SELECT content FROM records WHERE notebook_id = ?",
            "SELECT content FROM {changes} WHERE notebook_id = ?",
            "SELECT * FROM records WHERE notebook_id = ?",
            "SELECT name, digest FROM records WHERE notebook_id = ?",
            "SELECT owner, document, run FROM notebooks WHERE id = ?",
            "UPDATE notebooks SET version = 99 WHERE id = ?",
            "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z' WHERE id = ?",
            "UPDATE records SET content = '{}' WHERE notebook_id = ?",
            "DELETE FROM notebooks WHERE id = ?",
        ],
    )
    def test_the_purge_credential_is_denied_everything_else(
        self,
        harness: LifecycleHarness,
        notebooks: Notebooks,
        store: MemoryStore,
        access: PurgeAccess,
        sql: str,
    ) -> None:
        require_sql(harness, "purge_execute")
        notebook = notebooks.open("ann", "doc", "run-1")
        write(store, notebook.id, 0, "r-1", add("note:a", MARKER))
        params = (notebook.id,) if "?" in sql else ()
        sql = sql.replace("{changes}", harness.change_table)
        with pytest.raises(Exception, match=DENIED):
            harness.purge_execute(access, sql, params)
        assert store.notebook(notebook.id).version == 1
        assert len(store.records(notebook.id)) == 1
        assert store.notebook_ids() == [notebook.id]

    # -- the purge credential checks values, not only columns --------------------------------
    #
    # The database cannot see the injected clock, so it judges "expired" and "past the grace"
    # by its own clock (plus a small allowance). A notebook this suite means to be unexpired by
    # that clock forgets a century after T0, and an opening meant to be fresh started then:
    # neither depends on when the suite runs, nor on a shifted process clock.

    @pytest.fixture
    def situations(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock
    ) -> dict[str, str]:
        """One notebook in each situation the purge credential meets, by name."""
        young = Notebooks(store, clock=clock, lifetime=CENTURY).open("ann", "doc", "young")
        write(store, young.id, 0, "r-1", add("note:a", MARKER), now=clock())
        old = notebooks.open("ann", "doc", "old")
        write(store, old.id, 0, "r-1", add("note:a", MARKER), now=clock())
        gone = notebooks.open("ann", "doc", "gone")
        write(store, gone.id, 0, "r-1", add("note:a", MARKER), now=clock())
        notebooks.forget(gone.id, "ann")
        ids = {"young": young.id, "old": old.id, "gone": gone.id}
        for name, started in (("stuck", T0), ("opening", T0 + CENTURY)):
            ids[name] = new_notebook_id()
            store.create_notebook(
                ids[name],
                owner="ann",
                document="doc",
                run=name,
                started_at=started,
                forgets_at=started + timedelta(hours=24),
            )
        clock.advance(hours=25)  # `old` is past its forget time, `stuck` past the grace
        return ids

    @staticmethod
    def _snapshot(store: MemoryStore, ids: dict[str, str]) -> Any:
        return (
            sorted(store.notebook_ids()),
            {
                name: (store.notebook(i), len(store.records(i)), len(list(store.log(i))))
                for name, i in ids.items()
            },
        )

    @pytest.mark.parametrize(
        ("sql", "target", "stamp"),
        [
            # reopen a notebook that never finished opening
            ("UPDATE notebooks SET state = 'open' WHERE id = ?", "stuck", None),
            ("UPDATE notebooks SET state = 'open' WHERE id = ?", "opening", None),
            # purge early with a forged "now"
            ("UPDATE notebooks SET state = 'purged', purged_at = ? WHERE id = ?", "young", FAR),
            ("DELETE FROM records WHERE notebook_id = ?", "young", None),
            ("DELETE FROM log WHERE notebook_id = ?", "young", None),
            # delete notes and leave the notebook open (content goes only with its tombstone)
            ("DELETE FROM records WHERE notebook_id = ?", "old", None),
            ("DELETE FROM log WHERE notebook_id = ?", "old", None),
            # empty what is not a stuck opening
            ("UPDATE notebooks SET state = 'empty', purged_at = ? WHERE id = ?", "opening", FAR),
            ("UPDATE notebooks SET state = 'empty', purged_at = ? WHERE id = ?", "old", LATER),
            # un-purge, or restamp
            ("UPDATE notebooks SET state = 'open' WHERE id = ?", "gone", None),
            ("UPDATE notebooks SET purged_at = ? WHERE id = ?", "gone", LATER),
            ("UPDATE notebooks SET purged_at = ? WHERE id = ?", "young", LATER),
            ("UPDATE notebooks SET state = state WHERE id = ?", "young", None),
            # any other value
            ("UPDATE notebooks SET started_at = ? WHERE id = ?", "opening", LATER),
            ("UPDATE notebooks SET forgets_at = ? WHERE id = ?", "young", LATER),
        ],
    )
    def test_the_purge_credential_can_only_purge_the_expired_and_empty_the_stuck(
        self,
        harness: LifecycleHarness,
        store: MemoryStore,
        access: PurgeAccess,
        situations: dict[str, str],
        sql: str,
        target: str,
        stamp: str | None,
    ) -> None:
        require_sql(harness, "purge_execute")
        before = self._snapshot(store, situations)
        params = (situations[target],) if stamp is None else (stamp, situations[target])
        with pytest.raises(Exception, match=DENIED):
            harness.purge_execute(access, sql, params)
        assert self._snapshot(store, situations) == before

    def test_the_purge_credential_cannot_purge_early_whatever_now_it_claims(
        self, store: MemoryStore, access: PurgeAccess, situations: dict[str, str]
    ) -> None:
        far = datetime(9999, 12, 31, tzinfo=UTC)
        assert access.expired(far) == [situations["old"]]
        assert access.stale_openings(far) == [situations["stuck"]]
        assert access.purge([situations["young"]], far) == {}
        assert access.mark_empty([situations["opening"]], far, far) == []
        report = purge_expired(access, far)
        assert (report.purged, report.emptied) == ([situations["old"]], [situations["stuck"]])
        assert store.notebook(situations["young"]).state == "open"
        assert len(store.records(situations["young"])) == 1
        assert store.notebook(situations["opening"]).state == "opening"
        # The tombstone's stamp is the database's bound, not the claimed year 9999.
        for name in ("old", "stuck"):
            tombstone = store.notebook(situations[name])
            assert tombstone.purged_at is not None
            assert tombstone.forgets_at <= tombstone.purged_at < FAR

    def test_the_purge_credential_still_purges_and_empties_by_the_injected_clock(
        self,
        store: MemoryStore,
        clock: FakeClock,
        access: PurgeAccess,
        situations: dict[str, str],
    ) -> None:
        report = purge_expired(access, clock())
        assert (report.purged, report.emptied) == ([situations["old"]], [situations["stuck"]])
        assert store.notebook(situations["old"]).purged_at == LATER
        assert store.records(situations["old"]) == []
        assert store.notebook(situations["young"]).state == "open"
        assert store.notebook(situations["opening"]).state == "opening"

    def test_an_opening_grace_below_the_databases_floor_is_invalid(
        self, store: MemoryStore, clock: FakeClock, access: PurgeAccess
    ) -> None:
        with pytest.raises(InvalidArgument):
            purge_expired(access, clock(), opening_grace=OPENING_GRACE_FLOOR / 2)

    # -- forgetting is real ---------------------------------------------------------------

    @pytest.mark.parametrize("how", ["forget", "purge"])
    def test_forgotten_text_is_gone_from_the_database_files(
        self,
        harness: LifecycleHarness,
        notebooks: Notebooks,
        store: MemoryStore,
        clock: FakeClock,
        access: PurgeAccess,
        how: str,
    ) -> None:
        files = harness.files()
        if files is None:
            not_offered(harness, FILES, "the backend keeps its rows in no file")
        skip_declared(
            harness,
            PLAIN_CONTENT,
            "the test first finds the note's text in the files; sealed, it never is",
        )
        keep = notebooks.open("ann", "doc", "keep")
        write(store, keep.id, 0, "r-1", add("note:kept", "still here"), now=clock())
        notebook = notebooks.open("ann", "doc", "run-1")
        for version in range(20):
            long_text = f"{MARKER} #{version} " + "reef " * 150
            write(
                store,
                notebook.id,
                version,
                f"r-{version}",
                add(f"note:n{version}", long_text),
                now=clock(),
            )
        marker = MARKER.encode()
        assert any(marker in path.read_bytes() for path in harness.files() or [] if path.exists())
        if how == "forget":
            notebooks.forget(notebook.id, "ann")
        else:
            clock.advance(hours=24)
            purge_expired(access, clock())
        store.compact()
        leftover = [
            str(path)
            for path in harness.files() or []
            if path.exists() and marker in path.read_bytes()
        ]
        assert leftover == []
        if how == "forget":
            assert store.records(keep.id)[0].verified_content()["text"] == "still here"

    def test_compaction_waits_for_a_reader_older_than_the_forget(
        self,
        harness: LifecycleHarness,
        notebooks: Notebooks,
        store: MemoryStore,
        clock: FakeClock,
    ) -> None:
        """A transaction open since before a forget may still see the forgotten rows, so the
        database keeps them for it; compaction waits for it to end, then leaves nothing."""
        if harness.files() is None:
            not_offered(harness, FILES, "the backend keeps its rows in no file")
        notebook = notebooks.open("ann", "doc", "run-1")
        for version in range(5):
            text = f"{MARKER} #{version} " + "reef " * 150
            write(store, notebook.id, version, f"r-{version}", add(f"note:n{version}", text))
        marker = MARKER.encode()
        opened, release = threading.Event(), threading.Event()

        def hold() -> None:
            with harness.reader():
                opened.set()
                release.wait(60)

        holder = threading.Thread(target=hold)
        holder.start()
        try:
            assert opened.wait(30)
            threading.Timer(0.5, release.set).start()  # the reader ends while compaction waits
            notebooks.forget(notebook.id, "ann")  # which compacts, on a backend where it does
            compacted = store.compact()
        finally:
            release.set()
            holder.join(30)
        assert compacted
        leftover = [
            str(path)
            for path in harness.files() or []
            if path.exists() and marker in path.read_bytes()
        ]
        assert leftover == []

    def test_a_forgotten_or_purged_notebook_verifies(
        self, notebooks: Notebooks, store: MemoryStore, clock: FakeClock, access: PurgeAccess
    ) -> None:
        forgotten = notebooks.open("ann", "doc", "run-1")
        write(store, forgotten.id, 0, "r-1", add("note:a"), now=clock())
        notebooks.forget(forgotten.id, "ann")
        purged = notebooks.open("ann", "doc", "run-2")
        write(store, purged.id, 0, "r-1", add("note:b"), now=clock())
        clock.advance(hours=25)
        purge_expired(access, clock())
        for notebook_id in (forgotten.id, purged.id):
            report = verify_notebook(store, notebook_id)
            assert report.ok, report.problems
