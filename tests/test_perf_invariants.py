"""The fast paths give exactly what the definitions give.

Writes and verify take shortcuts measured in bench/bench_store.py: the fingerprint assembled from
the canonical texts already made for the log, record contents and entry hashes written out
without the validation walk, a pattern that recognises canonical note contents without parsing
them, the log read in small pages, the changes of a call sent to SQLite as one JSON array, and a
verify that keeps hashes instead of contents. Each test here holds one shortcut equal to the
reference it replaces, on generated values and on tampered databases.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_text, load_canonical, sha256_hex
from oh.core.changes import (
    Add,
    Change,
    LogEntry,
    LoggedChange,
    Remove,
    Replace,
    entry_hash,
    fingerprint,
    fingerprint_and_log,
    genesis_hash,
    log_changes,
    parse_changes,
)
from oh.core.records import Record, StoredRecord, kind_of
from oh.errors import InvalidArgument, OhError
from oh.storage.base import MemoryStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.memory_store import T0, add, open_notebook, remove, replace, write
from oh.verify import Problem, VerifyReport, rebuild, replay, verify_notebook
from oh.verify.report import is_canonical

PROPERTY = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
STORE = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# Characters serializers get wrong: every escape class, DEL, JavaScript's line separators, the
# first non-ASCII code points, BMP characters above the surrogates, astral characters.
TRICKY = (
    "\x00\x01\x07\x08\t\n\x0b\x0c\r\x0e\x1f \"'/\\\x7f\x80\xa0\xe9\u2028\u2029\ue000\uffff"
    "\U00010000\U0001f600"
)
texts = st.text(st.one_of(st.sampled_from(TRICKY), st.characters(codec="utf-8")), max_size=30)
names = st.builds(
    "{}:{}".format,
    st.sampled_from(["note", "lead", "k_9"]),
    st.text("abz09._-", min_size=1, max_size=6).filter(lambda s: s[0] not in "._-"),
)
field_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def records(draw: st.DrawFn, name: str | None = None) -> Record:
    name = name or draw(names)
    value: dict[str, Any] = {"name": name, "text": draw(texts)}
    if draw(st.booleans()):
        value["fields"] = draw(st.dictionaries(texts, field_values, max_size=3))
    for key in ("depends_on", "supports", "contradicts"):
        if draw(st.booleans()):
            value[key] = draw(st.lists(names.filter(lambda n: n != name), max_size=3, unique=True))
    return Record.parse(value)


@st.composite
def change_lists(draw: st.DrawFn) -> tuple[Change, ...]:
    chosen = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    changes: list[Change] = []
    for name in chosen:
        op = draw(st.sampled_from(["add", "replace", "remove"]))
        if op == "remove":
            changes.append(Remove(name))
        else:
            record = draw(records(name))
            changes.append(Add(record) if op == "add" else Replace(record))
    return tuple(changes)


def reference_log_changes(changes: tuple[Change, ...]) -> tuple[LoggedChange, ...]:
    return tuple(
        LoggedChange("remove", c.name, None, None)
        if isinstance(c, Remove)
        else LoggedChange(c.op, c.name, c.record.canonical(), c.record.digest)
        for c in changes
    )


def reference_entry_hash(*args: Any) -> str:
    notebook_id, version, request_id, fp, author, written_at, changes, prev_hash = args
    body = {
        "notebook": notebook_id,
        "version": version,
        "request_id": request_id,
        "fingerprint": fp,
        "author": author,
        "written_at": written_at,
        "changes": [[c.op, c.name, c.digest] for c in changes],
        "prev_hash": prev_hash,
    }
    return sha256_hex(canonical_text(body))


# -- writes ------------------------------------------------------------------------------------


@PROPERTY
@given(change_lists(), st.integers(0, MAX_SAFE_INTEGER))
def test_the_fast_fingerprint_and_log_equal_the_reference(
    changes: tuple[Change, ...], based_on: int
) -> None:
    assert fingerprint_and_log(based_on, changes) == (
        fingerprint(based_on, changes),
        reference_log_changes(changes),
    )
    assert log_changes(changes) == reference_log_changes(changes)


@pytest.mark.parametrize("based_on", [True, -1, MAX_SAFE_INTEGER + 1, 2.0])
def test_an_unusual_based_on_takes_the_reference_fingerprint(based_on: Any) -> None:
    changes = parse_changes([add("note:a")])
    try:
        expected: Any = fingerprint(based_on, changes)
    except InvalidArgument as exc:
        expected = type(exc)
    try:
        got: Any = fingerprint_and_log(based_on, changes)[0]
    except InvalidArgument as exc:
        got = type(exc)
    assert got == expected


def test_records_built_without_validation_are_refused_as_before() -> None:
    for bad in (
        Record(name="note:a", text="lone \ud800 surrogate"),
        Record(name="note:a", text="x", fields={"n": float("nan")}),
        Record(name="note:a", text="x", supports=("note:\udfff",)),
    ):
        with pytest.raises(InvalidArgument):
            fingerprint_and_log(0, (Add(bad),))
        with pytest.raises(InvalidArgument):
            log_changes((Add(bad),))


def test_fields_nested_to_the_limit_are_refused_as_before() -> None:
    deep: Any = "leaf"
    for _ in range(30):
        deep = [deep]
    record = Record.parse({"name": "note:deep", "text": "x", "fields": {"a": deep}})
    with pytest.raises(InvalidArgument):
        fingerprint(0, (Add(record),))
    with pytest.raises(InvalidArgument):
        fingerprint_and_log(0, (Add(record),))


@PROPERTY
@given(
    change_lists(),
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    texts,
    texts,
    texts,
)
def test_the_fast_entry_hash_equals_the_canonical_json_of_the_body(
    changes: tuple[Change, ...], version: int, request_id: str, author: str, stamp: str
) -> None:
    logged = log_changes(changes)
    args = ("nb_1", version, request_id, "f" * 64, author, stamp, logged, "0" * 64)
    assert entry_hash(*args) == reference_entry_hash(*args)
    assert entry_hash(*args[:6], iter(logged), args[7]) == reference_entry_hash(*args)


@pytest.mark.parametrize("version", [1.0, True, 2**60, "3"])
def test_an_entry_hash_with_an_unusual_value_takes_the_reference(version: Any) -> None:
    logged = log_changes(parse_changes([add("note:a")]))
    args = ("nb_1", version, "r-1", "f" * 64, "agent:a", "t", logged, "0" * 64)
    try:
        expected: Any = reference_entry_hash(*args)
    except InvalidArgument as exc:
        expected = type(exc)
    try:
        got: Any = entry_hash(*args)
    except InvalidArgument as exc:
        got = type(exc)
    assert got == expected


# -- the canonical check -------------------------------------------------------------------------


def reference_is_canonical(text: str) -> bool:
    try:
        return canonical_text(load_canonical(text)) == text
    except (ValueError, OhError):
        return False


MUTATIONS = [
    lambda t: t.replace(":", ": ", 1),
    lambda t: t.replace('"text":', '"text" :'),
    lambda t: t.replace('"contradicts":[]', '"contradicts":[ ]'),
    lambda t: t.replace('"fields":{}', '"fields":{"a":1.0}'),
    lambda t: t.replace('"fields":{}', '"fields":{"a":1e21}'),
    lambda t: t.replace('"fields":{}', '"fields":{"b":1,"a":2}'),
    lambda t: t.replace('"fields":{}', '"fields":{"a":9007199254740993}'),
    lambda t: t.replace("\\n", "\\u000a"),
    lambda t: t.replace("\\u001f", "\\u001F"),
    lambda t: t.replace("\u00e9", "\\u00e9"),
    lambda t: t.replace("/", "\\/"),
    lambda t: t.replace('"kind"', '"kind":"x","kind"'),
    lambda t: t.replace('"text":"', '"text":"\\ud800'),
    lambda t: t.replace('"text":"', '"text":"\ud800'),
    lambda t: t + " ",
    lambda t: "[" + t + "]",
]


@PROPERTY
@given(records(), st.integers(0, len(MUTATIONS) - 1))
def test_the_canonical_pattern_agrees_with_the_full_check(record: Record, mutation: int) -> None:
    text = record.canonical()
    assert is_canonical(text) and reference_is_canonical(text)  # numbers read as parse_json does
    changed = MUTATIONS[mutation](text)
    assert is_canonical(changed) == reference_is_canonical(changed)


# -- the store ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> SqliteMemoryStore:
    return SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")


DATABASES = itertools.count()  # hypothesis runs every example in the same tmp_path


@STORE
@given(st.lists(st.lists(records(), min_size=1, max_size=5), min_size=1, max_size=4))
def test_changes_travel_to_the_database_exactly(
    tmp_path: Path, batches: list[list[Record]]
) -> None:
    store = SqliteMemoryStore(tmp_path / f"{next(DATABASES)}.db", synchronous="NORMAL")
    try:
        notebook = open_notebook(store)
        expected: dict[str, str] = {}
        for version, batch in enumerate(batches):
            unique = {r.name: r for r in batch}
            changes = parse_changes(
                [
                    {
                        "op": "replace" if name in expected else "add",
                        "record": {**r.content()},
                    }
                    for name, r in unique.items()
                ]
            )
            write_changes(store, notebook, version, changes)
            expected.update({name: r.canonical() for name, r in unique.items()})
        assert {r.name: r.content for r in store.records(notebook)} == expected
        logged = [c.content for entry in store.log(notebook) for c in entry.changes]
        assert logged == [
            r.canonical() for batch in batches for r in {x.name: x for x in batch}.values()
        ]
        assert verify_notebook(store, notebook).ok
        before = store.records(notebook)
        assert rebuild(store, notebook) == len(before)
        assert store.records(notebook) == before
    finally:
        store.close()


def write_changes(
    store: MemoryStore, notebook: str, based_on: int, changes: tuple[Change, ...]
) -> None:
    store.remember(
        notebook,
        based_on=based_on,
        request_id=f"r-{based_on}",
        changes=changes,
        author="agent:a",
        now=T0,
    )


def fill(store: MemoryStore, notebook: str) -> None:
    """Entries of 1 to 5 changes: adds, replaces and removes, one write with 64 changes."""
    write(store, notebook, 0, "r-1", *[add(f"note:n{i:02d}", f"note {i}") for i in range(64)])
    write(store, notebook, 1, "r-2", replace("note:n01", "changed"), remove("note:n02"))
    write(store, notebook, 2, "r-3", add("note:solo", "one \u00e9 \U0001f600 \x00"))
    write(store, notebook, 3, "r-4", remove("note:n03"))
    for version in range(4, 12):
        write(
            store,
            notebook,
            version,
            f"r-{version + 1}",
            *[replace(f"note:n{i:02d}", f"v{version}") for i in range(version, version + 4)],
        )


def test_the_log_reads_the_same_in_pages_of_every_size(store: SqliteMemoryStore) -> None:
    notebook = open_notebook(store)
    fill(store, notebook)
    whole = list(store.log(notebook, batch=10**6))
    assert [e.version for e in whole] == list(range(1, 13))
    for batch in (1, 2, 3, 5):
        assert list(store.log(notebook, batch=batch)) == whole
    assert all(type(e) is LogEntry for e in whole)
    assert all(type(c) is LoggedChange for e in whole for c in e.changes)


def test_a_gap_in_the_log_reads_as_before(store: SqliteMemoryStore, tmp_path: Path) -> None:
    notebook = open_notebook(store)
    fill(store, notebook)
    conn = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
    conn.execute("DELETE FROM log WHERE notebook_id = ? AND version = 5", (notebook,))
    conn.close()
    for batch in (1, 4, 1000):
        assert [e.version for e in store.log(notebook, batch=batch)] == [
            v for v in range(1, 13) if v != 5
        ]


def reference_fold(state: dict[str, StoredRecord], entry: LogEntry) -> None:
    """The fold as first written: one change at a time, whole records kept."""
    for change in entry.changes:
        if change.op == "remove":
            state.pop(change.name, None)
        else:
            assert change.content is not None and change.digest is not None
            state[change.name] = StoredRecord(
                change.name,
                kind_of(change.name),
                change.content,
                change.digest,
                entry.author,
                entry.written_at,
                entry.version,
            )


def reference_replay(entries: list[LogEntry]) -> dict[str, StoredRecord]:
    state: dict[str, StoredRecord] = {}
    for entry in entries:
        reference_fold(state, entry)
    return state


def test_replay_is_the_fold_of_the_log(store: SqliteMemoryStore) -> None:
    notebook = open_notebook(store)
    fill(store, notebook)
    entries = list(store.log(notebook))
    assert replay(entries) == reference_replay(entries)
    assert sorted(replay(entries).values(), key=lambda r: r.name) == store.records(notebook)


# -- verify against the reference verify ------------------------------------------------------


def reference_verify(store: MemoryStore, notebook_id: str) -> VerifyReport:
    """verify_notebook as it was first written: whole records compared, contents held twice."""
    report = VerifyReport()
    problems = report.problems

    def problem(what: str, detail: str) -> None:
        problems.append(Problem(notebook_id, what, detail))

    notebook = store.notebook(notebook_id)
    report.notebooks += 1
    state: dict[str, StoredRecord] = {}
    prev = genesis_hash(notebook_id)
    expected_version = 0
    for entry in store.log(notebook_id):
        report.entries += 1
        expected_version += 1
        if entry.version != expected_version:
            problem("version", f"log entry {entry.version} found where {expected_version} belongs")
            expected_version = entry.version
        if entry.prev_hash != prev:
            problem("chain", f"entry {entry.version} does not follow the entry before it")
        if reference_entry_hash(*entry[:8]) != entry.hash:
            problem("chain", f"entry {entry.version} was altered (its hash does not match)")
        prev = entry.hash
        for change in entry.changes:
            if change.content is None:
                continue
            if sha256_hex(change.content) != change.digest:
                problem("digest", f"entry {entry.version}: {change.name} does not match its digest")
            elif not reference_is_canonical(change.content):
                problem("canonical", f"entry {entry.version}: {change.name} is not canonical")
        reference_fold(state, entry)
    if notebook.version != expected_version:
        problem("head", f"notebook says version {notebook.version}; log ends at {expected_version}")
    if notebook.head_hash != prev:
        problem("head", "notebook head hash does not match the last log entry (truncated log?)")
    current = {record.name: record for record in store.records(notebook_id)}
    report.records += len(current)
    for name in sorted(state.keys() | current.keys()):
        want, have = state.get(name), current.get(name)
        if want is None:
            problem("drift", f"{name} is current but the log removed or never wrote it")
        elif have is None:
            problem("drift", f"{name} is missing from the current records")
        elif have != want:
            problem("drift", f"{name} differs from the log's version {want.version}")
        if have is not None and sha256_hex(have.content) != have.digest:
            problem("digest", f"current {name} does not match its digest")
    return report


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


TAMPERING = [
    "UPDATE records SET content = replace(content, 'note', 'fake') WHERE name = 'note:n05'",
    "UPDATE records SET content = replace(content, 'note', 'fake'),"
    " digest = '{fake}' WHERE name = 'note:n06'",
    "UPDATE records SET digest = '{fake}' WHERE name = 'note:n07'",
    "UPDATE records SET author = 'agent:mallory' WHERE name = 'note:n08'",
    "UPDATE records SET written_at = 'yesterday' WHERE name = 'note:n09'",
    "UPDATE records SET version = 1 WHERE name = 'note:n10'",
    "UPDATE records SET kind = 'lead' WHERE name = 'note:n11'",
    "DELETE FROM records WHERE name IN ('note:n12', 'note:solo')",
    "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at, version)"
    " VALUES ('{nb}', 'note:ghost', 'note', '{{}}', 'x', 'a', 'b', 9)",
    # Entry 1 holds 64 changes, so its change columns are JSON arrays (migration 0006).
    "UPDATE log SET content = json_replace(content, '$[13]',"
    " replace(content ->> '$[13]', 'note', 'fake')) WHERE version = 1",
    "UPDATE log SET content = json_replace(content, '$[14]', '{noncanonical}'),"
    " digest = json_replace(digest, '$[14]', '{noncanonical_digest}') WHERE version = 1",
    "UPDATE log SET author = 'agent:mallory' WHERE version = 3",
    "UPDATE log SET digest = '{fake}' WHERE version = 4",
    "UPDATE log SET changes = 3, op = json_remove(op, '$[3]'), name = json_remove(name, '$[3]'),"
    " content = json_remove(content, '$[3]'), digest = json_remove(digest, '$[3]')"
    " WHERE version = 6",
    "UPDATE log SET prev_hash = '{fake}' WHERE version = 7",
    "UPDATE notebooks SET version = 99",
    "UPDATE notebooks SET head_hash = '{fake}'",
]


@pytest.mark.parametrize("count", [1, 2, 3])
@pytest.mark.parametrize("seed", range(8))
def test_verify_reports_exactly_what_the_reference_verify_reports(
    tmp_path: Path, seed: int, count: int
) -> None:
    store = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    notebook = open_notebook(store)
    fill(store, notebook)
    noncanonical = '{"text":"x", "name":"note:n14"}'
    values = {
        "nb": notebook,
        "fake": "f" * 64,
        "noncanonical": noncanonical,
        "noncanonical_digest": _sha(noncanonical),
    }
    conn = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
    conn.execute("PRAGMA foreign_keys=OFF")
    for sql in random.Random(seed).sample(TAMPERING, count):
        conn.execute(sql.format(**values))
    conn.close()
    got, want = verify_notebook(store, notebook), reference_verify(store, notebook)
    assert got.to_json() == want.to_json()
    assert not got.ok
    store.close()


def test_verify_of_an_untouched_notebook_is_the_reference_verify(
    store: SqliteMemoryStore,
) -> None:
    notebook = open_notebook(store)
    fill(store, notebook)
    assert verify_notebook(store, notebook).to_json() == reference_verify(store, notebook).to_json()
    assert verify_notebook(store, notebook).ok


def test_the_json_changes_keep_kind_as_the_name_prefix(store: SqliteMemoryStore) -> None:
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("k_9:a.b-c"), add("lead:x"))
    assert [(r.name, r.kind) for r in store.records(notebook)] == [
        ("k_9:a.b-c", kind_of("k_9:a.b-c")),
        ("lead:x", "lead"),
    ]


def test_rebuild_writes_many_records_exactly(store: SqliteMemoryStore) -> None:
    notebook = open_notebook(store)
    for version in range(20):
        write(
            store,
            notebook,
            version,
            f"r-{version}",
            *[add(f"note:b{version:02d}-{i:02d}", f'\u00e9 "{i}"\n') for i in range(64)],
        )
    before = store.records(notebook)
    assert rebuild(store, notebook) == len(before) == 1280
    assert store.records(notebook) == before
    assert verify_notebook(store, notebook).ok


# -- the one-change write from a known head ------------------------------------------------------


def outcome(store: MemoryStore, notebook: str, based_on: int, rid: str, *changes: Any) -> Any:
    try:
        return write(store, notebook, based_on, rid, *changes).to_json()
    except OhError as exc:
        return exc.code


SCENARIOS: dict[str, tuple[str | None, int, str, dict[str, Any], Any]] = {
    # name: (SQL run behind the store's back, based_on, request id, change, expected outcome)
    "applied": (None, 2, "r-3", add("note:c"), "applied"),
    "stale": ("other-writer", 2, "r-3", add("note:c"), "stale"),
    "request id reused": (None, 2, "r-2", add("note:c"), "request_id_reused"),
    "identical retry": (None, 1, "r-2", add("note:b"), "applied-2"),
    "name exists": (None, 2, "r-3", add("note:a"), "already_exists"),
    "replace a missing name": (None, 2, "r-3", replace("note:zz", "x"), "not_found"),
    "remove a missing name": (None, 2, "r-3", remove("note:zz"), "not_found"),
    "replace": (None, 2, "r-3", replace("note:a", "new"), "applied"),
    "remove": (None, 2, "r-3", remove("note:a"), "applied"),
    "expired": (
        "UPDATE notebooks SET forgets_at = '2000-01-01T00:00:00.000000Z'",
        2,
        "r-3",
        add("note:c"),
        "expired",
    ),
    "forgotten": ("forget", 2, "r-3", add("note:c"), "purged"),
    "head rewritten": ("UPDATE notebooks SET head_hash = 'x'", 2, "r-3", add("note:c"), "applied"),
}
# Several changes take the same path (one statement per table): each refusal is still decided
# by the full path, whichever change of the call causes it.
SEVERAL: dict[str, tuple[str | None, int, str, list[dict[str, Any]], Any]] = {
    "several applied": (
        None,
        2,
        "r-3",
        [add("note:c"), replace("note:a", "new"), remove("note:b"), add("note:d")],
        "applied",
    ),
    "several stale": ("other-writer", 2, "r-3", [add("note:c"), add("note:d")], "stale"),
    "several, a name exists": (None, 2, "r-3", [add("note:c"), add("note:a")], "already_exists"),
    "several, replace a missing name": (
        None,
        2,
        "r-3",
        [add("note:c"), replace("note:zz", "x")],
        "not_found",
    ),
    "several, remove a missing name": (
        None,
        2,
        "r-3",
        [remove("note:a"), remove("note:zz")],
        "not_found",
    ),
    "several forgotten": ("forget", 2, "r-3", [add("note:c"), add("note:d")], "purged"),
    "several request id reused": (
        None,
        2,
        "r-2",
        [add("note:c"), add("note:d")],
        "request_id_reused",
    ),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS) + sorted(SEVERAL))
def test_a_write_from_a_known_head_is_decided_as_the_full_path_decides(
    tmp_path: Path, scenario: str
) -> None:
    if scenario in SCENARIOS:
        tampering, based_on, rid, one, expected = SCENARIOS[scenario]
        changes = [one]
    else:
        tampering, based_on, rid, changes, expected = SEVERAL[scenario]
    store = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    notebook = open_notebook(store)
    write(store, notebook, 0, "r-1", add("note:a"))
    write(store, notebook, 1, "r-2", add("note:b"))  # the store now knows version 2's head
    if tampering == "other-writer":
        other = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
        write(other, notebook, 2, "r-other", add("note:other"))
        other.close()
    elif tampering == "forget":
        other = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
        other.forget(notebook, T0)
        other.close()
    elif tampering is not None:
        conn = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
        conn.execute(tampering)
        conn.close()
    got = outcome(store, notebook, based_on, rid, *changes)
    # The same call on a store that knows nothing takes the full path from the start.
    cold = SqliteMemoryStore(tmp_path / "memory.db", synchronous="NORMAL")
    if expected == "applied-2":
        assert got == {"status": "applied", "version": 2, "written": got["written"]}
        assert got == outcome(cold, notebook, based_on, rid, *changes)
    elif expected == "applied":
        assert got["status"] == "applied" and got["version"] == 3
        entries = list(store.log(notebook))
        assert entries[-1].prev_hash == entries[-2].hash or scenario == "head rewritten"
        assert store.notebook(notebook).head_hash == entries[-1].hash
        assert replay(entries) == {r.name: r for r in store.records(notebook)}
    elif expected == "stale":
        assert got == {"status": "refused", "reason": "stale", "current_version": 3}
        assert got == outcome(cold, notebook, based_on, rid, *changes)
    else:
        assert got == expected == outcome(cold, notebook, based_on, rid, *changes)
        assert store.notebook(notebook).version in (2, 0)  # nothing written (0: forgotten)
    cold.close()
    store.close()


def test_the_head_written_from_a_known_head_chains(store: SqliteMemoryStore) -> None:
    notebook = open_notebook(store)
    for version in range(30):
        change = (
            add(f"note:n{version}")
            if version % 3 == 0
            else replace(f"note:n{version - version % 3}", f"v{version}")
        )
        write(store, notebook, version, f"r-{version}", change)
    write(store, notebook, 30, "r-30", remove("note:n0"))
    assert verify_notebook(store, notebook).ok
    assert verify_notebook(store, notebook).to_json() == reference_verify(store, notebook).to_json()
