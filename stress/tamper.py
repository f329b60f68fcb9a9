"""Tamper evidence (SPEC §2, §5): altering a log entry or a stored record directly in the
database, outside Oh, is detected by ``verify``, and ``read`` never serves a damaged record.

A database is filled with notebooks whose logs hold adds, replaces and removes of 1 to 64
changes. Each trial makes one random alteration with plain SQL, checks, and undoes it:

* a cell of a random row and column of ``log`` or ``records`` (a change column of an entry
  with several changes is a JSON array, so the edit lands anywhere in it): one character
  changed, inserted or deleted, the text cut short or emptied, an integer moved, a nullable
  value set to NULL, a value copied from another row (a valid hash, digest or content that
  belongs elsewhere), or (SQLite) the same bytes stored as a BLOB instead of text;
* a row deleted, or duplicated under another key;
* two changes of one entry swapped (their places in the arrays);
* a current record rolled back to an earlier version of itself, consistently (content, digest,
  version and time from the log): every digest still matches;
* a derived or stamped value beyond the log and the current records (``DERIVED``): a kept
  query answer (a row renamed to a record that does not exist, a row's digest changed, a row
  dropped, its question, parameters, version or caller changed), the notebook's metadata
  (``forgets_at`` pushed to 2999, ``started_at``, owner, document, run or the pin changed, the
  state set back to ``opening``, the seal removed) and, on the embedded backend, where recall
  vectors live, a vector zeroed, two vectors swapped, a vector copied from another notebook, or
  a vector relabelled as another model's.

After each alteration ``verify`` must report a problem (and must not crash), and ``read`` of
every current record must either refuse (``integrity``) or return exactly what the log says;
``not_found`` is expected only where the alteration took the record's row or name away. Any
other answer (``expired``, say) fails the run: a read that never reached the integrity check
proves nothing, so the suite must not pass on it. Reads run on a clock fixed an hour after the
writes (both injected), so the notebooks are open whatever the date the suite runs on.
Only the rollback can be read without an error: its content is genuine, just not current, so
``read`` cannot know; ``verify`` catches it. Stamps (author, time, version) of the current table
are outside the digest, so ``read`` cannot check them either; ``verify`` does.

    python stress/tamper.py --trials 10000
    python stress/tamper.py --trials 2000 --postgres

Prints ``detected: 100%`` (verify) and exits 1 on any alteration verify missed or crashed on,
any damaged record read served, or any read answered with a code the alteration cannot explain;
``derived`` is the same figure for the derived alterations alone.

With ``--keys`` the suite forges reviewed knowledge instead (docs/keys.md), on a knowledge
database written with MACs under a master key: each trial drops the append-only triggers' guard
as a forger with database access can, and makes one self-consistent forgery (a content changed
with its digest recomputed, a decision forged, a whole new revision chained and digested as Oh
writes one, a MAC copied from another row, removed, or computed under another key, a cell of any
MACed row changed). ``verify`` with the keys must report it, and every read of the knowledge
(``records_at``, ``history``, ``revisions``, ``proposals``, ``pack_history``) must refuse
(``integrity``) or serve exactly what was written.

Then, still with ``--keys``, the whole memory suite above runs again on notebooks sealed under
data keys (docs/keys.md), its alterations landing on sealed text, and a fifth of them forgeries
by a writer who holds no key: a current record's content replaced by plain canonical content
with its digest recomputed, or by another record's sealed content with that record's digest
(and version); a kept answer's sealed rows or question copied from another answer, a character
changed, rows forged in plain text. ``read`` must serve none of them; ``verify`` must report
each. The figure gives both halves.

    python stress/tamper.py --keys --trials 2000
    python stress/tamper.py --keys --trials 500 --postgres
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple

from crash_safety import apply_names, batch
from harness import Target, common_arguments, postgres_target, report, scratch, seed_of
from oh.core.canonical import canonical_text, sha256_hex
from oh.core.changes import parse_changes
from oh.core.clock import Clock
from oh.core.records import Record
from oh.core.reviewed import Decision, accepted_version
from oh.errors import OhError
from oh.keys import MasterKey, MasterKeys
from oh.keys.macs import KnowledgeMacs, RowKind
from oh.services.knowledge import Knowledge
from oh.storage.memory import InMemoryStore
from oh.storage.rows import KINDS, PROPOSAL, REVIEWED, proposal_from_row
from oh.storage.sql.knowledge import SqlKnowledgeStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, open_notebook
from oh.testing.tools import SECRET
from oh.tools import Caller, Tools
from oh.verify import replay, verify_notebook

DIMENSIONS = 16  # recall vectors of the fill (HashingEmbedder): small, so the menu is quick

# The tables and their alterable columns: both backends' logs keep an entry and its changes in
# one row (several changes as JSON arrays: the embedded backend's migration 0006, PostgreSQL's
# 0010).
_ENTRY = ["version", "request_id", "fingerprint", "author", "written_at", "prev_hash", "hash"]
_CHANGE = ["op", "name", "content", "digest"]
_RECORDS = ["name", "kind", "content", "digest", "author", "written_at", "version"]
_TABLES = {"log": [*_ENTRY, "changes", *_CHANGE], "records": _RECORDS}
COLUMNS = {"libsql": _TABLES, "postgres": _TABLES}
KEYS = {
    "log": ["notebook_id", "version"],
    "records": ["notebook_id", "name"],
}
NULLABLE = {
    ("log", "content"),
    ("log", "digest"),
}
CHARACTERS = 'abcdefXYZ0189 _-:.{}[]",\\é€\u2028🐠'
STAMPS = {"author", "written_at", "version"}
# Writes are stamped T0 (notebooks open at T0 for 24 hours); reads happen an hour later, on the
# same injected timeline, never on the wall clock.
READ_AT = T0 + timedelta(hours=1)


class Raw:
    """Plain SQL on the database, outside Oh, on one connection of its own."""

    def __init__(self, target: Target) -> None:
        self.kind = target.kind
        self.sealed = bool(target.key_store)
        if target.kind == "postgres":
            import psycopg

            self.conn: Any = psycopg.connect(target.location, autocommit=True)
        else:
            self.conn = sqlite3.connect(target.location, isolation_level=None)

    def __call__(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        if self.kind == "postgres":
            sql = sql.replace("?", "%s")
        cursor = self.conn.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []

    def close(self) -> None:
        self.conn.close()


def _where(table: str) -> str:
    return " AND ".join(f"{key} = ?" for key in KEYS[table])


def _edit_text(rng: random.Random, value: str) -> str:
    roll = rng.random()
    if value and roll < 0.5:
        at = rng.randrange(len(value))
        new = rng.choice([c for c in CHARACTERS if c != value[at]])
        return value[:at] + new + value[at + 1 :]
    if roll < 0.7:
        at = rng.randrange(len(value) + 1)
        return value[:at] + rng.choice(CHARACTERS) + value[at:]
    if value and roll < 0.85:
        at = rng.randrange(len(value))
        return value[:at] + value[at + 1 :]
    if value and roll < 0.95:
        return value[: rng.randrange(len(value))]
    return "" if value else "x"


class Trial:
    """One alteration: ``apply`` it, then ``undo`` it."""

    def __init__(self, description: str, do: list[tuple[str, tuple[Any, ...]]]) -> None:
        self.description = description
        self.do = do
        self.undo: list[tuple[str, tuple[Any, ...]]] = []


def _columns(raw: Raw, table: str) -> list[str]:
    return KEYS[table] + [c for c in COLUMNS[raw.kind][table] if c not in KEYS[table]]


def _cell(rng: random.Random, raw: Raw, table: str, notebook_id: str) -> Trial | None:
    columns = _columns(raw, table)
    rows = raw(f"SELECT {', '.join(columns)} FROM {table} WHERE notebook_id = ?", (notebook_id,))
    if not rows:
        return None
    row = dict(zip(columns, rng.choice(rows), strict=True))
    column = rng.choice(COLUMNS[raw.kind][table])
    value = row[column]
    key = tuple(row[k] for k in KEYS[table])
    roll = rng.random()
    others = [dict(zip(columns, r, strict=True))[column] for r in rows]
    others = [v for v in others if v != value]
    if (table, column) in NULLABLE and value is not None and roll < 0.1:
        new: Any = None
        how = "set to NULL"
    elif others and roll < 0.25:
        new = rng.choice(others)
        how = "copied from another row"
    elif isinstance(value, str) and raw.kind == "libsql" and roll < 0.3:
        new = value.encode()  # SQLite stores any type in any column; PostgreSQL does not
        how = "stored as a BLOB (same bytes)"
    elif isinstance(value, int):
        new = value + rng.choice([-1, 1, 2, 1000])
        how = f"moved by {new - value}"
    elif isinstance(value, str):
        new = _edit_text(rng, value)
        how = "one character changed"
    else:
        return None
    if column == "seq":
        return None  # reordering is the swap alteration; a lone seq has no meaning
    if column == "op" and new not in ("add", "replace", "remove"):
        new = rng.choice([op for op in ("add", "replace", "remove") if op != value])
        how = "another op"
    if new == value:
        return None
    sql = f"UPDATE {table} SET {column} = ? WHERE {_where(table)}"
    trial = Trial(f"{table}.{column} {how}", [(sql, (new, *key))])
    changed_key = key
    if column in KEYS[table]:
        changed_key = tuple(new if k == column else row[k] for k in KEYS[table])
    trial.undo = [(sql, (value, *changed_key))]
    return trial


def _delete(rng: random.Random, raw: Raw, table: str, notebook_id: str) -> Trial | None:
    columns = _columns(raw, table)
    rows = raw(f"SELECT {', '.join(columns)} FROM {table} WHERE notebook_id = ?", (notebook_id,))
    if not rows:
        return None
    row = rng.choice(rows)
    key = tuple(row[: len(KEYS[table])])
    marks = ", ".join("?" for _ in columns)
    insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
    delete = f"DELETE FROM {table} WHERE {_where(table)}"
    if rng.random() < 0.5:
        trial = Trial(f"{table} row deleted", [(delete, key)])
        trial.undo = [(insert, tuple(row))]
        return trial
    # Duplicated under another key: a record under a new name, an entry or change after the end.
    copy = list(row)
    last = len(KEYS[table]) - 1
    copy[last] = "note:zz-intruder" if table == "records" else row[last] + 1000
    trial = Trial(f"{table} row duplicated", [(insert, tuple(copy))])
    trial.undo = [(delete, tuple(copy[: len(KEYS[table])]))]
    return trial


# Two items of a JSON array column swapped, in each database's JSON functions.
_SWAP = {
    "libsql": "{c} = json_set({c}, '$[{i}]', {c} ->> {j}, '$[{j}]', {c} ->> {i})",
    "postgres": "{c} = jsonb_set(jsonb_set({c}::jsonb, '{{{i}}}', {c}::jsonb -> {j}),"
    " '{{{j}}}', {c}::jsonb -> {i})::text",
}


def _swap(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    rows = raw(
        "SELECT version, changes FROM log WHERE notebook_id = ? AND changes > 1", (notebook_id,)
    )
    if not rows:
        return None
    version, count = rng.choice(rows)
    i, j = rng.sample(range(count), 2)
    swapped = ", ".join(
        _SWAP[raw.kind].format(c=c, i=i, j=j) for c in ("op", "name", "content", "digest")
    )
    swap = [
        (f"UPDATE log SET {swapped} WHERE notebook_id = ? AND version = ?", (notebook_id, version))
    ]
    trial = Trial("log two changes of one entry swapped", swap)
    trial.undo = swap  # a swap undoes itself
    return trial


# The earlier writes of each name: each log entry's changes, one per row.
_WRITES = {
    "postgres": "SELECT l.notebook_id, l.version, n.v AS name, c.v AS content, d.v AS digest"
    " FROM log AS l CROSS JOIN LATERAL oh_log_values(l.changes, l.name) AS n"
    " JOIN LATERAL oh_log_values(l.changes, l.content) AS c ON c.i = n.i"
    " JOIN LATERAL oh_log_values(l.changes, l.digest) AS d ON d.i = n.i",
    "libsql": "SELECT notebook_id, version, name, content, digest FROM log WHERE changes = 1"
    " UNION ALL SELECT l.notebook_id, l.version, j.value, l.content ->> j.key,"
    " l.digest ->> j.key FROM log AS l, json_each(l.name) AS j WHERE l.changes > 1",
}


def _rollback(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    """A current record set back to an earlier version of itself, every digest consistent."""
    rows = raw(
        "SELECT r.name, r.content, r.digest, r.version, r.written_at, c.content, c.digest,"
        f" c.version, l.written_at FROM records r JOIN ({_WRITES[raw.kind]}) c ON c.notebook_id ="
        " r.notebook_id AND c.name = r.name AND c.version < r.version AND c.content IS NOT NULL"
        " JOIN log l ON l.notebook_id = c.notebook_id AND l.version = c.version"
        " WHERE r.notebook_id = ?",
        (notebook_id,),
    )
    if not rows:
        return None
    name, content, digest, version, written_at, old, old_digest, old_version, old_at = rng.choice(
        rows
    )
    sql = (
        "UPDATE records SET content = ?, digest = ?, version = ?, written_at = ?"
        " WHERE notebook_id = ? AND name = ?"
    )
    trial = Trial(
        "records rolled back to an earlier version",
        [(sql, (old, old_digest, old_version, old_at, notebook_id, name))],
    )
    trial.undo = [(sql, (content, digest, version, written_at, notebook_id, name))]
    return trial


def _forged_content(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    """On sealed notebooks (docs/keys.md): a current record's content replaced by a forger who
    can write the database but holds no key, self-consistently: plain canonical content of
    another text with its digest recomputed, or another record's sealed content with its digest
    (and, the second time, its version too)."""
    rows = raw(
        "SELECT name, content, digest, version FROM records WHERE notebook_id = ?", (notebook_id,)
    )
    if len(rows) < 2:
        return None
    (name, content, digest, version), other = rng.sample(rows, 2)
    sql = (
        "UPDATE records SET content = ?, digest = ?, version = ? WHERE notebook_id = ? AND name = ?"
    )
    how = rng.choice(["plain", "swapped", "swapped with its version"])
    if how == "plain":
        forged = {
            "kind": name.split(":", 1)[0],
            "name": name,
            "text": "the forger's claim",
            "fields": {},
            "depends_on": [],
            "supports": [],
            "contradicts": [],
        }
        text = canonical_text(forged, "record")
        new = (text, sha256_hex(text), version)
    else:
        new = (other[1], other[2], other[3] if how != "swapped" else version)
    trial = Trial(
        f"records content forged ({how}, digest recomputed)",
        [(sql, (*new, notebook_id, name))],
    )
    trial.undo = [(sql, (content, digest, version, notebook_id, name))]
    return trial


# -- derived and stamped values: kept answers, notebook metadata, recall vectors -------------------


def _set(table: str, column: str, where: str, key: tuple[Any, ...], old: Any, new: Any) -> Trial:
    sql = f"UPDATE {table} SET {column} = ? WHERE {where}"
    trial = Trial("", [(sql, (new, *key))])
    trial.undo = [(sql, (old, *key))]
    return trial


def _answer(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    answers = raw(
        "SELECT answer_id, question, params, version, caller, rows FROM answers"
        " WHERE notebook_id = ? AND rows != ''",
        (notebook_id,),
    )
    if not answers:
        return None
    answer_id, question, params, version, caller, rows = rng.choice(answers)
    if raw.sealed:
        return _sealed_answer(rng, notebook_id, answers, answer_id, question, rows, version)
    lines = [line.split("\t") for line in rows.split("\n")]
    at = rng.randrange(len(lines))
    hows = ("row renamed", "row digest changed", "row dropped", "question", "params")
    how = rng.choice([*hows, "version", "caller"])
    column, old, new = "rows", rows, None
    if how == "row renamed":
        lines[at][2] = "note:zz-not-there"
    elif how == "row digest changed":
        lines[at][3] = "f" * 64 if lines[at][3] != "f" * 64 else "e" * 64
    elif how == "row dropped":
        del lines[at]
    elif how == "question":
        column, old, new = (
            "question",
            question,
            "conflicts" if question != "conflicts" else "current_notes",
        )
    elif how == "params":
        column, old, new = "params", params, json.dumps({"name": "note:zz-not-there"})
    elif how == "version":
        column, old, new = "version", version, version + rng.choice([-1, 1])
    else:
        column, old, new = "caller", caller, "agent:mallory"
    if column == "rows":
        new = "\n".join("\t".join(line) for line in lines)
    trial = _set(
        "answers", column, "notebook_id = ? AND answer_id = ?", (notebook_id, answer_id), old, new
    )
    trial.description = f"answers {how}" if column == "rows" else f"answers.{column} changed"
    return trial


def _sealed_answer(
    rng: random.Random,
    notebook_id: str,
    answers: list[Any],
    answer_id: str,
    question: str,
    rows: str,
    version: int,
) -> Trial:
    """A kept answer of a sealed notebook altered by a writer without the key: a character of
    its sealed rows changed, another answer's sealed rows or question copied in, its version
    moved, or rows forged in plain text."""
    others = [a for a in answers if a[0] != answer_id]
    hows = ["rows character changed", "rows forged in plain text", "version"]
    if others:
        hows += ["rows copied from another answer", "question copied from another answer"]
    how = rng.choice(hows)
    if how == "rows character changed":
        at = rng.randrange(4, len(rows))
        column, old, new = (
            "rows",
            rows,
            rows[:at] + ("A" if rows[at] != "A" else "B") + rows[at + 1 :],
        )
    elif how == "rows forged in plain text":
        column, old, new = "rows", rows, "0\tnote\tnote:zz-forged\t" + "f" * 64
    elif how == "version":
        column, old, new = "version", version, version + rng.choice([-1, 1])
    elif how == "rows copied from another answer":
        column, old, new = "rows", rows, rng.choice(others)[5]
    else:
        column, old, new = "question", question, rng.choice(others)[1]
    trial = _set(
        "answers", column, "notebook_id = ? AND answer_id = ?", (notebook_id, answer_id), old, new
    )
    trial.description = f"answers (sealed) {how}"
    return trial


_METADATA = {
    "forgets_at": lambda old: "2999-01-01T00:00:00.000000Z",
    "started_at": lambda old: "2026-01-01T00:00:00.000000Z",
    "owner": lambda old: "mallory",
    "document": lambda old: "doc-elsewhere",
    "run": lambda old: f"{old}-moved",
    "pinned_revision": lambda old: 7 if old is None else None,
    "state": lambda old: "opening",
    "seal": lambda old: None,
}


def _metadata(rng: random.Random, raw: Raw, notebook_id: str) -> Trial:
    column = rng.choice(sorted(_METADATA))
    (old,) = raw(f"SELECT {column} FROM notebooks WHERE id = ?", (notebook_id,))[0]
    trial = _set("notebooks", column, "id = ?", (notebook_id,), old, _METADATA[column](old))
    trial.description = f"notebooks.{column} changed"
    return trial


def _vector(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    rows = raw(
        "SELECT rowid, notebook_id, model_id, digest, vector, seal FROM note_vectors",
    )
    mine = [row for row in rows if row[1] == notebook_id]
    others = [row for row in rows if row[1] != notebook_id]
    if len(mine) < 2:
        return None
    rowid, _, model_id, _, vector, _ = rng.choice(mine)
    how = rng.choice(["zeroed", "swapped", "copied", "model"])
    by_rowid = "rowid = ?"
    if how == "zeroed":
        trial = _set("note_vectors", "vector", by_rowid, (rowid,), vector, bytes(len(vector)))
        trial.description = "note_vectors vector zeroed"
    elif how == "model":
        trial = _set("note_vectors", "model_id", by_rowid, (rowid,), model_id, "openai:other:16")
        trial.description = "note_vectors vector relabelled as another model's"
    elif how == "swapped":
        first, second = rng.sample(mine, 2)
        if first[4] == second[4]:
            return None
        sql = "UPDATE note_vectors SET vector = ? WHERE rowid = ?"
        trial = Trial(
            "note_vectors two vectors swapped",
            [(sql, (second[4], first[0])), (sql, (first[4], second[0]))],
        )
        trial.undo = [(sql, (first[4], first[0])), (sql, (second[4], second[0]))]
    else:
        if not others:
            return None
        _, _, model, theirs, blob, seal = rng.choice(others)
        if any(row[3] == theirs for row in mine):
            return None
        trial = Trial(
            "note_vectors vector copied from another notebook",
            [
                (
                    "INSERT INTO note_vectors (notebook_id, model_id, digest, vector, seal)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (notebook_id, model, theirs, blob, seal),
                )
            ],
        )
        trial.undo = [
            ("DELETE FROM note_vectors WHERE notebook_id = ? AND digest = ?", (notebook_id, theirs))
        ]
    return trial


def _derived(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    menu = [_answer, _metadata] + ([_vector] if raw.kind == "libsql" else [])
    return rng.choice(menu)(rng, raw, notebook_id)


DERIVED = ("answers", "notebooks", "note_vectors")  # how derived trials' descriptions start


def pick(rng: random.Random, raw: Raw, notebook_id: str, *, derived: float = 0.2) -> Trial:
    """One alteration: a derived one with probability ``derived``, else one of the log or the
    current records."""
    while True:
        roll = rng.random()
        table = rng.choice(list(COLUMNS[raw.kind]))
        if roll < derived:
            trial = _derived(rng, raw, notebook_id)
            if trial is not None:
                return trial
            continue
        roll = (roll - derived) / (1 - derived)  # the log and the current records
        if raw.sealed and rng.random() < 0.2:
            trial = _forged_content(rng, raw, notebook_id)
        elif roll < 0.75:
            trial = _cell(rng, raw, table, notebook_id)
        elif roll < 0.88:
            trial = _delete(rng, raw, table, notebook_id)
        elif roll < 0.94:
            trial = _swap(rng, raw, notebook_id)
        else:
            trial = _rollback(rng, raw, notebook_id)
        if trial is not None:
            return trial


def _ask(rng: random.Random, tools: Tools, notebook_id: str, names: set[str]) -> None:
    """Ask every question on the menu once, so the notebook keeps answers to alter."""
    caller = Caller(notebook_id, f"agent:{notebook_id}", "agent:tamper")
    name = rng.choice(sorted(names)) if names else "note:none"
    for arguments in (
        {"question": "current_notes"},
        {"question": "conflicts"},
        {"question": "of_kind", "kind": "note"},
        {"question": "changes_since", "since": rng.randrange(10)},
        {"question": "related", "name": name},
        {"question": "depends_on", "name": name},
        {"question": "dependents", "name": name},
    ):
        tools.call(caller, "query", arguments)


def fill(target: Target, seed: int, notebooks: int, entries: int) -> list[str]:
    """Notebooks with logs, kept answers at two versions and (embedded backend) vectors."""
    rng = random.Random(seed)
    store = target.open()
    tools = Tools(store, None, SECRET, clock=lambda: T0)
    ids = []
    try:
        for n in range(notebooks):
            notebook_id = open_notebook(store, run=f"tamper-{seed}-{n}")
            names: set[str] = set()
            for version in range(entries):
                raw = batch(rng, names, f"t{n}", version, rng.randint(1, rng.choice([3, 12, 64])))
                store.remember(
                    notebook_id,
                    based_on=version,
                    request_id=f"t-{version}",
                    changes=parse_changes(raw),
                    author="agent:tamper",
                    now=T0,
                )
                apply_names(names, raw)
                if version in (entries // 2, entries - 1):
                    _ask(rng, tools, notebook_id, names)
            ids.append(notebook_id)
        if target.kind == "libsql":
            _embed(target, store, ids)
    finally:
        store.close()
    return ids


def _embed(target: Target, store: Any, ids: list[str]) -> None:
    from oh.recall import HashingEmbedder, Recall
    from oh.storage.sqlite.vectors import SqliteVectorStore

    vectors = SqliteVectorStore(target.location)
    try:
        recall = Recall(store, vectors, HashingEmbedder(DIMENSIONS), clock=lambda: T0)
        for notebook_id in ids:
            recall.catch_up(notebook_id)
    finally:
        vectors.close()


def run(
    target: Target,
    trials: int,
    seed: int,
    *,
    notebooks: int = 4,
    derived: float = 0.2,
    clock: Clock | None = None,
) -> dict[str, Any]:
    """``trials`` alterations, each checked and undone; a share ``derived`` of them alter a
    derived copy (1.0: only those). ``clock`` is the reads' clock (default: an hour after the
    writes); another clock is there to prove the run fails when its reads never reach the
    integrity check."""
    rng = random.Random(seed)
    ids = fill(target, seed, notebooks, entries=25)
    store = target.open()
    raw = Raw(target)
    tools = Tools(store, None, SECRET, clock=clock or FakeClock(READ_AT))
    truth = {notebook_id: replay(store.log(notebook_id)) for notebook_id in ids}
    counts = {
        "detected": 0,
        "verify_crashed": 0,
        "refused_by_database": 0,
        "reads": 0,
        "read_served_genuine": 0,
        "read_refused_not_found": 0,
        "read_refused_by_state": 0,
        "read_answered_unexpectedly": 0,
        "read_served_damaged": 0,
        "read_refused_integrity": 0,
        "read_served_rollback": 0,
        "read_served_unverified_stamps": 0,
    }
    missed: list[str] = []
    crashed: list[str] = []
    unexpected: list[str] = []
    by_kind: dict[str, list[int]] = {}
    on_derived = [0, 0]  # derived alterations made, detected
    done = 0
    try:
        while done < trials:
            notebook_id = rng.choice(ids)
            trial = pick(rng, raw, notebook_id, derived=derived)
            try:
                for sql, params in trial.do:
                    raw(sql, params)
            except Exception:
                counts["refused_by_database"] += 1  # a constraint said no: nothing to detect
                for sql, params in trial.undo:
                    with contextlib.suppress(Exception):  # what failed left nothing to undo
                        raw(sql, params)
                continue
            done += 1
            seen = by_kind.setdefault(trial.description, [0, 0])
            seen[0] += 1
            try:
                problems = verify_notebook(store, notebook_id).problems
            except Exception as exc:
                problems = []
                counts["verify_crashed"] += 1
                crashed.append(f"{trial.description}: {type(exc).__name__}: {exc}"[:300])
            is_derived = trial.description.startswith(DERIVED)
            on_derived[0] += is_derived
            if problems:
                counts["detected"] += 1
                seen[1] += 1
                on_derived[1] += is_derived
            elif len(missed) < 20:
                missed.append(trial.description)
            _check_reads(tools, notebook_id, truth[notebook_id], trial, counts, unexpected)
            for sql, params in trial.undo:
                raw(sql, params)
            if done % 500 == 0 and not verify_notebook(store, notebook_id).ok:
                raise RuntimeError(f"undo failed after {trial.description}")
    finally:
        raw.close()
        store.close()
    verified = counts["detected"]
    # Reads must have happened and been checked: zero damage served by zero checked reads is
    # no proof, so a run whose reads answered anything unexplained cannot pass. (Integrity
    # refusals are not required here: a run of a few trials may damage no current record.)
    read_ok = (
        counts["read_served_damaged"] == 0
        and counts["read_answered_unexpectedly"] == 0
        and counts["read_served_genuine"] > 0
    )
    return {
        "suite": "tamper",
        "backend": target.kind,
        "seed": seed,
        "alterations": done,
        **counts,
        "verify_missed": done - verified,
        "by_kind": {kind: f"{hit}/{total}" for kind, (total, hit) in sorted(by_kind.items())},
        "derived": (
            f"derived copies (answers, notebook metadata, vectors): detected"
            f" {on_derived[1]}/{on_derived[0]}"
        ),
        "missed_examples": missed[:10],
        "crash_examples": sorted(set(crashed))[:10],
        "unexpected_read_examples": sorted(set(unexpected))[:10],
        "figure": (
            f"detected: {100 * verified / max(done, 1):.4g}% ({verified}/{done});"
            f" verify crashed instead: {counts['verify_crashed']};"
            f" unnoticed: {done - verified - counts['verify_crashed']};"
            f" read served damage: {counts['read_served_damaged']}"
            f" (of {counts['reads']} reads; answered otherwise:"
            f" {counts['read_answered_unexpectedly']})"
        ),
        "ok": verified == done and read_ok,
    }


# What a notebook's state says to every tool call: a notebook row edited behind Oh's back (its
# state or its forget time) can make a read answer these, as it would for a real notebook.
_BY_STATE = {"forbidden", "expired", "purged"}


def _expected_refusals(trial: Trial) -> set[str]:
    """The error codes a read may answer after this alteration: ``integrity`` always,
    ``not_found`` where the record's row or name was taken away, and what a notebook's state
    answers where its row was edited."""
    if trial.description == "records row deleted" or trial.description.startswith("records.name "):
        return {"integrity", "not_found"}
    if trial.description.startswith(("notebooks.state ", "notebooks.forgets_at ")):
        return {"integrity", *_BY_STATE}
    return {"integrity"}


def _check_reads(
    tools: Tools,
    notebook_id: str,
    truth: dict[str, Any],
    trial: Trial,
    counts: dict[str, int],
    unexpected: list[str],
) -> None:
    """``read`` of every current record: an expected refusal, or exactly the log's content."""
    caller = Caller(notebook_id, f"agent:{notebook_id}", "agent:tamper")
    stamps_only = trial.description.startswith("records.") and any(
        trial.description.startswith(f"records.{column} ") for column in STAMPS
    )
    expected = _expected_refusals(trial)
    for name, stored in truth.items():
        counts["reads"] += 1
        answer = tools.call(caller, "read", {"name": name})
        if "error" in answer:
            code = answer["error"]["code"]
            if code not in expected:
                counts["read_answered_unexpectedly"] += 1
                unexpected.append(f"{trial.description}: {code}")
            elif code == "integrity":
                counts["read_refused_integrity"] += 1
            elif code == "not_found":
                counts["read_refused_not_found"] += 1
            else:
                counts["read_refused_by_state"] += 1
            continue
        content = {key: answer[key] for key in json.loads(stored.content)}
        if json.loads(stored.content) != content or answer["digest"] != stored.digest:
            if trial.description == "records rolled back to an earlier version":
                counts["read_served_rollback"] += 1
            else:
                counts["read_served_damaged"] += 1
        elif (answer["author"], answer["written_at"], answer["version"]) != (
            stored.author,
            stored.written_at,
            stored.version,
        ):
            counts["read_served_unverified_stamps" if stamps_only else "read_served_damaged"] += 1
        else:
            counts["read_served_genuine"] += 1


# -- reviewed knowledge, with keys (--keys) --------------------------------------------------------


class KnowledgeTarget(NamedTuple):
    """A knowledge database (``kind`` and ``location`` as ``Target``'s) and a key store file."""

    kind: str
    location: str
    keys: str

    def open(self, macs: KnowledgeMacs | None) -> SqlKnowledgeStore:
        if self.kind == "postgres":
            from oh.storage.postgres.knowledge import PostgresKnowledgeStore

            return PostgresKnowledgeStore(self.location, max_size=2, macs=macs)
        from oh.storage.sqlite.knowledge import SqliteKnowledgeStore

        return SqliteKnowledgeStore(self.location, macs=macs)


OWNERS = ("ann", "bob")
_KNOWLEDGE_TABLES = ("reviewed", "revisions", "proposals", "packs")
# The forgeries, by how often each is tried.
FORGERIES = {
    "content and digest": 3,
    "decision": 2,
    "new revision": 2,
    "mac copied": 2,
    "mac removed": 1,
    "mac under another key": 1,
    "mac with the key's id and a forged tag": 1,
    "cell": 4,
}


# A row's MAC vouches for the row, not for which rows there are: a proposal given another
# owner leaves every read (its new owner's refuses it, its old owner's lists one fewer), which
# only verify, scanning every row, sees.
MOVES_A_ROW_AWAY = {"proposals.owner changed"}


def _disable_guards(raw: Raw) -> None:
    """Take away what refuses changes to knowledge in the database, as a forger can."""
    if raw.kind == "postgres":
        for table in _KNOWLEDGE_TABLES:
            raw(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        return
    for (name,) in raw("SELECT name FROM sqlite_master WHERE type = 'trigger'"):
        raw(f"DROP TRIGGER {name}")


def fill_knowledge(store: SqlKnowledgeStore, rng: random.Random) -> None:
    """Per owner: names accepted (some twice, with edits), one rejected, one pending, packs."""
    review = Knowledge(store, InMemoryStore(), clock=FakeClock(T0))
    source = {"document": "reef-2018.pdf", "passage": "Cover recovered.", "locator": "p. 4"}
    for owner in OWNERS:
        names = [f"finding:{owner}{n}" for n in range(6)]
        for name in names + rng.sample(names, 3):
            text = f"{name} holds ({rng.random():.6f})"
            proposal = review.propose(owner, source=source, record={"name": name, "text": text})
            review.decide(owner, proposal.id, decision="accept", reason="checked")
        rejected = review.propose(owner, source=source, record={"name": "finding:no", "text": "x"})
        review.decide(owner, rejected.id, decision="reject", reason="unsupported")
        review.propose(owner, source=source, record={"name": "finding:later", "text": "y"})
        expected: dict[str, str] = {}
        for name in ("reef-pack", "coral-pack"):
            content = canonical_text({"name": name, "profiles": []})
            digest = sha256_hex(content)
            store.install_pack(
                owner,
                name=name,
                version="1.0.0",
                digest=digest,
                content=content,
                expected=expected,
                made_by=owner,
                made_at="2026-11-29T12:00:00.000000Z",
            )
            expected[name] = digest


def _knowledge_reads(
    store: SqlKnowledgeStore, names: dict[str, list[str]]
) -> dict[tuple[str, ...], Any]:
    """Every read that serves knowledge rows, by what it reads (the history of each of
    ``names``): its answer, or the code of the error it raised (``crash: ...`` for anything
    that is not an ``OhError``)."""
    answers: dict[tuple[str, ...], Any] = {}

    def read(key: tuple[str, ...], call: Any) -> None:
        try:
            answers[key] = call()
        except OhError as exc:
            answers[key] = ("error", exc.code)
        except Exception as exc:
            answers[key] = ("crash", f"{type(exc).__name__}: {exc}"[:200])

    for owner in OWNERS:
        latest = store.latest_revision(owner)
        read((owner, "records_at"), functools.partial(store.records_at, owner, latest))
        for name in names[owner]:
            read((owner, "history", name), functools.partial(store.history, owner, name))
        read((owner, "revisions"), functools.partial(store.revisions, owner))
        read((owner, "proposals"), functools.partial(store.proposals, owner))
        read((owner, "pack_history"), functools.partial(store.pack_history, owner))
    return answers


def _rows(raw: Raw, kind: RowKind) -> list[dict[str, Any]]:
    columns = [*kind.columns, "mac"]
    found = raw(f"SELECT {', '.join(columns)} FROM {kind.table}")
    return [dict(zip(columns, row, strict=True)) for row in found]


def _update(kind: RowKind, row: dict[str, Any], new: dict[str, Any], what: str) -> Trial:
    """Set ``new`` columns of ``row``; undone by setting them back."""
    where = " AND ".join(f"{key} = ?" for key in kind.key)
    key = tuple(row[k] for k in kind.key)
    sets = ", ".join(f"{column} = ?" for column in new)
    sql = f"UPDATE {kind.table} SET {sets} WHERE {where}"
    trial = Trial(what, [(sql, (*new.values(), *key))])
    trial.undo = [(sql, (*(row[c] for c in new), *key))]
    return trial


def _forge(rng: random.Random, raw: Raw, macs: KnowledgeMacs) -> Trial:
    forgery = rng.choices(list(FORGERIES), weights=list(FORGERIES.values()))[0]
    if forgery == "content and digest":
        row = rng.choice(_rows(raw, REVIEWED))
        record = Record.parse({"name": row["name"], "text": f"forged {rng.random():.6f}"})
        new = {"content": record.canonical(), "digest": record.digest}
        return _update(REVIEWED, row, new, "reviewed content and digest forged")
    if forgery == "decision":
        kind = rng.choice([REVIEWED, PROPOSAL])
        row = rng.choice(_rows(raw, kind))
        # Who decided and why: a reviewed version's decision stays an accept, and a pending
        # proposal is decided behind Oh's back.
        verdict = "accept" if kind is REVIEWED else "reject"
        forged = Decision(verdict, "eve", "2026-11-29T12:30:00.000000Z", "forged")
        new = {"decision": canonical_text(forged.to_json())}
        if kind is PROPOSAL and row["state"] == "pending":
            new["state"] = "rejected"
        return _update(kind, row, new, f"{kind.table} decision forged")
    if forgery == "new revision":
        return _new_revision(rng, raw)
    kind = rng.choice(KINDS)
    rows = _rows(raw, kind)
    row = rng.choice(rows)
    if forgery == "mac copied":
        other = rng.choice([r for r in rows if r["mac"] != row["mac"]])
        return _update(kind, row, {"mac": other["mac"]}, f"{kind.table}.mac copied")
    if forgery == "mac removed":
        return _update(kind, row, {"mac": None}, f"{kind.table}.mac removed")
    if forgery == "mac under another key":
        values = [row[c] for c in kind.columns]
        other = KnowledgeMacs(MasterKeys(MasterKey.generate()), macs.markers, macs.clock)
        return _update(kind, row, {"mac": other.mac(kind, values)}, f"{kind.table}.mac rekeyed")
    if forgery == "mac with the key's id and a forged tag":
        tag = f"{macs.masters.current.id}:{rng.getrandbits(256):064x}"
        return _update(kind, row, {"mac": tag}, f"{kind.table}.mac guessed")
    column = rng.choice([c for c in kind.columns if c not in kind.key])
    value = row[column]
    if isinstance(value, int) and not isinstance(value, bool):
        new_value: Any = value + rng.choice([-1, 1])
    elif isinstance(value, str):
        new_value = _edit_text(rng, value)
    else:
        new_value = rng.choice(["x", 1])
    if new_value == value:
        new_value = None if value is not None else "x"
    return _update(kind, row, {column: new_value}, f"{kind.table}.{column} changed")


def _new_revision(rng: random.Random, raw: Raw) -> Trial:
    """A new revision for one owner, hash-chained and digested exactly as Oh writes one, its
    rows MACed with a guess."""
    owner = rng.choice(OWNERS)
    ((latest, head),) = raw(
        "SELECT revision, head_hash FROM knowledge_bases WHERE owner = ?", (owner,)
    )
    accepted = [r for r in _rows(raw, PROPOSAL) if r["owner"] == owner and r["state"] == "accepted"]
    proposal = proposal_from_row([accepted[0][c] for c in PROPOSAL.columns])
    record = Record.parse({"name": "finding:forged", "text": "never reviewed"})
    decision = Decision("accept", owner, "2026-11-29T12:30:00.000000Z", "forged")
    reviewed, entry = accepted_version(
        proposal,
        decision,
        record,
        author=owner,
        revision=latest + 1,
        prev_hash=head,
        supersedes=None,
    )
    guess = f"forged:{rng.getrandbits(256):064x}"
    trial = Trial(
        "new revision forged",
        [
            (
                "INSERT INTO revisions (owner, revision, what, proposal_id, name, digest, made_by,"
                " made_at, prev_hash, hash, mac) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*entry.hashed_body().values(), entry.hash, guess),
            ),
            (
                "INSERT INTO reviewed (owner, name, kind, content, digest, author, written_at,"
                " revision, source, decision, proposal_id, supersedes, mac)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    owner,
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
                    guess,
                ),
            ),
            (
                "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
                (entry.revision, entry.hash, owner),
            ),
        ],
    )
    trial.undo = [
        (
            "UPDATE knowledge_bases SET revision = ?, head_hash = ? WHERE owner = ?",
            (latest, head, owner),
        ),
        ("DELETE FROM reviewed WHERE owner = ? AND revision = ?", (owner, entry.revision)),
        ("DELETE FROM revisions WHERE owner = ? AND revision = ?", (owner, entry.revision)),
    ]
    return trial


def run_knowledge(target: KnowledgeTarget, trials: int, seed: int) -> dict[str, Any]:
    """``trials`` knowledge forgeries on a database written with MACs, each checked and undone."""
    from oh.verify import verify_knowledge

    rng = random.Random(seed)
    key_store = SqliteKeyStore(target.keys)
    macs = KnowledgeMacs(MasterKeys(MasterKey(rng.randbytes(32))), key_store, FakeClock(T0))
    store = target.open(macs)
    raw = Raw(Target(target.kind, target.location))
    counts = {
        "detected": 0,
        "verify_crashed": 0,
        "refused_by_database": 0,
        "reads": 0,
        "read_refused_integrity": 0,
        "read_served_genuine": 0,
        "read_served_forgery": 0,
        "read_served_without_a_moved_row": 0,
        "read_answered_unexpectedly": 0,
        "never_refused": 0,
    }
    missed: list[str] = []
    unexpected: list[str] = []
    by_kind: dict[str, list[int]] = {}
    done = 0
    try:
        fill_knowledge(store, rng)
        names = {
            owner: sorted({r.name for r in store.revisions(owner) if r.what == "decision"})
            for owner in OWNERS
        }
        truth = _knowledge_reads(store, names)
        if not verify_knowledge(store, macs=macs).ok or any(
            type(v) is tuple and v[:1] in (("error",), ("crash",)) for v in truth.values()
        ):
            raise RuntimeError("the filled knowledge does not verify")
        _disable_guards(raw)
        while done < trials:
            trial = _forge(rng, raw, macs)
            try:
                for sql, params in trial.do:
                    raw(sql, params)
            except Exception:
                counts["refused_by_database"] += 1  # a constraint said no: nothing to detect
                for sql, params in trial.undo:
                    with contextlib.suppress(Exception):
                        raw(sql, params)
                continue
            done += 1
            seen = by_kind.setdefault(trial.description, [0, 0])
            seen[0] += 1
            try:
                found = not verify_knowledge(store, macs=macs).ok
            except Exception as exc:
                found = False
                counts["verify_crashed"] += 1
                missed.append(f"{trial.description}: verify raised {type(exc).__name__}: {exc}")
            if found:
                counts["detected"] += 1
                seen[1] += 1
            elif len(missed) < 20:
                missed.append(trial.description)
            refused = False
            moved = trial.description in MOVES_A_ROW_AWAY
            for key, answer in _knowledge_reads(store, names).items():
                counts["reads"] += 1
                if answer == ("error", "integrity"):
                    counts["read_refused_integrity"] += 1
                    refused = True
                elif type(answer) is tuple and answer[:1] in (("error",), ("crash",)):
                    counts["read_answered_unexpectedly"] += 1
                    unexpected.append(f"{trial.description}: {key}: {answer}"[:300])
                elif answer == truth[key]:
                    counts["read_served_genuine"] += 1
                elif (
                    moved
                    and len(answer) == len(truth[key]) - 1
                    and all(item in truth[key] for item in answer)
                ):
                    counts["read_served_without_a_moved_row"] += 1
                    refused = True  # what a read cannot see; verify reports the moved row
                else:
                    counts["read_served_forgery"] += 1
                    unexpected.append(f"{trial.description}: {key} served a forgery"[:300])
            counts["never_refused"] += not refused
            for sql, params in trial.undo:
                raw(sql, params)
    finally:
        raw.close()
        store.close()
        key_store.close()
    return {
        "suite": "tamper --keys",
        "backend": target.kind,
        "seed": seed,
        "alterations": done,
        **counts,
        "verify_missed": done - counts["detected"],
        "by_kind": {kind: f"{hit}/{total}" for kind, (total, hit) in sorted(by_kind.items())},
        "missed_examples": missed[:10],
        "unexpected_read_examples": sorted(set(unexpected))[:10],
        "figure": (
            f"knowledge forgeries detected: {100 * counts['detected'] / max(done, 1):.4g}%"
            f" ({counts['detected']}/{done}); reads served a forgery:"
            f" {counts['read_served_forgery']} (of {counts['reads']} reads; answered otherwise:"
            f" {counts['read_answered_unexpectedly']}; forgeries no read refused:"
            f" {counts['never_refused']})"
        ),
        "ok": counts["detected"] == done
        and counts["read_served_forgery"] == 0
        and counts["read_answered_unexpectedly"] == 0
        and counts["never_refused"] == 0
        and counts["read_served_genuine"] > 0,
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument(
        "--derived",
        type=float,
        default=0.2,
        help="share of alterations made to derived copies (answers, metadata, vectors); 1: all",
    )
    parser.add_argument(
        "--keys",
        action="store_true",
        help="forge reviewed knowledge written with MACs under a master key (docs/keys.md)",
    )
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.keys:
        with scratch("oh-tamper-keys-", args.keep) as tmp:
            keys = str(tmp / "keys.db")
            if args.postgres:
                with postgres_target() as target:
                    summary = run_knowledge(
                        KnowledgeTarget("postgres", target.location, keys), args.trials, seed
                    )
                    notes = _sealed_notes(target, tmp, args)
            else:
                location = str(tmp / "knowledge.db")
                summary = run_knowledge(
                    KnowledgeTarget("libsql", location, keys), args.trials, seed
                )
                notes = _sealed_notes(Target.libsql(tmp), tmp, args)
        summary["notes"] = notes
        summary["figure"] = f"knowledge: {summary['figure']}; sealed notes: {notes['figure']}"
        summary["ok"] = summary["ok"] and notes["ok"]
        return report(summary, args.json)
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.trials, seed, derived=args.derived)
    else:
        with scratch("oh-tamper-", args.keep) as tmp:
            summary = run(Target.libsql(tmp), args.trials, seed, derived=args.derived)
    return report(summary, args.json)


def _sealed_notes(target: Target, tmp: Path, args: Any) -> dict[str, Any]:
    """With ``--keys``, the notes half: the memory suite on sealed notebooks, with forgeries by
    a writer who holds no key (``_forged_content``) among its alterations."""
    return run(target.sealed(tmp), args.trials, seed_of(args.seed), derived=args.derived)


if __name__ == "__main__":
    raise SystemExit(main())
