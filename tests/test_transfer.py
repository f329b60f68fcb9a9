"""Export and import (SPEC §9), and the same bytes on every backend.

The same writes through the embedded backend and PostgreSQL give the same digests, hash
chains and exports, byte for byte; an export from one imports into the other (and back) with
identical digests and a passing verify; a damaged, truncated or edited export imports nothing.
"""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from oh.cli.transfer import cmd_export, cmd_import
from oh.core.canonical import canonical_text, sha256_hex
from oh.core.changes import parse_changes
from oh.core.records import Record
from oh.core.reviewed import Decision, Proposal, Source
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument
from oh.storage.base import KnowledgeStore, MemoryStore
from oh.storage.memory import InMemoryDatabase, InMemoryKnowledgeStore, InMemoryStore
from oh.storage.postgres.knowledge import PostgresKnowledgeStore
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.knowledge import SOURCE
from oh.testing.memory_store import LIFETIME, T0
from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster
from oh.transfer import check_export, export_knowledge, export_notebooks, import_export
from oh.verify import verify_knowledge, verify_store

NOTEBOOK = "nb_" + "0" * 31 + "1"
TOMBSTONE = "nb_" + "0" * 31 + "2"
OPENING = "nb_" + "0" * 31 + "3"
FIELDS = {
    "temperature": 29.4,
    "ratio": 1e-7,
    "big": 9007199254740991,
    "ok": True,
    "none": None,
    "nested": {"é": ["🐠", {"z": 1, "a": [0.5, -0.0]}]},
}


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


@pytest.fixture
def libsql_memory(tmp_path: Path) -> Iterator[MemoryStore]:
    store = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    yield store
    store.close()


@pytest.fixture
def libsql_knowledge(tmp_path: Path) -> Iterator[KnowledgeStore]:
    store = SqliteKnowledgeStore(tmp_path / "knowledge.db", synchronous="NORMAL")
    yield store
    store.close()


@pytest.fixture
def pg_memory(schema: Schema) -> Iterator[MemoryStore]:
    store = PostgresMemoryStore(schema.url())
    yield store
    store.close()


@pytest.fixture
def pg_knowledge(schema: Schema) -> Iterator[KnowledgeStore]:
    store = PostgresKnowledgeStore(schema.url())
    yield store
    store.close()


def remember(store: MemoryStore, notebook: str, based_on: int, *changes: dict[str, Any]) -> Any:
    return store.remember(
        notebook,
        based_on=based_on,
        request_id=f"r-{based_on}",
        changes=parse_changes(list(changes)),
        author="agent:run-1",
        now=T0 + timedelta(minutes=based_on),
    )


def fill_memory(store: MemoryStore) -> list[Any]:
    """The same notebooks and writes, in the same order, with the same ids and times."""
    for notebook_id, run in ((NOTEBOOK, "run-1"), (TOMBSTONE, "run-2"), (OPENING, "run-3")):
        store.create_notebook(
            notebook_id,
            owner="ann",
            document="reef.pdf",
            run=run,
            started_at=T0,
            forgets_at=T0 + LIFETIME,
            pinned_revision=2,
        )
    store.mark_open(NOTEBOOK, 2)
    store.mark_open(TOMBSTONE, 2)
    results = [
        remember(
            store,
            NOTEBOOK,
            0,
            {"op": "add", "record": {"name": "lead:survey", "text": "methods missing — é 🐠"}},
            {
                "op": "add",
                "record": {
                    "name": "finding:threshold",
                    "text": "bleaching at 29.4C",
                    "fields": FIELDS,
                    "supports": ["lead:survey", "study:hughes-2018"],
                },
            },
        ),
        remember(
            store,
            NOTEBOOK,
            1,
            {"op": "replace", "record": {"name": "lead:survey", "text": "methods in annex"}},
            {"op": "add", "record": {"name": "note:dataset", "text": "ends 2014"}},
        ),
        remember(store, NOTEBOOK, 2, {"op": "remove", "name": "note:dataset"}),
        remember(store, TOMBSTONE, 0, {"op": "add", "record": {"name": "note:gone", "text": "x"}}),
    ]
    store.forget(TOMBSTONE, T0 + timedelta(hours=1))
    return [r.to_json() for r in results]


def fill_knowledge(store: KnowledgeStore) -> None:
    """The same proposals and decisions with the same ids and times, and a pack install."""
    source = Source.parse(SOURCE)
    texts = [("finding:a", "ten years"), ("finding:b", "five years"), ("finding:a", "twelve")]
    for index, (name, text) in enumerate(texts):
        record = Record.parse({"name": name, "text": text, "fields": FIELDS})
        store.add_proposal(
            Proposal(
                id=f"pr_{index:032d}",
                owner="ann",
                proposed_by="ann",
                proposed_at=f"2026-11-29T12:0{index}:00.000000Z",
                name=name,
                content=record.canonical(),
                digest=record.digest,
                source=source,
                note={"notebook": NOTEBOOK, "name": name, "author": "agent:run-1", "version": 1},
            )
        )
        store.accept(
            f"pr_{index:032d}",
            Decision("accept", "ann", f"2026-11-29T13:0{index}:00.000000Z", "checked"),
            record,
            author="ann",
        )
    pack = canonical_text({"name": "research", "kinds": {"finding": {"fields": {}}}})
    store.install_pack(
        "ann",
        name="research",
        version="1.0.0",
        digest=sha256_hex(pack),
        content=pack,
        expected={},
        made_by="ann",
        made_at="2026-11-29T14:00:00.000000Z",
    )
    rejected = Record.parse({"name": "finding:guess", "text": "a guess"})
    for owner in ("ann", "bob"):  # bob has a proposal but no knowledge base
        proposal_id = f"pr_{owner}{'9' * 29}"
        store.add_proposal(
            Proposal(
                id=proposal_id,
                owner=owner,
                proposed_by=owner,
                proposed_at="2026-11-29T15:00:00.000000Z",
                name=rejected.name,
                content=rejected.canonical(),
                digest=rejected.digest,
                source=source,
            )
        )
        store.reject(
            proposal_id, Decision("reject", owner, "2026-11-29T15:01:00.000000Z", "no source")
        )
    store.add_proposal(
        Proposal(
            id="pr_" + "8" * 32,
            owner="ann",
            proposed_by="ann",
            proposed_at="2026-11-29T16:00:00.000000Z",
            name=rejected.name,
            content=rejected.canonical(),
            digest=rejected.digest,
            source=source,
        )
    )


def verifies(store: MemoryStore) -> bool:
    """``verify_store`` passes, except that (today) ``oh.verify`` reports a tombstone, which
    keeps its version and head but no log, as a truncated log; nothing else may be wrong."""
    report = verify_store(store)
    return report.notebooks == 3 and all(
        p.notebook_id == TOMBSTONE and p.what == "head" for p in report.problems
    )


def notebooks_export(store: MemoryStore) -> bytes:
    out = io.BytesIO()
    export_notebooks(store, out)
    return out.getvalue()


def knowledge_export(store: KnowledgeStore) -> bytes:
    out = io.BytesIO()
    export_knowledge(store, out)
    return out.getvalue()


# -- the same bytes on both backends -----------------------------------------------------------


def test_the_same_writes_give_the_same_digests_and_exports_on_both_backends(
    libsql_memory: MemoryStore, pg_memory: MemoryStore
) -> None:
    assert fill_memory(libsql_memory) == fill_memory(pg_memory)
    assert libsql_memory.records(NOTEBOOK) == pg_memory.records(NOTEBOOK)
    assert list(libsql_memory.log(NOTEBOOK)) == list(pg_memory.log(NOTEBOOK))
    for notebook in (NOTEBOOK, TOMBSTONE, OPENING):
        assert libsql_memory.notebook(notebook) == pg_memory.notebook(notebook)
    exported = notebooks_export(libsql_memory)
    assert exported == notebooks_export(pg_memory)
    assert b"\xf0\x9f\x90\xa0" in exported  # UTF-8, not escaped: RFC 8785


def test_the_same_decisions_give_the_same_knowledge_exports_on_both_backends(
    libsql_knowledge: KnowledgeStore, pg_knowledge: KnowledgeStore
) -> None:
    fill_knowledge(libsql_knowledge)
    fill_knowledge(pg_knowledge)
    assert libsql_knowledge.revisions("ann") == pg_knowledge.revisions("ann")
    assert libsql_knowledge.records_at("ann", 2) == pg_knowledge.records_at("ann", 2)
    assert libsql_knowledge.installed_packs("ann") == pg_knowledge.installed_packs("ann")
    assert knowledge_export(libsql_knowledge) == knowledge_export(pg_knowledge)


def test_the_in_memory_reference_gives_the_same_bytes_as_the_embedded_backend(
    libsql_memory: MemoryStore, libsql_knowledge: KnowledgeStore
) -> None:
    database = InMemoryDatabase()
    memory, knowledge = InMemoryStore(database), InMemoryKnowledgeStore(database)
    assert fill_memory(memory) == fill_memory(libsql_memory)
    assert list(memory.log(NOTEBOOK)) == list(libsql_memory.log(NOTEBOOK))
    for notebook in (NOTEBOOK, TOMBSTONE, OPENING):
        assert memory.notebook(notebook) == libsql_memory.notebook(notebook)
        assert memory.notebook_seal(notebook) == libsql_memory.notebook_seal(notebook)
    assert notebooks_export(memory) == notebooks_export(libsql_memory)
    fill_knowledge(knowledge)
    fill_knowledge(libsql_knowledge)
    assert knowledge.installed_packs("ann") == libsql_knowledge.installed_packs("ann")
    assert knowledge_export(knowledge) == knowledge_export(libsql_knowledge)


# -- round trips -------------------------------------------------------------------------------


def test_an_embedded_export_imports_into_postgres_and_back_unchanged(
    libsql_memory: MemoryStore, pg_memory: MemoryStore, tmp_path: Path
) -> None:
    fill_memory(libsql_memory)
    exported = notebooks_export(libsql_memory)
    report = import_export(io.BytesIO(exported), memory=pg_memory)
    assert (report.notebooks, report.entries) == (3, 3)
    assert notebooks_export(pg_memory) == exported
    assert pg_memory.records(NOTEBOOK) == libsql_memory.records(NOTEBOOK)
    assert verifies(pg_memory)
    back = SqliteMemoryStore(tmp_path / "back.db")
    try:
        import_export(io.BytesIO(notebooks_export(pg_memory)), memory=back)
        assert notebooks_export(back) == exported
        assert verifies(back)
    finally:
        back.close()


def test_an_imported_notebook_behaves_like_the_original(
    libsql_memory: MemoryStore, pg_memory: MemoryStore
) -> None:
    fill_memory(libsql_memory)
    import_export(io.BytesIO(notebooks_export(libsql_memory)), memory=pg_memory)
    # An identical retry of an imported write returns the original result; the next write
    # continues the chain; a tombstone stays a tombstone.
    again = remember(
        pg_memory,
        NOTEBOOK,
        2,
        {"op": "remove", "name": "note:dataset"},
    )
    assert again.to_json() == {
        "status": "applied",
        "version": 3,
        "written": [{"name": "note:dataset", "digest": None}],
    }
    following = remember(
        pg_memory, NOTEBOOK, 3, {"op": "add", "record": {"name": "note:next", "text": "y"}}
    )
    assert following.to_json()["version"] == 4
    assert verifies(pg_memory)
    assert pg_memory.notebook(TOMBSTONE).state == "purged"
    assert pg_memory.notebook(OPENING).state == "opening"


def test_a_knowledge_export_imports_into_postgres_and_back_unchanged(
    libsql_knowledge: KnowledgeStore, pg_knowledge: KnowledgeStore, tmp_path: Path
) -> None:
    fill_knowledge(libsql_knowledge)
    exported = knowledge_export(libsql_knowledge)
    report = import_export(io.BytesIO(exported), knowledge=pg_knowledge)
    assert (report.owners, report.revisions, report.proposals) == (2, 4, 6)
    assert knowledge_export(pg_knowledge) == exported
    assert verify_knowledge(pg_knowledge).ok
    assert pg_knowledge.proposal_owners() == ["ann", "bob"]
    back = SqliteKnowledgeStore(tmp_path / "back.db")
    try:
        import_export(io.BytesIO(knowledge_export(pg_knowledge)), knowledge=back)
        assert knowledge_export(back) == exported
        assert verify_knowledge(back).ok
    finally:
        back.close()


def test_an_embedded_export_imports_into_the_in_memory_reference_and_back_unchanged(
    libsql_memory: MemoryStore, libsql_knowledge: KnowledgeStore, tmp_path: Path
) -> None:
    fill_memory(libsql_memory)
    fill_knowledge(libsql_knowledge)
    notebooks, knowledge = notebooks_export(libsql_memory), knowledge_export(libsql_knowledge)
    database = InMemoryDatabase()
    memory, reviewed = InMemoryStore(database), InMemoryKnowledgeStore(database)
    import_export(io.BytesIO(notebooks), memory=memory)
    import_export(io.BytesIO(knowledge), knowledge=reviewed)
    assert (notebooks_export(memory), knowledge_export(reviewed)) == (notebooks, knowledge)
    assert verifies(memory)
    assert verify_knowledge(reviewed).ok
    with pytest.raises(AlreadyExists):
        import_export(io.BytesIO(notebooks), memory=memory)
    with pytest.raises(AlreadyExists):
        import_export(io.BytesIO(knowledge), knowledge=reviewed)
    back = SqliteMemoryStore(tmp_path / "back.db")
    try:
        import_export(io.BytesIO(notebooks_export(memory)), memory=back)
        assert notebooks_export(back) == notebooks
    finally:
        back.close()


def test_selected_notebooks_export_alone(libsql_memory: MemoryStore) -> None:
    fill_memory(libsql_memory)
    out = io.BytesIO()
    report = export_notebooks(libsql_memory, out, [NOTEBOOK])
    assert (report.notebooks, report.entries) == (1, 3)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["type"] for line in lines] == [
        "header",
        "notebook",
        "entry",
        "entry",
        "entry",
        "end",
    ]
    assert lines[-1]["sha256"] == sha256_hex(b"".join(out.getvalue().splitlines(True)[:-1]))


# -- damaged exports import nothing ------------------------------------------------------------


def _retrailer(lines: list[bytes]) -> bytes:
    """Rebuild the trailer so only the deeper checks can catch an edit."""
    body = b"".join(lines)
    trailer = {"type": "end", "lines": len(lines), "sha256": sha256_hex(body)}
    return body + canonical_text(trailer).encode() + b"\n"


def _edit(exported: bytes, index: int, change: Any) -> bytes:
    lines = exported.splitlines(True)[:-1]
    value = json.loads(lines[index])
    change(value)
    lines[index] = canonical_text(value).encode() + b"\n"
    return _retrailer(lines)


def _swap_content(value: dict[str, Any]) -> None:
    value["changes"][0]["content"] = value["changes"][0]["content"].replace("methods", "nothing")


def _drop_entry(exported: bytes) -> bytes:
    lines = exported.splitlines(True)[:-1]
    del lines[3]
    return _retrailer(lines)


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        (lambda e: e[:-1], IntegrityError),  # cut in the middle of the trailer
        (lambda e: b"".join(e.splitlines(True)[:-1]), IntegrityError),  # no trailer
        (lambda e: e.replace(b"ends 2014", b"ends 2024"), IntegrityError),  # trailer mismatch
        (lambda e: _edit(e, 2, _swap_content), IntegrityError),  # content vs digest
        (lambda e: _edit(e, 2, lambda v: v.update(author="mallory")), IntegrityError),  # chain
        (_drop_entry, IntegrityError),  # a missing entry
        (lambda e: _edit(e, 1, lambda v: v.update(version=9)), IntegrityError),  # head
        (lambda e: _edit(e, 0, lambda v: v.update(format_version=2)), InvalidArgument),
        (lambda e: _edit(e, 2, lambda v: v.update(changes=[])), InvalidArgument),  # no change
        (lambda e: _edit(e, 2, lambda v: v.update(changes=v["changes"] * 65)), InvalidArgument),
        (lambda e: b"not json\n", InvalidArgument),
        (lambda e: b"", InvalidArgument),
    ],
)
def test_a_damaged_export_imports_nothing(
    libsql_memory: MemoryStore, pg_memory: MemoryStore, damage: Any, error: type
) -> None:
    fill_memory(libsql_memory)
    damaged = damage(notebooks_export(libsql_memory))
    with pytest.raises(error):
        import_export(io.BytesIO(damaged), memory=pg_memory)
    assert pg_memory.notebook_ids() == []


def _give_the_tombstone_an_entry(exported: bytes) -> bytes:
    lines = exported.splitlines(True)[:-1]
    tombstone = next(i for i, line in enumerate(lines) if TOMBSTONE.encode() in line)
    lines.insert(tombstone + 1, lines[tombstone - 1])
    return _retrailer(lines)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_drop_entry, "line 4: entry 3 where 2 belongs"),
        (lambda e: _edit(e, 3, lambda v: v.update(version=1)), "line 4: entry 1 where 2 belongs"),
        (
            lambda e: _edit(e, 2, lambda v: v.update(author="mallory")),
            "line 3: entry 1 breaks the hash chain",
        ),
        (
            lambda e: _edit(e, 3, lambda v: v.update(prev_hash="0" * 64)),
            "line 4: entry 2 breaks the hash chain",
        ),
        (
            lambda e: _edit(e, 1, lambda v: v.update(version=9)),
            f"notebook {NOTEBOOK}: notebook {NOTEBOOK} says version 9; its log ends at 3"
            " (truncated?)",
        ),
        (_give_the_tombstone_an_entry, "line 7: a purged notebook has no log"),
    ],
)
def test_an_export_whose_chain_breaks_is_refused_where_it_breaks(
    libsql_memory: MemoryStore, damage: Any, message: str
) -> None:
    fill_memory(libsql_memory)
    with pytest.raises(IntegrityError) as info:
        check_export(io.BytesIO(damage(notebooks_export(libsql_memory))))
    assert info.value.message == message


def test_a_non_canonical_line_is_refused(libsql_memory: MemoryStore) -> None:
    fill_memory(libsql_memory)
    lines = notebooks_export(libsql_memory).splitlines(True)[:-1]
    lines[1] = json.dumps(json.loads(lines[1]), indent=1).replace("\n", " ").encode() + b"\n"
    target = SqliteMemoryStore(":memory:")
    try:
        with pytest.raises(IntegrityError, match="canonical"):
            import_export(io.BytesIO(_retrailer(lines)), memory=target)
    finally:
        target.close()


def test_importing_what_exists_is_refused_or_skipped(
    libsql_memory: MemoryStore, pg_memory: MemoryStore
) -> None:
    fill_memory(libsql_memory)
    exported = notebooks_export(libsql_memory)
    import_export(io.BytesIO(exported), memory=pg_memory)
    with pytest.raises(AlreadyExists):
        import_export(io.BytesIO(exported), memory=pg_memory)
    report = import_export(io.BytesIO(exported), memory=pg_memory, skip_existing=True)
    assert report.notebooks == 0
    assert sorted(report.skipped) == sorted([NOTEBOOK, TOMBSTONE, OPENING])
    assert notebooks_export(pg_memory) == exported


def test_a_knowledge_export_needs_a_knowledge_store(
    libsql_knowledge: KnowledgeStore, libsql_memory: MemoryStore
) -> None:
    fill_knowledge(libsql_knowledge)
    with pytest.raises(InvalidArgument):
        import_export(io.BytesIO(knowledge_export(libsql_knowledge)), memory=libsql_memory)


# -- the commands ------------------------------------------------------------------------------


def _args(**values: Any) -> argparse.Namespace:
    defaults: dict[str, Any] = {
        "data": None,
        "memory_url": None,
        "knowledge_url": None,
        "notebook": None,
        "notebooks": False,
        "knowledge": False,
        "out": "-",
        "quiet": False,
        "skip_existing": False,
    }
    return argparse.Namespace(**(defaults | values))


def test_oh_export_and_import_move_a_data_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    target.mkdir()  # only oh serve and oh token create start a data directory
    memory = SqliteMemoryStore(source / "memory.db")
    knowledge = SqliteKnowledgeStore(source / "knowledge.db")
    fill_memory(memory)
    fill_knowledge(knowledge)
    memory.close()
    knowledge.close()
    for what, file in (("notebooks", "memory.jsonl"), ("knowledge", "knowledge.jsonl")):
        flags = {"notebooks": True} if what == "notebooks" else {"knowledge": True}
        assert cmd_export(_args(data=str(source), out=str(tmp_path / file), **flags)) == 0
        assert "export:" in capsys.readouterr().err
        assert cmd_import(_args(data=str(target), file=str(tmp_path / file))) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["event"] == "import"
    moved_memory = SqliteMemoryStore(target / "memory.db")
    moved_knowledge = SqliteKnowledgeStore(target / "knowledge.db")
    try:
        assert notebooks_export(moved_memory) == (tmp_path / "memory.jsonl").read_bytes()
        assert knowledge_export(moved_knowledge) == (tmp_path / "knowledge.jsonl").read_bytes()
        assert verifies(moved_memory)
        assert verify_knowledge(moved_knowledge).ok
    finally:
        moved_memory.close()
        moved_knowledge.close()
    assert not list(tmp_path.glob("*.partial"))
