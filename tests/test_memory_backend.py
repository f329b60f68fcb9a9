"""The in-memory backend's harnesses (tests/test_conformance.py runs every conformance suite on
them unchanged), its stateful model run, and a host on it.

Its harnesses tamper with the database's rows directly, as raw SQL does with a file; the tests
of what a SQL database itself refuses to raw SQL skip, since nothing lies beneath the backend's
own code to refuse it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from oh.core.changes import LogEntry
from oh.core.records import StoredRecord
from oh.host import Host
from oh.storage.base import KnowledgeSource
from oh.storage.memory import (
    InMemoryDatabase,
    InMemoryHostRegistry,
    InMemoryKnowledgeStore,
    InMemoryPurgeAccess,
    InMemoryStore,
    KeptAnswer,
    NotebookRow,
)
from oh.testing.declared import FILES, RAW_SQL
from oh.testing.knowledge import publish_by_review
from oh.testing.lifecycle import FakeClock
from oh.testing.stateful import notebook_machine
from oh.testing.tampering import Edit

# -- tampering: an Edit made to the rows themselves ---------------------------------------------

Columns = dict[str, Any]


def _substituted(value: Any, old: str, new: str) -> Any:
    """SQL's ``replace`` on a column's text (each text, for a log row's contents); NULL stays."""
    if isinstance(value, tuple):
        return tuple(_substituted(item, old, new) for item in value)
    return None if value is None else value.replace(old, new)


def _edited(rows: list[Columns], edit: Edit) -> list[Columns]:
    """``rows`` after ``edit``, as its statement would leave them."""
    if edit.action == "insert":
        return [*rows, dict(edit.values)]
    kept = []
    for row in rows:
        if any(row[column] != value for column, value in edit.where.items()):
            kept.append(row)
        elif edit.action == "update":
            row = {**row, **edit.values}
            if edit.substitute is not None:
                column, old, new = edit.substitute
                row[column] = _substituted(row[column], old, new)
            kept.append(row)
    return kept


def _log_entry(row: Columns) -> LogEntry:
    contents = row.pop("content")
    row["changes"] = tuple(
        change._replace(content=content)
        for change, content in zip(row["changes"], contents, strict=True)
    )
    return LogEntry(**row)


def _record(row: Columns) -> tuple[str, StoredRecord]:
    del row["notebook_id"]
    return row["name"], StoredRecord(**row)


# Each content table (notebook id → key → row): a row as named columns, its notebook's id among
# them, and from columns back to its key and row. A log row's ``content`` holds its changes'
# contents, as the embedded backend's log row does.
_CONTENT_TABLES: dict[str, tuple[Callable[[str, Any], Columns], Callable[[Columns], Any]]] = {
    "log": (
        lambda _, entry: {**entry._asdict(), "content": tuple(c.content for c in entry.changes)},
        lambda row: (row["request_id"], _log_entry(row)),
    ),
    "records": (
        lambda notebook_id, record: {"notebook_id": notebook_id, **dataclasses.asdict(record)},
        _record,
    ),
    "answers": (
        lambda _, answer: answer._asdict(),
        lambda row: (row["answer_id"], KeptAnswer(**row)),
    ),
}


def tamper(database: InMemoryDatabase, edit: Edit) -> None:
    """Make ``edit`` to the database's rows directly: read the table as rows of named columns,
    edit them as the statement would, and put them back keyed as the database keys them."""
    with database.lock:
        if edit.table == "notebooks":
            rows = [row._asdict() for row in database.notebooks.values()]
            database.notebooks = {row["id"]: NotebookRow(**row) for row in _edited(rows, edit)}
            return
        columns, back = _CONTENT_TABLES[edit.table]
        table: dict[str, dict[str, Any]] = getattr(database, edit.table)
        rows = [columns(n, row) for n, keyed in table.items() for row in keyed.values()]
        table.clear()
        for row in _edited(rows, edit):
            notebook_id = row["notebook_id"]
            key, value = back(row)
            table.setdefault(notebook_id, {})[key] = value


# -- the harnesses --------------------------------------------------------------------------------


class InMemoryHarness:
    """Every store a harness opens shares its one database, as connections share a file."""

    change_table = "log"  # an entry keeps its changes, as in the embedded backend
    # Rows live in Python objects: no database beneath to refuse raw SQL, no file to scan.
    cannot = frozenset({RAW_SQL, FILES})

    def __init__(self) -> None:
        self.database = InMemoryDatabase()

    def open(self) -> InMemoryStore:
        return InMemoryStore(self.database)

    def open_memory(self) -> InMemoryStore:
        return self.open()

    def open_knowledge(self) -> InMemoryKnowledgeStore:
        return InMemoryKnowledgeStore(self.database)

    def tamper(self, edit: Edit) -> None:
        tamper(self.database, edit)

    def tamper_memory(self, edit: Edit) -> None:
        tamper(self.database, edit)

    def purge_access(self) -> InMemoryPurgeAccess:
        return InMemoryPurgeAccess(self.database)

    def files(self) -> None:
        return None  # no files to scan for forgotten text


class InMemorySourceHarness(InMemoryHarness):
    def open(self) -> InMemoryKnowledgeStore:  # type: ignore[override]
        return self.open_knowledge()

    def publish(self, source: KnowledgeSource, owner: str, record: dict[str, Any]) -> int:
        assert isinstance(source, InMemoryKnowledgeStore)
        return publish_by_review(source, InMemoryStore(self.database), owner, record)


def test_the_store_matches_the_model_over_random_steps() -> None:
    database = InMemoryDatabase()
    machine = notebook_machine(lambda: InMemoryStore(database))
    machine.TestCase.settings = settings(
        max_examples=50,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase().runTest()


# -- beyond the suites ----------------------------------------------------------------------------


def test_a_host_runs_on_the_in_memory_backend() -> None:
    database = InMemoryDatabase()
    host = Host(
        InMemoryStore(database),
        InMemoryKnowledgeStore(database),
        InMemoryHostRegistry(database),
        clock=FakeClock(),
    )
    owner = host.owner(host.create_owner_token("ann"))
    assert host.register_document(owner, "reef.pdf") is True
    notebook, created = host.open_notebook(owner, "reef.pdf", "run-1")
    token = host.agent_token(notebook.id)
    written = host.call_tool(
        token,
        "remember",
        {
            "based_on": 0,
            "request_id": "r-1",
            "changes": [{"op": "add", "record": {"name": "lead:survey", "text": "methods"}}],
        },
    )
    assert (created, written["status"], written["version"]) == (True, "applied", 1)
    rows = host.call_tool(token, "query", {"question": "current_notes"})["rows"]
    assert [row["name"] for row in rows] == ["lead:survey"]
    # The shared secret is the registry's: a second host on the database accepts the token.
    again = Host(
        InMemoryStore(database),
        InMemoryKnowledgeStore(database),
        InMemoryHostRegistry(database),
        clock=FakeClock(),
    )
    assert again.call_tool(token, "read", {"name": "lead:survey"})["text"] == "methods"
    assert host.forget(owner, notebook.id)["removed"] == {"answers": 1, "records": 1, "log": 1}


class CountingStore(InMemoryStore):
    """An in-memory store that counts reads of a notebook's row outside a write."""

    def __init__(self, database: InMemoryDatabase) -> None:
        super().__init__(database)
        self.notebook_reads = 0

    def notebook(self, notebook_id: str) -> Any:
        self.notebook_reads += 1
        return super().notebook(notebook_id)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (
            "remember",
            {
                "based_on": 1,
                "request_id": "r-2",
                "changes": [{"op": "add", "record": {"name": "lead:b", "text": "b"}}],
            },
        ),
        ("query", {"question": "current_notes"}),
        ("explain", {"row": 0}),
    ],
)
def test_a_tool_call_reads_its_notebook_once(tool: str, arguments: dict[str, Any]) -> None:
    # The host reads the notebook to recheck the caller's access and hands it to the tool; a
    # write's transaction reads it again under its lock, and that read decides.
    database = InMemoryDatabase()
    memory = CountingStore(database)
    host = Host(
        memory, InMemoryKnowledgeStore(database), InMemoryHostRegistry(database), clock=FakeClock()
    )
    owner = host.owner(host.create_owner_token("ann"))
    host.register_document(owner, "reef.pdf")
    notebook, _ = host.open_notebook(owner, "reef.pdf", "run-1")
    token = host.agent_token(notebook.id)
    first = {
        "based_on": 0,
        "request_id": "r-1",
        "changes": [{"op": "add", "record": {"name": "lead:a", "text": "a"}}],
    }
    assert host.call_tool(token, "remember", first)["status"] == "applied"
    if tool == "explain":
        answer = host.call_tool(token, "query", {"question": "current_notes"})
        arguments = {**arguments, "token": answer["token"]}
    memory.notebook_reads = 0
    result = host.call_tool(token, tool, arguments)
    assert "error" not in result, result
    assert memory.notebook_reads == 1


def test_a_harness_lacking_a_channel_must_declare_it() -> None:
    """An undeclared gap fails the test (a harness bug); a declared one is a reported skip."""
    from oh.testing.tampering import require_sql

    class Forgetful:
        pass

    class Declared:
        cannot = frozenset({RAW_SQL})

    with pytest.raises(pytest.fail.Exception, match="does not declare it"):
        require_sql(Forgetful(), "execute")
    with pytest.raises(pytest.skip.Exception, match=r"^declared: Declared cannot offer raw SQL"):
        require_sql(Declared(), "execute")
