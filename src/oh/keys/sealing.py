"""Sealed notebooks (docs/keys.md): content sealed on its way into a store, opened on its way
out, in one place for every backend that seals; no SQL here.

What is sealed is a notebook's content: the canonical JSON of each logged change and of each
current record, and a kept answer's question, parameters and rows. Names, digests, versions,
authors and times stay readable: the database finds, orders and checks rows by them, and the
seal binds them (``NotebookCipher``), so a value moved to another name, version or notebook no
longer opens. Hashes and digests are over the plaintext, exactly as without keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from oh.core.changes import LogEntry, LoggedChange
from oh.core.records import StoredRecord, kind_of
from oh.errors import AlreadyExists, IntegrityError, StorageUnavailable
from oh.keys.cipher import SEALED, Keyring, NotebookCipher

__all__ = [
    "ANSWER_SEALED",
    "LOST_KEYS_FIX",
    "SEALED_MARKER",
    "Sealing",
    "check_keys_fit",
    "cipher_for_sealing",
    "entry_tokens",
    "is_plain",
    "keyring_of",
    "open_answer_row",
    "open_entry",
    "open_record_row",
    "opened_values",
    "seal_answer_fields",
    "seal_answer_values",
    "seal_entry",
    "seal_records",
    "tokens",
]


@runtime_checkable
class Sealing(Protocol):
    """A store that seals what it keeps with a keyring (a SQL memory store)."""

    @property
    def keyring(self) -> Keyring | None:
        """The keyring it seals with (it owns and closes it), or None when it seals nothing."""
        ...


def keyring_of(store: object) -> Keyring | None:
    """The keyring ``store`` seals with; None for a store that seals nothing."""
    return store.keyring if isinstance(store, Sealing) else None


_new_tuple = tuple.__new__
# The kept answer's columns (``oh.storage.rows.ANSWER_COLUMNS``) that are sealed, by position.
ANSWER_SEALED = {3: "question", 4: "params", 9: "rows"}


def seal_entry(cipher: NotebookCipher, entry: LogEntry) -> LogEntry:
    """``entry`` as it is kept at rest: each change's content sealed (bound to its plain name,
    version and digest), and its request id, fingerprint, hashes, names and digests kept as
    tokens (``NotebookCipher.token``). The hashes are those of the plaintext, as without keys."""
    version = entry.version
    token = cipher.token
    changes = tuple(
        [
            _new_tuple(
                LoggedChange,
                (
                    op,
                    token(name, "name"),
                    None if content is None else cipher.seal(content, name, version, digest or ""),
                    None if digest is None else token(digest, "digest"),
                ),
            )
            for op, name, content, digest in entry.changes
        ]
    )
    request_id, fingerprint, prev_hash, hash_ = entry_tokens(
        cipher, entry.request_id, entry.fingerprint, entry.prev_hash, entry.hash
    )
    return _new_tuple(
        LogEntry,
        (
            entry.notebook_id,
            version,
            request_id,
            fingerprint,
            entry.author,
            entry.written_at,
            changes,
            prev_hash,
            hash_,
        ),
    )


def entry_tokens(
    cipher: NotebookCipher, request_id: str, fingerprint: str, prev_hash: str, hash_: str
) -> tuple[str, str, str, str]:
    """A log entry's request id, fingerprint, previous hash and hash as kept at rest. The
    request id and fingerprint are not remembered (one per call); the hash is, since the next
    entry follows it."""
    token = cipher.token
    return (
        token(request_id, "request", keep=False),
        token(fingerprint, "fingerprint", keep=False),
        token(prev_hash, "hash"),
        token(hash_, "hash"),
    )


def open_entry(cipher: NotebookCipher, entry: LogEntry) -> LogEntry:
    """The entry ``seal_entry`` kept; ``integrity`` if any value does not open."""
    version = entry.version
    untoken = cipher.untoken
    opened = []
    for op, name, content, digest in entry.changes:
        name = untoken(name, "name")
        digest = None if digest is None and op == "remove" else untoken(digest, "digest")
        if not (content is None and op == "remove"):
            content = cipher.open(content, name, version, digest or "")
        opened.append(_new_tuple(LoggedChange, (op, name, content, digest)))
    return _new_tuple(
        LogEntry,
        (
            entry.notebook_id,
            version,
            untoken(entry.request_id, "request"),
            untoken(entry.fingerprint, "fingerprint"),
            entry.author,
            entry.written_at,
            tuple(opened),
            untoken(entry.prev_hash, "hash"),
            untoken(entry.hash, "hash"),
        ),
    )


def seal_records(cipher: NotebookCipher, records: Iterable[StoredRecord]) -> list[StoredRecord]:
    """Current records as kept at rest: content sealed, name, kind and digest as tokens."""
    token = cipher.token
    return [
        StoredRecord(
            token(r.name, "name"),
            token(r.kind, "kind"),
            cipher.seal(r.content, r.name, r.version, r.digest),
            token(r.digest, "digest"),
            r.author,
            r.written_at,
            r.version,
        )
        for r in records
    ]


def open_record_row(
    cipher: NotebookCipher, row: Sequence[Any], name: str | None = None
) -> StoredRecord:
    """A ``RECORD_COLUMNS`` row as a record, its values opened (``name``: the name it was
    found by, when known). Its kind is the kind its name gives (the stored token says the same,
    which verify checks: ``record_checks``)."""
    kept, _, content, digest, author, written_at, version = row
    if name is None:
        name = cipher.untoken(kept, "name")
    digest = cipher.untoken(digest, "digest")
    # A damaged row's value of the wrong type binds as its text, which cannot match the seal.
    opened = cipher.open(content, name, version, digest)
    return StoredRecord(name, kind_of(name), opened, digest, author, written_at, version)


def tokens(cipher: NotebookCipher | None, values: Iterable[str], column: str) -> list[str]:
    """``values`` as ``column`` keeps them: tokens when the store seals (``cipher``)."""
    if cipher is None:
        return list(values)
    token = cipher.token
    return [token(value, column) for value in values]


def opened_values(cipher: NotebookCipher | None, values: Iterable[Any], column: str) -> list[Any]:
    """The values ``tokens`` kept (None stays None)."""
    if cipher is None:
        return list(values)
    untoken = cipher.untoken
    return [None if value is None else untoken(value, column) for value in values]


def seal_answer_values(cipher: NotebookCipher, values: Sequence[Any]) -> tuple[Any, ...]:
    """``answer_values`` with the question, parameters and rows sealed and the answer id a
    token (it is a digest of the question and parameters)."""
    answer_id = values[1]
    sealed = [
        cipher.seal_field(value, answer_id, ANSWER_SEALED[i]) if i in ANSWER_SEALED else value
        for i, value in enumerate(values)
    ]
    sealed[1] = cipher.token(answer_id, "answer")
    return tuple(sealed)


def open_answer_row(
    cipher: NotebookCipher, row: Sequence[Any], *, strict: bool = True
) -> tuple[Any, ...]:
    """An ``ANSWER_COLUMNS`` row with its sealed columns opened; ``integrity`` if one does not
    open, or with ``strict=False`` that column left as stored (verify then reports the answer)."""
    opened = list(row)
    try:
        opened[1] = cipher.untoken(row[1], "answer")
    except IntegrityError:
        if strict:
            raise
    answer_id = _text(opened[1])
    for i, column in ANSWER_SEALED.items():
        try:
            opened[i] = cipher.open_field(row[i], answer_id, column)
        except IntegrityError:
            if strict:
                raise
    return tuple(opened)


# -- sealing a database written before keys (each backend's ``_seal_notebooks``) ------------------

# The key store's marker that a memory database was sealed once, so that notebooks found later
# without a key are refused, never sealed as they are: whoever can write the database but not the
# key store could otherwise have forged notes sealed for them.
SEALED_MARKER = "memory_sealed"


def is_plain(value: Any) -> bool:
    """Whether a stored value is plain text still to be sealed (a sealed value is left as is)."""
    return type(value) is str and not value.startswith(SEALED)


def cipher_for_sealing(keyring: Keyring, notebook_id: str) -> NotebookCipher:
    """The notebook's cipher, its data key made first if it has none yet (a run sealing the
    database that stopped half way, or another process sealing it at the same moment, may have
    made it already)."""
    if keyring.has_key(notebook_id):
        return keyring.cipher(notebook_id)
    try:
        return keyring.create(notebook_id)
    except AlreadyExists:
        return keyring.cipher(notebook_id)


def seal_answer_fields(cipher: NotebookCipher, answer_id: str, fields: Sequence[Any]) -> list[Any]:
    """A kept answer's question, parameters and rows, each sealed unless it is already."""
    columns = (ANSWER_SEALED[3], ANSWER_SEALED[4], ANSWER_SEALED[9])
    return [
        cipher.seal_field(value, answer_id, column) if is_plain(value) else value
        for value, column in zip(fields, columns, strict=True)
    ]


def _text(value: Any) -> str:
    """A bound value as the seal reads it (a damaged row's non-text value cannot match)."""
    return value if type(value) is str else repr(value)


LOST_KEYS_FIX = (
    " Put the keys directory back (pass --keys DIR if it moved; the master key from its backup)"
    " and start again: everything reads as before. If keys.db is truly lost, the notes of the"
    " notebooks open when it was lost can never be read again: move memory.db aside to start"
    " afresh (docs/keys.md, Losing the key store). Nothing was changed"
)


def check_keys_fit(keyring: Keyring | None, where: str) -> None:
    """Refuse the sealed memory database ``where`` unless ``keyring`` is its own, before anything
    is opened for writing: no master key, an empty or replaced key store (it has no record of
    sealing the database), or a master key other than the one that wrapped its data keys.
    Opening on with any of them would make new keys for old content, or answer every read
    ``integrity``: a lost key store stops the host instead, and restoring it restores
    everything. A notebook that is not forgotten in the database but has no data key is not
    refused: it was forgotten after this copy was taken (a restored backup) and reads as
    ``purged``; nothing is written to it."""
    if keyring is None:
        raise StorageUnavailable(
            f"the notebooks in {where} are sealed, and no master key is configured (no"
            " master.key in the keys directory, and OH_MASTER_KEY is not set)." + LOST_KEYS_FIX
        )
    store = keyring.store
    path = getattr(store, "path", "the key store")
    if store.marker(SEALED_MARKER) is None:
        raise StorageUnavailable(
            f"the notebooks in {where} are sealed, but the key store {path} is not the one they"
            " were sealed with (it has no record of them: lost, replaced or emptied)."
            + LOST_KEYS_FIX
        )
    known = {key.id for key in (keyring.masters.current, *keyring.masters.others)}
    foreign = sorted({master_id for _, master_id, _ in store.wrapped()} - known)
    if foreign:
        raise StorageUnavailable(
            f"the data keys in {path} are wrapped by master key {', '.join(foreign)}, but the"
            f" configured master key is {keyring.masters.current.id}: restore the master key"
            " that goes with this key store (the keys directory's master.key, or"
            " OH_MASTER_KEY, from its backup) and start again (docs/keys.md, Losing the master"
            " key). Nothing was changed"
        )
