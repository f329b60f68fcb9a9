"""Tamper evidence (SPEC §2, §5): altering a log entry or a stored record directly in the
database, outside Oh, is detected by ``verify``, and ``read`` never serves a damaged record.

A database is filled with notebooks whose logs hold adds, replaces and removes of 1 to 64
changes. Each trial makes one random alteration with plain SQL, checks, and undoes it:

* a cell of a random row and column of ``log`` (``log_changes`` on PostgreSQL) or ``records``
  (on the embedded log, a change column of an entry with several changes is a JSON array, so
  the edit lands anywhere in it): one character
  changed, inserted or deleted, the text cut short or emptied, an integer moved, a nullable
  value set to NULL, a value copied from another row (a valid hash, digest or content that
  belongs elsewhere), or (SQLite) the same bytes stored as a BLOB instead of text;
* a row deleted, or duplicated under another key;
* two changes of one entry swapped (their ``seq``, or their places in the arrays);
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
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

from crash_safety import apply_names, batch
from harness import Target, common_arguments, postgres_target, report, scratch, seed_of
from oh.core.changes import parse_changes
from oh.core.clock import Clock
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, open_notebook
from oh.testing.tools import SECRET
from oh.tools import Caller, Tools
from oh.verify import replay, verify_notebook

DIMENSIONS = 16  # recall vectors of the fill (HashingEmbedder): small, so the menu is quick

# The tables and their alterable columns: the embedded log keeps an entry and its changes in one
# row (several changes as JSON arrays, migration 0006); PostgreSQL keeps the changes apart.
_ENTRY = ["version", "request_id", "fingerprint", "author", "written_at", "prev_hash", "hash"]
_CHANGE = ["op", "name", "content", "digest"]
_RECORDS = ["name", "kind", "content", "digest", "author", "written_at", "version"]
COLUMNS = {
    "libsql": {"log": [*_ENTRY, "changes", *_CHANGE], "records": _RECORDS},
    "postgres": {
        "log": _ENTRY,
        "log_changes": ["version", "seq", *_CHANGE],
        "records": _RECORDS,
    },
}
KEYS = {
    "log": ["notebook_id", "version"],
    "log_changes": ["notebook_id", "version", "seq"],
    "records": ["notebook_id", "name"],
}
NULLABLE = {
    ("log_changes", "content"),
    ("log_changes", "digest"),
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


def _swap(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    if raw.kind == "libsql":
        return _swap_in_arrays(rng, raw, notebook_id)
    rows = raw(
        "SELECT version, seq FROM log_changes WHERE notebook_id = ? AND version IN"
        " (SELECT version FROM log_changes WHERE notebook_id = ? GROUP BY version"
        " HAVING count(*) > 1)",
        (notebook_id, notebook_id),
    )
    if not rows:
        return None
    version = rng.choice(rows)[0]
    seqs = rng.sample([seq for v, seq in rows if v == version], 2)
    sql = "UPDATE log_changes SET seq = ? WHERE notebook_id = ? AND version = ? AND seq = ?"
    swap = [
        (sql, (-1, notebook_id, version, seqs[0])),
        (sql, (seqs[0], notebook_id, version, seqs[1])),
        (sql, (seqs[1], notebook_id, version, -1)),
    ]
    trial = Trial("log_changes two changes of one entry swapped", swap)
    trial.undo = swap
    return trial


def _swap_in_arrays(rng: random.Random, raw: Raw, notebook_id: str) -> Trial | None:
    rows = raw(
        "SELECT version, changes FROM log WHERE notebook_id = ? AND changes > 1", (notebook_id,)
    )
    if not rows:
        return None
    version, count = rng.choice(rows)
    i, j = rng.sample(range(count), 2)
    swapped = ", ".join(
        f"{c} = json_set({c}, '$[{i}]', {c} ->> {j}, '$[{j}]', {c} ->> {i})"
        for c in ("op", "name", "content", "digest")
    )
    swap = [
        (f"UPDATE log SET {swapped} WHERE notebook_id = ? AND version = ?", (notebook_id, version))
    ]
    trial = Trial("log two changes of one entry swapped", swap)
    trial.undo = swap  # a swap undoes itself
    return trial


# The earlier writes of each name: the change table, or on the embedded log each entry's changes.
_WRITES = {
    "postgres": "SELECT notebook_id, version, name, content, digest FROM log_changes",
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
        if roll < 0.75:
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
    from oh.storage.libsql_vectors import LibsqlVectorStore

    vectors = LibsqlVectorStore(target.location)
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
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.trials, seed, derived=args.derived)
    else:
        with scratch("oh-tamper-", args.keep) as tmp:
            summary = run(Target.libsql(tmp), args.trials, seed, derived=args.derived)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
