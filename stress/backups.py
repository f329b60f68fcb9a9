"""Forgetting reaches backups (docs/keys.md): a copy of the sealed memory database taken while
notebooks are open cannot be opened once they are forgotten or purged, with everything left on
the machine (the master key, the key store, the live database).

Notebooks are filled with distinctive markers (``zbkp`` + 10 hex digits) in notes, multi-change
entries and kept answers, and other notebooks that stay open keep writing in between. After each
round a backup is taken as an operator takes one, then some notebooks are forgotten (``forget``)
and the rest expire and are purged by the purge worker's credential with its key shredder:

* embedded (the default): the database file and its WAL, copied;
* ``--postgres``: a ``pg_basebackup`` of a throwaway cluster of its own that runs with WAL
  archiving on (``oh.testing.archiving``), every finished WAL segment copied to an archive.
  Each backup is read by a cluster started on it, as a restore would (the database as it was
  when the backup was taken).

Then, for every backup:

* every sealed value of a forgotten notebook is tried with every data key the key store still
  holds (unwrapped with the master key): the count that opens must be 0;
* the store, opened on the backup with the live keyring, must refuse each forgotten notebook
  (``purged``) and still read each kept one;
* every file (databases, WALs, the WAL archive, key store, backups) is scanned for every
  marker: 0 bytes found, at any time, since content is never at rest in plain text.

Copies beyond the notes, on the embedded backend (where recall keeps vectors):

* recall vectors: every doomed notebook is embedded (hashing embedder) before its backup; each
  backup's vectors of a forgotten notebook are tried with every key left, and run through the
  word-list attack (the embedder has no secret): opened 0, words recovered 0;
* proposals: a note of each doomed notebook is proposed for review and rejected, so its text
  must leave ``knowledge.db`` (the marker scan covers it);
* readers: another process holds read transactions on the key store in a loop during every
  forget and purge; after each, the wrapped data key is in no file of the keys directory.

Values that are not content (names, kinds, digests, request ids, fingerprints, hashes, answer
ids) are kept as tokens sealed under the notebook's key:

* tokens: every name and digest of a forgotten notebook in a backup is tried with every key
  left: the count that opens must be 0; the note names are in no memory backup's bytes;
* guesses: the guesser is given the word list that holds every true note (all the markers,
  with every name and text shape this run writes) and hashes each guess as Oh digests a note
  and fingerprints a call; a guess whose digest or fingerprint is in a backup is confirmed:
  the count must be 0 (on a plain database every note would be).

    python stress/backups.py --notebooks 60
    python stress/backups.py --notebooks 30 --postgres

Prints ``opened from backups: 0`` and exits 1 if any forgotten value opens or any marker is found.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import re
import shutil
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness import common_arguments, report, scratch, seed_of
from oh.core.changes import fingerprint_and_log, parse_changes
from oh.errors import IntegrityError, Purged
from oh.keys import SEALED_VECTOR, Keyring, MasterKey, MasterKeys, NotebookCipher
from oh.recall import HashingEmbedder, Recall
from oh.services.knowledge import Knowledge
from oh.services.notebooks import Notebooks
from oh.storage.base import MemoryStore, PurgeAccess
from oh.storage.sqlite.keys import KeyShredder, SqliteKeyStore
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore, SqlitePurgeAccess
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import add, write
from oh.tools import Caller, Tools

# A sealed value as it is kept: (name, version, digest, content) of a record or logged change.
Sealed = tuple[str, int, str, str]


def guessed_digests(marks: list[str], notes: int) -> dict[str, str]:
    """Every digest and fingerprint (hex) a guesser computes from the word list ``marks``, with
    every name and text shape ``fill`` writes, each mapped to its guess."""
    guessed: dict[str, str] = {}
    for mark in marks:
        texts = [f"{mark} " + "reef " * repeat for repeat in (5, 400)] + [mark]
        for version in range(notes):
            for name in (f"note:n{version}", f"note:m{version}"):
                for text in texts:
                    changes = parse_changes([{"op": "add", "record": {"name": name, "text": text}}])
                    payload, logged = fingerprint_and_log(version, changes)
                    guessed[logged[0].digest or ""] = mark
                    guessed[payload] = mark
    return guessed


_HEX = re.compile(rb"[0-9a-f]{64}")


def confirmed(directory: Path, guessed: dict[str, str]) -> int:
    """How many guesses the files under ``directory`` confirm: their digests found there."""
    found: set[str] = set()
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found |= {
                guessed[h]
                for h in (m.group().decode() for m in _HEX.finditer(data))
                if h in guessed
            }
    return len(found)


def names_held(directory: Path) -> int:
    """How many note names (``note:n…``, ``note:m…``, ``note:k…``) the memory files of a backup
    hold: a name is a token at rest."""
    pattern = re.compile(rb"note:[nmk][0-9]")
    return sum(
        len(pattern.findall(path.read_bytes()))
        for path in directory.rglob("*")
        if path.is_file() and "knowledge" not in path.name
    )


def marker(rng: random.Random) -> str:
    return "zbkp" + "".join(rng.choice("0123456789abcdef") for _ in range(10))


def fill(store: MemoryStore, notebook_id: str, rng: random.Random, notes: int) -> list[str]:
    marks = []
    for version in range(notes):
        mark = marker(rng)
        marks.append(mark)
        long_text = f"{mark} " + "reef " * rng.choice((5, 400))
        changes = [add(f"note:n{version}", long_text)]
        if version % 3 == 2:
            extra = marker(rng)
            marks.append(extra)
            changes.append(add(f"note:m{version}", extra))
        write(store, notebook_id, version, f"r-{version}", *changes)
    return marks


def ask(tools: Tools, notebook_id: str) -> None:
    """Keep an answer (sealed like the rest), so backups carry kept answers too."""
    tools.call(
        Caller(notebook_id, "agent:stress", "agent:run"), "query", {"question": "current_notes"}
    )


_MARKER = re.compile(rb"zbkp[0-9a-f]{10}")


def scan(directories: list[Path], marks: list[str]) -> int:
    """How many times any of ``marks`` occurs in the files under ``directories`` (one pass a
    file: every marker-shaped run of bytes is looked up)."""
    wanted = {mark.encode() for mark in marks}
    found = 0
    for directory in directories:
        for path in directory.rglob("*"):
            if path.is_file():
                with contextlib.suppress(FileNotFoundError):  # a WAL segment removed meanwhile
                    data = path.read_bytes()
                    found += sum(1 for hit in _MARKER.finditer(data) if hit.group() in wanted)
    return found


class Embedded:
    """The embedded memory database: backups are copies of its file and WAL."""

    def __init__(self, work: Path, keys: Path) -> None:
        self.data, self.backups, self.keys = work / "data", work / "backups", keys
        self.data.mkdir()

    def open(self, keyring: Keyring) -> MemoryStore:
        return SqliteMemoryStore(self.data / "memory.db", keyring=keyring)

    def purge_access(self) -> PurgeAccess:
        return SqlitePurgeAccess(self.data / "memory.db", shredder=KeyShredder(self.keys))

    def backup(self, store: MemoryStore, name: str) -> Path:
        backup = self.backups / name
        backup.mkdir(parents=True)
        with store._lock:  # type: ignore[attr-defined]  # a nightly copy, as it is on disk
            for file in ("memory.db", "memory.db-wal"):
                if (self.data / file).exists():
                    shutil.copy(self.data / file, backup / file)
        return backup

    @contextlib.contextmanager
    def restored(self, backup: Path) -> Iterator[str]:
        yield str(backup / "memory.db")

    def sealed_values(self, location: str, notebook_id: str) -> list[Sealed]:
        conn = sqlite3.connect(f"file:{location}?mode=ro", uri=True)
        try:
            return conn.execute(
                "SELECT name, version, digest, content FROM records WHERE notebook_id = ?",
                (notebook_id,),
            ).fetchall()
        finally:
            conn.close()

    def open_copy(self, location: str, keyring: Keyring) -> MemoryStore:
        return SqliteMemoryStore(location, keyring=keyring)

    def directories(self) -> list[Path]:
        return []  # all under the scratch directory, scanned anyway

    vectors = True  # recall keeps vectors in the embedded memory database

    def vector_rows(self, location: str, notebook_id: str) -> list[tuple[str, str, bytes]]:
        conn = sqlite3.connect(f"file:{location}?mode=ro", uri=True)
        try:
            return [
                (model_id, digest, bytes(vector))
                for model_id, digest, vector in conn.execute(
                    "SELECT model_id, digest, vector FROM note_vectors WHERE notebook_id = ?",
                    (notebook_id,),
                )
            ]
        finally:
            conn.close()

    def close(self) -> None:
        pass


class Postgres:
    """A schema on a cluster of its own with WAL archiving on: backups are base backups."""

    def __init__(self, keys: Path) -> None:
        from oh.testing.archiving import ArchivingCluster
        from oh.testing.postgres_cluster import fresh_schema

        self.keys = keys
        self.archiving = ArchivingCluster()
        self._schema = fresh_schema(self.archiving.cluster, prefix="backups")
        self.schema = self._schema.__enter__()

    def open(self, keyring: Keyring) -> MemoryStore:
        from oh.storage.postgres.notebooks import PostgresMemoryStore

        return PostgresMemoryStore(self.schema.url(), keyring=keyring, max_size=2)

    def purge_access(self) -> PurgeAccess:
        from oh.storage.postgres.notebooks import PostgresPurgeAccess

        return PostgresPurgeAccess(self.schema.purge_url, shredder=KeyShredder(self.keys))

    def backup(self, store: MemoryStore, name: str) -> Path:
        backup = self.archiving.base_backup(name)
        self.archiving.archived()
        return backup

    @contextlib.contextmanager
    def restored(self, backup: Path) -> Iterator[str]:
        with self.archiving.started_on(backup) as cluster:
            yield cluster.url("oh_app", search_path=self.schema.name)

    def sealed_values(self, location: str, notebook_id: str) -> list[Sealed]:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            return conn.execute(
                "SELECT name, version, digest, content FROM records WHERE notebook_id = %s"
                " UNION ALL SELECT n.v, l.version, d.v, c.v FROM log AS l"
                " CROSS JOIN LATERAL oh_log_values(l.changes, l.name) AS n"
                " JOIN LATERAL oh_log_values(l.changes, l.content) AS c ON c.i = n.i"
                " JOIN LATERAL oh_log_values(l.changes, l.digest) AS d ON d.i = n.i"
                " WHERE l.notebook_id = %s AND c.v IS NOT NULL",
                (notebook_id, notebook_id),
            ).fetchall()

    def open_copy(self, location: str, keyring: Keyring) -> MemoryStore:
        from oh.storage.postgres.notebooks import PostgresMemoryStore

        return PostgresMemoryStore(location, keyring=keyring, max_size=1)

    def directories(self) -> list[Path]:
        self.archiving.archived()  # the latest WAL in the archive too, before it is scanned
        return [self.archiving.root]  # the live cluster, its backups, the WAL archive, logs

    vectors = False  # recall keeps no vectors on PostgreSQL in this release

    def vector_rows(self, location: str, notebook_id: str) -> list[tuple[str, str, bytes]]:
        return []

    def close(self) -> None:
        self._schema.__exit__(None, None, None)
        self.archiving.stop()


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--notebooks", type=int, default=60)
    parser.add_argument("--notes", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="base backups of a PostgreSQL")
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-stress-backups-") as work:
        keys = work / "keys" / "keys.db"
        backend = Postgres(keys) if args.postgres else Embedded(work, keys)
        try:
            summary = run(backend, work, keys, args, seed)
        finally:
            backend.close()
    return report(summary, args.json)


def run(
    backend: Embedded | Postgres, work: Path, keys: Path, args: Any, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    masters = MasterKeys(MasterKey.generate())
    store = backend.open(Keyring(masters, SqliteKeyStore(keys)))
    clock = FakeClock()
    notebooks = Notebooks(store, clock=clock)
    tools = Tools(store, None, b"x" * 32, clock=clock)
    (work / "knowledge").mkdir()
    knowledge_store = SqliteKnowledgeStore(work / "knowledge" / "knowledge.db")
    review = Knowledge(knowledge_store, store, clock=clock)
    recall = None
    if backend.vectors:
        vector_store = SqliteVectorStore(backend.data / "memory.db")  # type: ignore[union-attr]
        recall = Recall(store, vector_store, HashingEmbedder(), None, clock=clock)
    reader_stop = multiprocessing.get_context("spawn").Event()
    reader = multiprocessing.get_context("spawn").Process(
        target=_read_keys_in_a_loop, args=(str(keys), reader_stop)
    )
    reader.start()
    keys_left = forgets_checked = 0
    proposals_rejected = 0
    kept: list[Any] = []
    all_marks: list[str] = []
    forgotten: dict[str, Path] = {}  # notebook id -> the backup that holds it
    tried = opened = refused = still_read = 0
    found_meanwhile = 0
    per_round = max(1, args.notebooks // args.rounds)
    for round_ in range(args.rounds):
        # notebooks that stay: opened this round, so the clock's jump leaves them unexpired
        kept = [notebooks.open("ann", "doc", f"kept-{round_}-{i}") for i in range(3)]
        doomed = [notebooks.open("ann", "doc", f"r{round_}-{i}") for i in range(per_round)]
        for notebook in doomed:
            all_marks += fill(store, notebook.id, rng, args.notes)
            ask(tools, notebook.id)
            # Proposed for review and rejected: the rule says the text goes with the rejection.
            proposal = review.propose("ann", notebook=notebook.id, name="note:n0", source=_SOURCE)
            review.decide("ann", proposal.id, decision="reject", reason="stress")
            proposals_rejected += 1
        for notebook in kept:
            all_marks += fill_more(store, notebook.id, 0, rng)
        if recall is not None:
            recall.catch_up_all()
        backup = backend.backup(store, f"round-{round_}")
        found_meanwhile += scan([work, *backend.directories()], all_marks)
        half = len(doomed) // 2
        wrapped_keys = {n.id: _wrapped(keys, n.id) for n in doomed}
        for notebook in doomed[:half]:
            notebooks.forget(notebook.id, "ann")
            forgotten[notebook.id] = backup
            # With a reader in the key store: the key is gone from every file when forget answers.
            keys_left += _key_files_holding(keys.parent, wrapped_keys[notebook.id])
            forgets_checked += 1
        clock.advance(hours=25)
        access = backend.purge_access()
        try:
            due = access.expired(clock())
            purged = access.purge([n.id for n in doomed[half:] if n.id in due], clock())
        finally:
            access.close()
        for notebook_id in purged:
            forgotten[notebook_id] = backup
            keys_left += _key_files_holding(keys.parent, wrapped_keys[notebook_id])
            forgets_checked += 1
        store.compact()
        clock.advance(hours=-24)  # the kept notebooks of this round are not yet due
    reader_stop.set()
    reader.join(60)
    if recall is not None:
        recall.vectors.close()  # type: ignore[attr-defined]
    knowledge_store.close()
    vector_tries = vectors_opened = plain_vectors = words_recovered = 0
    token_tries = tokens_opened = guesses = guesses_confirmed = names_found = 0
    guessed = guessed_digests(all_marks, args.notes)
    live = Keyring(masters, SqliteKeyStore(keys))
    ciphers = [
        NotebookCipher(notebook_id, masters.by_id(master_id).unwrap(wrapped, notebook_id))
        for notebook_id, master_id, wrapped in live.store.wrapped()
    ]
    for backup in sorted(set(forgotten.values())):
        gone = [notebook_id for notebook_id, held in forgotten.items() if held == backup]
        guesses += len(guessed)
        guesses_confirmed += confirmed(backup, guessed)
        names_found += names_held(backup)
        with backend.restored(backup) as location:
            for notebook_id in gone:
                for name, version, digest, content in backend.sealed_values(location, notebook_id):
                    for cipher in ciphers:
                        tried += 1
                        rebound = _rebound(cipher, notebook_id)
                        try:  # the forgotten notebook's binding, under a key that still exists
                            rebound.open(content, name, version, digest)
                            opened += 1
                        except IntegrityError:
                            pass
                        for token, column in ((name, "name"), (digest, "digest")):
                            token_tries += 1
                            try:
                                rebound.untoken(token, column)
                                tokens_opened += 1
                            except IntegrityError:
                                pass
                for model_id, digest, vector in backend.vector_rows(location, notebook_id):
                    plain_vectors += not vector.startswith(SEALED_VECTOR)
                    words_recovered += _words_recovered(vector)
                    for cipher in ciphers:
                        vector_tries += 1
                        try:
                            _rebound(cipher, notebook_id).open_vector(vector, model_id, digest)
                            vectors_opened += 1
                        except IntegrityError:
                            pass
            copy = backend.open_copy(location, Keyring(masters, SqliteKeyStore(keys)))
            try:
                for notebook_id in gone:
                    try:
                        copy.record(notebook_id, "note:n0")
                    except Purged:
                        refused += 1
            finally:
                copy.close()
    for notebook in kept:
        if store.record(notebook.id, "note:k0") is not None:
            still_read += 1
    live.close()
    store.close()
    found = found_meanwhile + scan([work, *backend.directories()], all_marks)
    ok = opened == 0 and found == 0 and refused == len(forgotten) and still_read == len(kept)
    ok = ok and tried > 0 and vectors_opened == 0 and plain_vectors == 0
    ok = ok and words_recovered == 0 and keys_left == 0
    ok = ok and (vector_tries > 0 or not backend.vectors)
    ok = ok and token_tries > 0 and tokens_opened == 0 and guesses_confirmed == 0
    ok = ok and names_found == 0
    return {
        "figure": (
            f"opened from backups: {opened} of {tried} tries; vectors opened: {vectors_opened}"
            f" of {vector_tries}; words recovered: {words_recovered}; plain vectors:"
            f" {plain_vectors}; keys left with a reader: {keys_left} of {forgets_checked};"
            f" tokens opened: {tokens_opened} of {token_tries}; guesses confirmed:"
            f" {guesses_confirmed} of {len(guessed)} per backup; names held: {names_found};"
            f" bytes found: {found}"
        ),
        "seed": seed,
        "backend": "postgres" if args.postgres else "libsql",
        "forgotten_notebooks": len(forgotten),
        "backups": args.rounds,
        "tries": tried,
        "opened": opened,
        "refused_by_the_store": refused,
        "markers": len(all_marks),
        "bytes_found": found,
        "kept_still_read": still_read,
        "vector_tries": vector_tries,
        "vectors_opened": vectors_opened,
        "plain_vectors": plain_vectors,
        "words_recovered": words_recovered,
        "proposals_rejected": proposals_rejected,
        "token_tries": token_tries,
        "tokens_opened": tokens_opened,
        "guesses": guesses,
        "guesses_confirmed": guesses_confirmed,
        "names_held": names_found,
        "forgets_with_a_reader": forgets_checked,
        "keys_left_with_a_reader": keys_left,
        "ok": ok,
    }


def fill_more(store: MemoryStore, notebook_id: str, version: int, rng: random.Random) -> list[str]:
    mark = marker(rng)
    write(store, notebook_id, version, f"k-{version}", add(f"note:k{version}", mark))
    return [mark]


_SOURCE = {"document": "doc", "passage": "the passage", "locator": "p. 1"}
_WORDS = ["reef", "zbkp", "note", "the", "tide", "gauge", "coral", "survey"]


def _read_keys_in_a_loop(path: str, stop: Any) -> None:
    """Another process reading the key store, a read transaction at a time, until told."""
    while not Path(path).exists() and not stop.is_set():
        time.sleep(0.01)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    while not stop.is_set():
        conn.execute("BEGIN")
        conn.execute("SELECT notebook_id, wrapped FROM data_keys").fetchall()
        time.sleep(0.002)
        conn.execute("COMMIT")
    conn.close()


def _wrapped(keys: Path, notebook_id: str) -> bytes:
    store = SqliteKeyStore(keys, create=False)
    try:
        found = store.get(notebook_id)
    finally:
        store.close()
    return b"" if found is None else found[1]


def _key_files_holding(directory: Path, wrapped: bytes) -> int:
    if not wrapped:
        return 0
    return sum(1 for p in directory.iterdir() if p.is_file() and wrapped in p.read_bytes())


def _words_recovered(stored: bytes) -> int:
    """The word-list attack on one stored vector: words of a list whose hashing embedding is
    closest to it. A sealed vector is not a float32 vector of the model at all: 0."""
    import numpy as np

    embedder = HashingEmbedder()
    if len(stored) != 4 * embedder.dimensions:
        return 0
    scores = embedder.embed(_WORDS) @ np.frombuffer(stored, dtype="<f4")
    return int((scores > 0.1).sum())


def _rebound(cipher: NotebookCipher, notebook_id: str) -> NotebookCipher:
    """The cipher's key, bound as ``notebook_id``'s (an attacker's best try with a live key)."""
    rebound = NotebookCipher(notebook_id, bytes(32))  # the notebook's bindings, no cache
    rebound._aead = cipher._aead
    return rebound


if __name__ == "__main__":
    sys.exit(main())
